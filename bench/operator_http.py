"""The operator over HTTP; prints one JSON object per case on stdout.

    python bench/operator_http.py [--nodes 1000] [--repeats 5] [--case settled-pass|apply-to-ready|all]

(Not `bench/operator.py`: a script of that name shadows the standard library's `operator`.)

A cluster of `--nodes` nodes with one group (4P+2D) per 10 nodes is settled in the
memory store, then served over HTTP by the test suite's small Kubernetes API
(`tests/kube/fakeapi.py`); the Kubernetes adapter (`tandem.kube.KubeCluster`) lists and
watches it as the operator does, and a reconcile pass runs on its informer snapshot
(with the memo the operator keeps). `settled-pass`: a pass with nothing to do, p50 and
max of `--repeats` (issue 12's goal: ≤ 50 ms at 1,000 nodes and 100 groups).

`apply-to-ready`: `tandem apiserver` (48 nodes of 8 GPUs, pods Ready the moment they
start, bindings at once) and `tandem operator` run as processes, as a user runs them; the
time from `kubectl apply -f examples/llama-70b.yaml` (2 units of 4 prefill + 2×2 decode:
16 pods of 8 GPUs) until every pod of the group is Ready, polled every 10 ms; the group
is deleted (and its pods gone) between repeats. kubectl's own start-up (~0.1 s) is
counted, as a user waits for it; without kubectl the group is POSTed instead, and the
row says so. Issue 12's goal: ≤ 2 s.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from e2e.processes import KUBECTL, start_apiserver, start_operator, wait_for  # noqa: E402
from kube.fakeapi import FakeApi  # noqa: E402
from support.builders import group, role  # noqa: E402
from support.controller_world import kubelet  # noqa: E402
from tandem.controller import OBSERVED_KINDS, Memo, reconcile  # noqa: E402
from tandem.kube.cluster import KubeCluster  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--case", choices=("settled-pass", "apply-to-ready", "all"), default="all")
    args = parser.parse_args(argv)
    if args.case in ("settled-pass", "all"):
        settled_pass(args)
    if args.case in ("apply-to-ready", "all"):
        apply_to_ready(args.repeats)
    return 0


def settled_pass(args: argparse.Namespace) -> None:
    api = FakeApi()
    store = api.store
    topology, nodes = generate_cluster([("block", max(1, args.nodes // 250)), ("rack", 10), ("host", 25)], 8)
    for obj in [topology, *nodes]:
        store.create(obj)
    groups = len(nodes) // 10
    for index in range(groups):
        store.create(group(f"g{index:05d}", [role("prefill", 4, 1, gpus=2), role("decode", 2, 1, gpus=2)], required="rack"))
    now = 0.0
    while True:  # settle in the store itself
        report = reconcile(store, now)
        now += 1.0
        if not kubelet(store) and not report.writes:
            break
    cluster = KubeCluster.connect(api.url, trust_env=False, kinds=OBSERVED_KINDS)
    cluster.wait_synced(60.0)
    gc.collect()
    gc.freeze()  # as `tandem operator` does once its informers have synced
    try:
        memo = Memo()
        reconcile(cluster, now, memo=memo)  # the first pass fills the memo
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            report = reconcile(cluster, now, memo=memo)
            times.append((time.perf_counter() - start) * 1000)
            assert report.writes == 0, report
        print(json.dumps({"suite": "operator", "case": "settled-pass", "transport": "http (tests/kube/fakeapi.py)", "nodes": len(nodes),
                          "groups": groups, "pods": len(store.list("Pod")), "ms_p50": round(statistics.median(times), 1),
                          "ms_max": round(max(times), 1), "repeats": args.repeats, "goal_ms": 50}))
    finally:
        cluster.stop()
        api.close()


def apply_to_ready(repeats: int) -> None:
    import tempfile

    import yaml

    example = ROOT / "examples" / "llama-70b.yaml"
    manifest = yaml.safe_load(example.read_text())
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    pods = sum(r["replicas"] * r.get("podsPerReplica", 1) for r in manifest["spec"]["roles"]) * manifest["spec"]["replicas"]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        topology, nodes = generate_cluster([("block", 3), ("rack", 2), ("host", 8)], 8)
        (work / "cluster.yaml").write_text(yaml.safe_dump_all([topology, {"apiVersion": "v1", "kind": "List", "items": nodes}]))
        server = start_apiserver(work, "--cluster", str(work / "cluster.yaml"), "--ready-after", "0", "--bind-latency", "0")
        operator = start_operator(server, work, "bench")
        listing = f"/api/v1/namespaces/{namespace}/pods?labelSelector=tandem.dev%2Fgroup%3D{name}"

        def all_ready() -> bool:
            items = server.get(listing)["items"]
            return len(items) == pods and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or []) for p in items)

        def apply() -> None:
            if KUBECTL is not None:
                server.kubectl("apply", "-f", str(example))
            else:
                server.post(f"/apis/tandem.dev/v1alpha1/namespaces/{namespace}/inferencegroups", manifest)

        times = []
        try:
            for _ in range(repeats):
                start = time.perf_counter()
                apply()
                wait_for(all_ready, 30, "every pod Ready", every=0.01)
                times.append(time.perf_counter() - start)
                server.delete(f"/apis/tandem.dev/v1alpha1/namespaces/{namespace}/inferencegroups/{name}")
                wait_for(lambda: not server.get(listing)["items"], 30, "the pods gone", every=0.05)
        finally:
            operator.process.terminate()
            operator.process.wait(10)
            server.stop()
        print(json.dumps({"suite": "operator", "case": "apply-to-ready", "transport": "tandem apiserver + tandem operator (processes)",
                          "client": "kubectl" if KUBECTL else "http", "example": "examples/llama-70b.yaml", "nodes": len(nodes),
                          "pods": pods, "s_p50": round(statistics.median(times), 2), "s_max": round(max(times), 2),
                          "repeats": repeats, "goal_s": 2}))


if __name__ == "__main__":
    sys.exit(main())
