"""Which container of a pod runs a serving engine (SGLang or vLLM), and how it was started.

The operator reads it to declare the ports an engine listens on and SGLang's bootstrap
annotation; the local API server reads it to stand an engine in for the pod. One reading,
so both agree (the contract of issue 28). A container is an engine when, first match wins:

1. the pod annotation `tandem.dev/engine` says `sglang` or `vllm` (the container named by
   `tandem.dev/engine-container`, else the first one);
2. its image's repository names `sglang` or `vllm` (`lmsysorg/sglang:...`, `vllm/vllm-openai:...`),
   unless it runs a router (`sglang_router`, `vllm_router`: the SGLang image ships one);
3. its command and args run `sglang.launch_server` or start `vllm serve` (a `sh -c` line is
   read as the shell would split it).

Its settings come from its command and args (`--flag value` and `--flag=value`; the last
one given wins, as argparse reads them). Pure: a pod's payload in, a value out. The local
API server's stand-ins read pods through it (`apiserver/engines/recognition.py` adds what
only a stand-in needs: the serving model's profile, the GPU, the replica's size).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from tandem.api.naming import ROLE_LABEL

EngineKind = Literal["sglang", "vllm"]
ServingRole = Literal["prefill", "decode"]

ENGINE_ANNOTATION = "tandem.dev/engine"
ENGINE_CONTAINER_ANNOTATION = "tandem.dev/engine-container"
SGLANG_BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"  # read by sglang-router's service discovery

SGLANG_PORT = 30000
SGLANG_BOOTSTRAP_PORT = 8998
VLLM_PORT = 8000
HTTP_PORT_NAME = "http"
BOOTSTRAP_PORT_NAME = "bootstrap"

_KINDS: tuple[EngineKind, ...] = ("sglang", "vllm")
ROUTER_MODULES = ("sglang_router", "vllm_router")  # `python -m sglang_router.launch_router ...`
ROUTER_PROGRAMS = ("sglang-router", "vllm-router", "smg", "amg")  # their console scripts
_ROLES: Mapping[str, ServingRole] = {"prefill": "prefill", "decode": "decode"}
_VLLM_ROLES: Mapping[str, ServingRole] = {"kv_producer": "prefill", "kv_consumer": "decode"}


@dataclass(frozen=True)
class Engine:
    """An engine container as its command line starts it (defaults filled in)."""

    kind: EngineKind
    container: int  # its index in the pod's `spec.containers`
    model: str | None  # `--model-path` (SGLang), `vllm serve MODEL` or `--model` (vLLM)
    tensor_parallel: int
    pipeline_parallel: int  # SGLang `--pp-size`, vLLM `--pipeline-parallel-size`
    port: int  # where it serves HTTP
    role: ServingRole | None  # what its flags make it; None: not said (see `serving_role`)
    bootstrap_port: int | None  # SGLang's PD bootstrap port (None for vLLM)
    kv_connector: bool = False  # vLLM started with `--kv-transfer-config` (a prefill/decode engine)


def engine_of(pod: Mapping[str, Any]) -> Engine | None:
    """The pod's engine container, read from its command line; None when it runs none."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    containers: Sequence[Mapping[str, Any]] = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        return None
    marked = annotations.get(ENGINE_ANNOTATION)
    if marked in _KINDS:
        name = annotations.get(ENGINE_CONTAINER_ANNOTATION)
        index = next((i for i, c in enumerate(containers) if c.get("name") == name), 0) if name else 0
        return _read(marked, index, containers[index])
    for index, container in enumerate(containers):
        kind = _kind_of_image(str(container.get("image") or ""))
        if kind is not None and not _runs_router(_tokens(container)):
            return _read(kind, index, container)
    for index, container in enumerate(containers):
        kind = _kind_of_command(_tokens(container))
        if kind is not None:
            return _read(kind, index, container)
    return None


def serving_role(engine: Engine, pod: Mapping[str, Any]) -> ServingRole | None:
    """The engine's role: its flags, else the pod's `tandem.dev/role` label."""
    if engine.role is not None:
        return engine.role
    return _ROLES.get(((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL, ""))


def listening_ports(engine: Engine, role: ServingRole | None) -> dict[str, int]:
    """The ports the engine listens on, by name: `http`, and `bootstrap` for an SGLang prefill."""
    ports = {HTTP_PORT_NAME: engine.port}
    if engine.kind == "sglang" and role == "prefill" and engine.bootstrap_port is not None:
        ports[BOOTSTRAP_PORT_NAME] = engine.bootstrap_port
    return ports


def _runs_router(tokens: list[str]) -> bool:
    """A router started from an engine's image (`lmsysorg/sglang` also ships the model
    gateway): it serves no model, so it is no engine."""
    return any(t.split(".", 1)[0] in ROUTER_MODULES or t.rsplit("/", 1)[-1] in ROUTER_PROGRAMS for t in tokens)


def _kind_of_image(image: str) -> EngineKind | None:
    repository = image.split("@", 1)[0]
    slash, colon = repository.rfind("/"), repository.rfind(":")
    if colon > slash:
        repository = repository[:colon]  # the tag (a colon before the last slash is a registry's port)
    return next((kind for kind in _KINDS if kind in repository.lower()), None)


def _kind_of_command(tokens: list[str]) -> EngineKind | None:
    if "sglang.launch_server" in tokens:
        return "sglang"
    if _vllm_serve(tokens) is not None:
        return "vllm"
    return None


def _tokens(container: Mapping[str, Any]) -> list[str]:
    """Command and args as words; `sh -c "..."` (or bash, `-lc`, `-ec`) as the script's
    words, split as the shell would (any other word is kept whole: a JSON value may hold
    spaces)."""
    words = [*(str(w) for w in container.get("command") or []), *(str(w) for w in container.get("args") or [])]
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] in ("-c", "-lc", "-ec"):
        try:
            return shlex.split(words[2]) + words[3:]
        except ValueError:
            return words
    return words


def _vllm_serve(tokens: list[str]) -> int | None:
    """0 when the words start `vllm serve` (the program may be a path), else None."""
    return 0 if len(tokens) >= 2 and tokens[0].rsplit("/", 1)[-1] == "vllm" and tokens[1] == "serve" else None


def _flags(tokens: list[str]) -> dict[str, str]:
    """`--flag value` and `--flag=value` (and `-tp value`), the last one given winning; a
    flag followed by another `--flag` (or nothing) has the value ""."""
    flags: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if not token.startswith("-") or token in ("-", "--"):
            continue
        if "=" in token:
            name, value = token.split("=", 1)
        else:
            following = tokens[i + 1] if i + 1 < len(tokens) else ""
            name, value = token, ("" if following.startswith("--") else following)
        flags[name] = value
    return flags


def _number(value: str | None, default: int) -> int:
    return int(value) if value is not None and value.isdigit() else default


def _read(kind: EngineKind, index: int, container: Mapping[str, Any]) -> Engine:
    tokens = _tokens(container)
    flags = _flags(tokens)
    if kind == "sglang":
        mode = flags.get("--disaggregation-mode")
        return Engine(
            kind="sglang",
            container=index,
            model=flags.get("--model-path") or flags.get("--model") or None,
            tensor_parallel=_number(flags.get("--tp-size", flags.get("--tp")), 1),
            pipeline_parallel=_number(flags.get("--pp-size", flags.get("--pipeline-parallel-size")), 1),
            port=_number(flags.get("--port"), SGLANG_PORT),
            role=_ROLES.get(mode or ""),
            # a container port named `bootstrap` says where it listens, else the flag, else SGLang's default
            bootstrap_port=_number(_named_port(container, BOOTSTRAP_PORT_NAME) or flags.get("--disaggregation-bootstrap-port"), SGLANG_BOOTSTRAP_PORT),
        )
    serve = _vllm_serve(tokens)
    after = tokens[serve + 2 :] if serve is not None else []
    positional = after[0] if after and not after[0].startswith("-") else None
    return Engine(
        kind="vllm",
        container=index,
        model=flags.get("--model") or positional,
        tensor_parallel=_number(flags.get("--tensor-parallel-size", flags.get("-tp")), 1),
        pipeline_parallel=_number(flags.get("--pipeline-parallel-size", flags.get("-pp")), 1),
        port=_number(flags.get("--port"), VLLM_PORT),
        role=_vllm_role(flags.get("--kv-transfer-config")),
        bootstrap_port=None,
        kv_connector=bool(flags.get("--kv-transfer-config")),
    )


def _named_port(container: Mapping[str, Any], name: str) -> str | None:
    port = next((p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == name), None)
    return None if port is None else str(port)


def _vllm_role(config: str | None) -> ServingRole | None:
    """`kv_role` of `--kv-transfer-config` (JSON): producer = prefill, consumer = decode."""
    if not config:
        return None
    try:
        parsed = json.loads(config)
    except ValueError:
        return None
    return _VLLM_ROLES.get(parsed.get("kv_role", "")) if isinstance(parsed, dict) else None
