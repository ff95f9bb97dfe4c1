"""The cluster as a previous operator left it: every group's pods created, bound and Ready.

    python bench/settled_cluster.py --nodes 10000 -o cluster.json   # prints one JSON line of how long it took

bench/operator_http.py's world (blocks of 10 racks of 25 hosts, 8 GPUs each, three
DaemonSet pods on every node, one InferenceGroup per 10 nodes) is seeded into the local
API server's own state, in process, and settled there by the operator's pass
(`reconcile`, writing to that store) and the server's simulated kubelet (binding, starting,
Ready, pod IPs), in turns, until neither writes. Everything then stored (nodes, pods,
groups with their status, the peers ConfigMaps and Services, ...; not Events, not the
namespaces and CRDs the server makes itself) is written as one JSON List, which `tandem
apiserver --cluster` loads as it was. What differs from a cluster settled over HTTP: the
operator's writes skip admission (defaults such as the not-ready tolerations are not
added to its pods), and the stamps are those of this run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from controller import DAEMONS, _daemon, _group  # noqa: E402  (bench/controller.py's world)
from tandem.apiserver.kubelets import Kubelet  # noqa: E402
from tandem.apiserver.seed import NAMESPACES, seed  # noqa: E402
from tandem.apiserver.server_state import State  # noqa: E402
from tandem.controller import Memo, reconcile  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402

SKIPPED = frozenset({"Event", "CustomResourceDefinition"})  # what the server makes itself, or history


def world(nodes_wanted: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """The cold cluster: (objects, nodes, groups), as bench/operator_http.py's `processes` starts it."""
    topology, nodes = generate_cluster([("block", max(1, nodes_wanted // 250)), ("rack", 10), ("host", 25)], 8)
    groups = len(nodes) // 10
    items = [topology, *nodes, *(_daemon(n["metadata"]["name"], d) for n in nodes for d in DAEMONS), *(_group(i) for i in range(groups))]
    return items, nodes, groups


def settled(objects: list[dict[str, Any]], budget_passes: int = 100) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Seed `objects`, settle them (pass, kubelet step, ... until neither writes); every object stored, and how it went."""
    state = State()
    seed(state, objects)
    kubelet = Kubelet(state, ready_after=0.0, bind_latency=0.0)
    memo, passes, writes, now = Memo(), 0, 0, time.time()  # the operator's clock is the wall's
    start = time.perf_counter()
    while True:
        report = reconcile(state.store, now, memo=memo)
        with state.lock:
            before = state.store.resource_version
            kubelet.step()
            moved = state.store.resource_version != before
        passes += 1
        writes += report.writes
        now += 1.0
        if not moved and not report.writes:
            break
        assert passes < budget_passes, "did not settle"
    settle_s = time.perf_counter() - start
    out = []
    snapshot = state.store.snapshot()
    for kind in sorted(state.store.served(_kinds(state))):
        if kind in SKIPPED:
            continue
        for obj in snapshot.list(kind):
            if kind == "Namespace" and obj["metadata"]["name"] in NAMESPACES:
                continue
            out.append(obj)
    return out, {"passes": passes, "writes": writes, "settle_s": round(settle_s, 1)}


def _kinds(state: State) -> list[str]:
    return sorted({key[0] for key in state.store._objects})  # noqa: SLF001  (a bench's look inside)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    objects, nodes, groups = world(args.nodes)
    stored, how = settled(objects)
    args.out.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": stored}, separators=(",", ":")))
    kinds: dict[str, int] = {}
    for obj in stored:
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    print(json.dumps({"suite": "operator", "case": "settled-cluster", "nodes": len(nodes), "groups": groups, **how,
                      "objects": kinds, "total_s": round(time.perf_counter() - start, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
