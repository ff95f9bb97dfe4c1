"""The real public traces in ../shared/traces: they parse, and the catalogue's digests match.

These files live beside the repository, not in it, so the module skips without them.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import pytest

from tandem.sim.traces import CATALOG, FORMATS, parse_trace

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"{TRACES} is absent: the real public traces live beside the repository (../shared/traces), not in it",
)

# catalogue name -> the copy in ../shared/traces
SHARED_COPY = {
    "azure-conv-2023": "azure_llm_2023_conv.csv",
    "azure-code-2023": "azure_llm_2023_code.csv",
    "mooncake-conversation": "mooncake_conversation.jsonl",
    "mooncake-synthetic": "mooncake_synthetic.jsonl",
}


def _text(file_name: str) -> str:
    return (TRACES / file_name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("file_name", "format", "requests", "duration_s"),
    [
        ("azure_llm_2023_conv.csv", "azure", 19_366, 3501.721937),
        ("azure_llm_2023_code.csv", "azure", 8_819, 3435.948056),
        ("mooncake_conversation.jsonl", "mooncake", 12_031, 3536.999),
        ("mooncake_synthetic.jsonl", "mooncake", 3_993, 1022.025),
    ],
)
def test_real_traces_parse_with_the_published_row_counts(file_name, format, requests, duration_s):
    text = _text(file_name)
    trace = parse_trace(text, file_name)
    assert len(trace) == requests
    assert trace.arrival_s[0] == 0.0
    assert np.all(np.diff(trace.arrival_s) >= 0)
    assert trace.duration_s == pytest.approx(duration_s, abs=1e-6)
    assert trace.input_tokens.min() >= 1 and trace.output_tokens.min() >= 1
    assert parse_trace(text, file_name, format=format) == trace


def test_azure_conversation_trace_figures():
    trace = parse_trace(_text("azure_llm_2023_conv.csv"), "conv.csv")
    summary = trace.summary()
    assert summary["rate_per_s"] == pytest.approx(5.53, abs=0.01)
    assert summary["input_tokens"]["p50"] == 1020 and summary["input_tokens"]["max"] == 14_050
    assert summary["output_tokens"]["p50"] == 129 and summary["output_tokens"]["max"] == 1_000
    # First two rows: 18:15:46.6805900 and 18:15:50.9951690.
    assert trace.arrival_s[1] == 4.314579


def test_parsing_the_azure_conversation_trace_is_fast():
    text = _text("azure_llm_2023_conv.csv")
    best = min(_timed(lambda: parse_trace(text, "conv.csv")) for _ in range(3))
    assert best < 0.5, f"parsing 19,366 rows took {best:.3f} s"


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(SHARED_COPY))
def test_catalogue_digest_size_and_count_match_the_shared_copy(name):
    entry = CATALOG[name]
    data = (TRACES / SHARED_COPY[name]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry.sha256
    assert len(data) == entry.size_bytes
    assert entry.format in FORMATS
    assert len(parse_trace(data.decode("utf-8"), entry.file_name, format=entry.format)) == entry.requests
