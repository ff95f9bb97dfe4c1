"""The serving story of issue 28, run once: SGLang's real router in front of tandem's pods.

`tandem apiserver --engines` (its kubelet runs an SGLang stand-in timed by the serving model on
every engine pod's IP), `tandem operator`, kubectl for what a user does, and the router
(sglang-router, prefill/decode mode) with the flags of examples/serving/sglang-pd-router.yaml,
finding the pods of examples/serving/sglang-pd.yaml through its own Kubernetes client. First
requests one at a time (TTFT and ITL against `tandem profile predict`), then a load that flows
while the group scales to a second unit, rolls a new template, loses a decode pod and
scales back to one unit.

tests/e2e/test_router.py asserts on what `run` returns; bench/router.py prints it as figures.
Everything binds and connects on 127.0.0.0/8 only.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.processes import REPO, ApiServer, RouterProcess, start_apiserver, start_operator, start_router, tandem, wait_for
from support.router_load import Load, Outcome, generate
from tandem.cluster.pods import pod_ready
from tandem.topology.generate import generate_cluster

GROUP_FILE = REPO / "examples/serving/sglang-pd.yaml"
ROUTER_FILE = REPO / "examples/serving/sglang-pd-router.yaml"
SHAPE = [("block", 1), ("rack", 2), ("host", 4)]  # 8 nodes of 8 GPUs: two units of 2+2 one-GPU pods and their surges
# The model load (38 s for Llama 3.1 8B), preStop sleep (10 s) and grace period (60 s) in 5%
# of their time; requests keep their real times, for the TTFT and ITL figures.
LIFECYCLE_SCALE = "0.05"
MEASURE_PROMPT, MEASURE_TOKENS, MEASURED = 2048, 64, 20
LOAD_PROMPT, LOAD_TOKENS, LOAD_WORKERS, LEAST_REQUESTS = 256, 32, 4, 300
SERVING_PATHS = ("/generate", "/v1/completions", "/v1/chat/completions")  # not the router's health and info calls


@dataclass
class Story:
    measured: list[Outcome]  # one at a time, MEASURE_PROMPT tokens in, MEASURE_TOKENS out
    predicted: dict[str, Any]  # `tandem profile predict` for the example's configuration
    outcomes: list[Outcome]  # the load's, through scaling, the rollout and the lost decode
    engines: list[dict[str, Any]]  # `GET /tandem/engines`: every engine pod and its requests
    window: tuple[float, float]  # the load's first and last send, wall clock
    phases: dict[str, float]  # seconds each operation took until the router served the result


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def router_args() -> tuple[str, list[str]]:
    """The router container's namespace and arguments in the example, less where it listens
    (the story gives it free ports on 127.0.0.1)."""
    deployment = next(d for d in documents(ROUTER_FILE) if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    keep = [a for a in container["args"] if not a.startswith(("--host", "--port", "--prometheus-port", "--prometheus-host"))]
    return deployment["metadata"]["namespace"], keep


def run(work: Path) -> Story:
    topology, nodes = generate_cluster(SHAPE, 8)
    (work / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (work / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(work, "--cluster", str(work / "nodes.yaml"), "--cluster", str(work / "topology.yaml"),
                             "--engines", "--engine-lifecycle-scale", LIFECYCLE_SCALE)
    operator = router = None
    try:
        operator = start_operator(server, work, "tandem-0")
        group = documents(GROUP_FILE)[0]
        namespace, args = router_args()
        assert group["metadata"]["namespace"] == namespace, "the router example watches the group's namespace"
        server.kubectl("create", "namespace", namespace)
        server.kubectl("apply", "-f", str(GROUP_FILE))
        router = start_router(work, args, server)
        return _story(server, router, group)
    finally:
        if router is not None:
            router.stop()
        if operator is not None:
            operator.process.terminate()
            operator.process.wait(timeout=10)
        server.stop()


def _story(server: ApiServer, router: RouterProcess, group: dict[str, Any]) -> Story:
    meta = group["metadata"]
    ig = ["-n", meta["namespace"], "inferencegroup", meta["name"]]
    phases: dict[str, float] = {}
    started = time.monotonic()
    wait_for(lambda: _serving(server, router, group, 1), 90, "the router to find the 2 prefill and 2 decode pods, all Ready")
    phases["start"] = time.monotonic() - started

    measured = [generate(router.url, MEASURE_PROMPT, MEASURE_TOKENS) for _ in range(MEASURED)]
    load = Load(router.url, LOAD_WORKERS, LOAD_PROMPT, LOAD_TOKENS).start()
    try:
        wait_for(lambda: load.count() >= 50, 60, "the first requests of the load")

        started = time.monotonic()
        server.kubectl("scale", *ig, "--replicas", "2")
        wait_for(lambda: _serving(server, router, group, 2), 90, "a second unit Ready and in the router")
        phases["scale"] = time.monotonic() - started

        started = time.monotonic()
        before = _revision(server, meta)
        server.kubectl("patch", *ig, "--type", "json", "-p", json.dumps(
            [{"op": "add", "path": f"/spec/roles/{i}/template/spec/containers/0/args/-", "value": "--log-level=warning"} for i in range(2)]))
        revision = wait_for(lambda: (r := _revision(server, meta)) != before and r, 30, "the new revision")
        wait_for(lambda: _serving(server, router, group, 2, revision), 120, "every pod of the new template Ready and in the router, the old ones gone")
        phases["rollout"] = time.monotonic() - started

        started = time.monotonic()
        lost = min((p for p in _pods(server, group) if p["metadata"]["labels"]["tandem.dev/role"] == "decode" and not p["metadata"].get("deletionTimestamp")),
                   key=lambda p: p["metadata"]["name"])
        server.kubectl("delete", "pod", "-n", meta["namespace"], lost["metadata"]["name"], "--wait=false")
        wait_for(lambda: _serving(server, router, group, 2) and lost["metadata"]["uid"] not in {p["metadata"]["uid"] for p in _pods(server, group)},
                 120, "the lost decode's replica replaced, Ready and in the router")
        phases["lost-decode"] = time.monotonic() - started

        started = time.monotonic()
        server.kubectl("scale", *ig, "--replicas", "1")
        wait_for(lambda: _serving(server, router, group, 1), 90, "the second unit gone from the router and the cluster")
        phases["scale-down"] = time.monotonic() - started
        wait_for(lambda: load.count() >= LEAST_REQUESTS, 120, f"{LEAST_REQUESTS} requests")
    finally:
        outcomes = load.stop()
    shift = time.time() - time.monotonic()
    window = (min(o.started for o in outcomes) + shift, max(o.started for o in outcomes) + shift)
    return Story(measured, _predicted(), outcomes, server.get("/tandem/engines")["pods"], window, phases)


def _pods(server: ApiServer, group: dict[str, Any]) -> list[dict[str, Any]]:
    meta = group["metadata"]
    return server.get(f"/api/v1/namespaces/{meta['namespace']}/pods?labelSelector=tandem.dev/group={meta['name']}")["items"]


def _serving(server: ApiServer, router: RouterProcess, group: dict[str, Any], units: int, revision: str | None = None) -> bool:
    """Every pod of `units` units (2 prefill + 2 decode each) Ready, of `revision` when given,
    and the router's workers exactly those pods."""
    pods = [p for p in _pods(server, group) if not p["metadata"].get("deletionTimestamp")]
    if len(pods) != 4 * units or not all(pod_ready(p) for p in pods):
        return False
    if revision is not None and any(p["metadata"]["labels"]["tandem.dev/revision"] != revision for p in pods):
        return False
    want = {f"http://{p['status']['podIP']}:30000": p["metadata"]["labels"]["tandem.dev/role"] for p in pods}
    return router.workers() == want


def _revision(server: ApiServer, meta: dict[str, Any]) -> str:
    group = server.get(f"/apis/tandem.dev/v1alpha1/namespaces/{meta['namespace']}/inferencegroups/{meta['name']}")
    return str((group.get("status") or {}).get("revision") or "")


def _predicted() -> dict[str, Any]:
    """`tandem profile predict` for the example's configuration (Llama 3.1 8B, H100, TP 1)."""
    out = subprocess.run(tandem("profile", "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1",
                                "--prompt", str(MEASURE_PROMPT)), capture_output=True, text=True, check=True, cwd=REPO)
    return dict(json.loads(out.stdout))


def arrivals(pod: dict[str, Any]) -> list[float]:
    """When (wall clock) each serving request reached the pod."""
    return [r["arrival"] for r in pod["requests"] if r["path"] in SERVING_PATHS]


def medians(outcomes: list[Outcome]) -> tuple[float, float]:
    """Median TTFT and ITL of the successful outcomes, seconds."""
    return (statistics.median(o.ttft_s for o in outcomes if o.ok and o.ttft_s is not None),
            statistics.median(o.itl_s for o in outcomes if o.ok and o.itl_s is not None))
