"""The public request traces `tandem trace fetch NAME` knows: where each lives, its digest.

URLs are pinned to a commit (or a release) so the bytes cannot change under a digest.
The digests were computed from the upstream files themselves (the copies in
`../shared/traces`, whose sizes match upstream byte for byte). BurstGPT is a 52 MB
release asset that was not available offline to hash, so it has no recorded digest: fetch
refuses it unless the user supplies one (`--sha256`) or opts out (`--no-verify`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tandem.errors import InputError, Problem

_AZURE = "https://raw.githubusercontent.com/Azure/AzurePublicDataset/b469a113cedc/data"
_MOONCAKE = "https://raw.githubusercontent.com/kvcache-ai/Mooncake/3b5a59413395/FAST25-release/traces"
_SPLITWISE = 'Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024'
_MOONCAKE_PAPER = 'Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST 2025'


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str
    url: str
    file_name: str
    format: str  # a parser name: azure | mooncake | burstgpt
    sha256: str | None  # None: not recorded; fetch then needs --sha256 or --no-verify
    size_bytes: int | None
    requests: int | None  # rows as published (BurstGPT: including failed requests)
    licence: str
    citation: str


CATALOG: dict[str, CatalogEntry] = {
    entry.name: entry
    for entry in (
        CatalogEntry(
            name="azure-conv-2023",
            description="Azure LLM inference, conversation service, 1 h on 2023-11-16",
            url=f"{_AZURE}/AzureLLMInferenceTrace_conv.csv",
            file_name="AzureLLMInferenceTrace_conv.csv",
            format="azure",
            sha256="2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
            size_bytes=719_188,
            requests=19_366,
            licence="CC-BY-4.0",
            citation=_SPLITWISE,
        ),
        CatalogEntry(
            name="azure-code-2023",
            description="Azure LLM inference, coding service, 1 h on 2023-11-16",
            url=f"{_AZURE}/AzureLLMInferenceTrace_code.csv",
            file_name="AzureLLMInferenceTrace_code.csv",
            format="azure",
            sha256="54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
            size_bytes=320_117,
            requests=8_819,
            licence="CC-BY-4.0",
            citation=_SPLITWISE,
        ),
        CatalogEntry(
            name="mooncake-conversation",
            description="Kimi (Moonshot AI) conversation requests, ~59 min, with prefix-block hashes",
            url=f"{_MOONCAKE}/conversation_trace.jsonl",
            file_name="conversation_trace.jsonl",
            format="mooncake",
            sha256="b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
            size_bytes=3_029_533,
            requests=12_031,
            licence="Apache-2.0",
            citation=_MOONCAKE_PAPER,
        ),
        CatalogEntry(
            name="mooncake-synthetic",
            description="Mooncake synthetic long-context requests, ~17 min",
            url=f"{_MOONCAKE}/synthetic_trace.jsonl",
            file_name="synthetic_trace.jsonl",
            format="mooncake",
            sha256="bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
            size_bytes=1_136_313,
            requests=3_993,
            licence="Apache-2.0",
            citation=_MOONCAKE_PAPER,
        ),
        CatalogEntry(
            name="burstgpt",
            description="BurstGPT: ChatGPT and GPT-4 requests on Azure OpenAI, first 2 months (failures included)",
            url="https://github.com/HPMLL/BurstGPT/releases/download/v1.1/BurstGPT_1.csv",
            file_name="BurstGPT_1.csv",
            format="burstgpt",
            sha256=None,
            size_bytes=None,
            requests=None,  # upstream README: about 1,429.7k lines
            licence="CC-BY-4.0",
            citation='Wang et al., "BurstGPT: A Real-world Workload Dataset to Optimize LLM Serving Systems", KDD 2025 (arXiv:2401.17644)',
        ),
    )
}


def lookup(name: str) -> CatalogEntry:
    """The entry called `name`, or an InputError listing the known names."""
    entry = CATALOG.get(name)
    if entry is None:
        raise InputError(Problem("NAME", f"no trace called {name!r}; known: {', '.join(sorted(CATALOG))}"))
    return entry
