"""The operator's pass over HTTP; prints one JSON object per case on stdout.

    python bench/operator_http.py [--nodes 1000] [--repeats 5]

(Not `bench/operator.py`: a script of that name shadows the standard library's `operator`.)

A cluster of `--nodes` nodes with one group (4P+2D) per 10 nodes is settled in the
memory store, then served over HTTP by the test suite's small Kubernetes API
(`tests/kube/fakeapi.py`); the Kubernetes adapter (`tandem.kube.KubeCluster`) lists and
watches it as the operator does, and a reconcile pass runs on its informer snapshot
(with the memo the operator keeps). `settled-pass`: a pass with nothing to do, p50 and
max of `--repeats` (issue 12's goal: ≤ 50 ms at 1,000 nodes and 100 groups). The
`tandem apiserver` case (apply to all Ready) waits for the local API server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from kube.fakeapi import FakeApi  # noqa: E402
from support.builders import group, role  # noqa: E402
from support.controller_world import kubelet  # noqa: E402
from tandem.controller.reconcile import Memo, reconcile  # noqa: E402
from tandem.kube.cluster import KubeCluster  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
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
    cluster = KubeCluster.connect(api.url, trust_env=False)
    cluster.wait_synced(60.0)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
