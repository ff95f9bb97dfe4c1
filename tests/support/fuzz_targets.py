"""Every reader of user input, with real files to mutate and what a correct answer is.

A target reads one text as tandem reads that kind of input (`tandem validate` and `plan`
for groups, topologies, node and pod dumps; the scenario loader; the trace parsers; the
admission webhook's review). A correct answer is a result or an `InputError` (for the
webhook: a verdict, or `Malformed`, which it answers with 400); anything else — another
exception, a hang — is a failure. `run(target, text)` returns None or what went wrong.
"""

from __future__ import annotations

import json
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from tandem.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRACES = ROOT.parent / "shared" / "traces"
TIME_LIMIT_S = 10


@dataclass(frozen=True)
class Target:
    name: str
    seeds: tuple[str, ...]
    read: Callable[[str], object]
    allowed: tuple[type[BaseException], ...] = (InputError,)


def _cluster_text() -> str:
    from tandem.topology.generate import generate_cluster

    topology, nodes = generate_cluster([("block", 2), ("rack", 2), ("host", 4)], 8)
    return yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}])


def _validate_and_plan(text: str, with_cluster: bool = True) -> object:
    from tandem.api.loading import load_texts
    from tandem.cli.render import backend_findings
    from tandem.placement.from_inputs import plan_inputs

    sources = ([("cluster.yaml", _cluster_text())] if with_cluster else []) + [("mutant.yaml", text)]
    inputs = load_texts(sources)
    problems, _ = backend_findings(inputs)
    if problems or not inputs.groups:
        return problems
    return plan_inputs(inputs)


def _scenario(text: str) -> object:
    from tandem.cli.files import read_sources
    from tandem.sim.scenario import load_scenario

    def read(relative: str) -> tuple[str, str]:
        (name, body), = read_sources([EXAMPLES / "scenarios" / relative])
        return name, body

    return load_scenario("mutant.yaml", text, read, None)  # catalogue traces are the trace target's


def _trace(text: str) -> object:
    from tandem.sim.traces.formats import parse_trace

    return parse_trace(text, "mutant")


def _admission(text: str) -> object:
    from support.controller_world import world
    from tandem.operator.admission import review

    return review(text.encode(), _ADMISSION_WORLD.setdefault("store", world()).snapshot())


_ADMISSION_WORLD: dict[str, object] = {}


def _review_of(path: Path) -> str:
    obj = yaml.safe_load(path.read_text())
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u-1", "kind": {"group": "tandem.dev", "version": "v1alpha1", "kind": obj["kind"]},
                                   "operation": "CREATE", "object": obj}})


def _head(path: Path, lines: int) -> str:
    with path.open() as handle:
        return "".join(next(handle, "") for _ in range(lines))


def targets() -> dict[str, Target]:
    from tandem.operator.admission import Malformed

    cluster_docs = list(yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()))
    topology = yaml.safe_dump(next(d for d in cluster_docs if d.get("kind") == "ClusterTopology"))
    node_list = next(d for d in cluster_docs if d.get("kind") == "List")
    nodes = yaml.safe_dump({**node_list, "items": node_list["items"][:6]})
    pods = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "other", "labels": {"app": "x"}},
         "spec": {"nodeName": f"n-00{i}", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "500m"}}}]},
         "status": {"phase": "Running"}} for i in range(4)]})
    groups = tuple(p.read_text() for p in sorted(EXAMPLES.glob("*.yaml")) if p.name != "cluster.yaml")
    traces = tuple(_head(p, 60) for p in sorted(TRACES.glob("*")) if p.suffix in (".csv", ".jsonl")) if TRACES.is_dir() else ()
    traces = traces or ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",)
    return {
        "inferencegroup": Target("inferencegroup", groups, _validate_and_plan),
        "clustertopology": Target("clustertopology", (topology,), lambda text: _validate_and_plan(text, with_cluster=False)),
        "nodes": Target("nodes", (nodes,), lambda text: _validate_and_plan(text + "\n---\n" + (EXAMPLES / "llama-8b.yaml").read_text() + "\n---\n" + topology, with_cluster=False)),
        "pods": Target("pods", (pods,), _validate_and_plan),
        "scenario": Target("scenario", tuple(p.read_text() for p in sorted((EXAMPLES / "scenarios").glob("*.yaml"))), _scenario),
        "trace": Target("trace", traces, _trace),
        "admissionreview": Target("admissionreview", tuple(_review_of(p) for p in (EXAMPLES / "llama-70b.yaml", EXAMPLES / "mixtral.yaml")),
                                  _admission, (InputError, Malformed)),
    }


class _TooSlow(Exception):
    pass


def run(target: Target, text: str) -> str | None:
    """None when `text` is answered as it should be; else what went wrong (one paragraph)."""

    def alarm(*_: object) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        target.read(text)
    except target.allowed:
        return None
    except _TooSlow:
        return f"no answer within {TIME_LIMIT_S} s"
    except Exception:  # noqa: BLE001 - the point: anything else is a finding
        return traceback.format_exc(limit=-3)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return None
