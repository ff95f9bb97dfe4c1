"""The topology controller as a process: a rack added until its HyperNodes are up to date.

    python bench/topology_process.py [--sizes 4096,16384,65536] [--repeats 5]

`bench/topology_controller.py` times the pass in process; this times what a user waits
for. `tandem apiserver` starts with `--sizes` nodes (blocks of 32 racks of 32 hosts) and
Volcano's HyperNode CRD (../shared/schemas), `tandem topology-controller --backends
volcano` runs as a process against it and settles; then, per repeat, a new rack's first
node is POSTed and the clock runs from the POST's answer until the rack's HyperNode exists
and its block's HyperNode lists it (polled every 5 ms over HTTP): informer delivery, the
batching window (0.2 s, the default), the pass and its writes. The rack's other 31 nodes
follow (a tier-1 HyperNode selects its nodes by label, so they change no HyperNode), and
the next repeat starts once their batching window has closed, so each wait includes a
whole window. The controller's peak RSS (VmHWM) and the time to settle the cold
cluster (every HyperNode written) are reported once per size.
Prints one JSON object per size on stdout; needs ../shared (skips, saying so, without it).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from e2e import processes  # noqa: E402
from e2e.processes import free_port, start_apiserver, tandem, wait_for, OperatorProcess  # noqa: E402
from tandem.api.resources import ClusterTopology  # noqa: E402
from tandem.backends.volcano import hypernode_name  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402

RACKS_PER_BLOCK, HOSTS_PER_RACK = 32, 32
RACK, BLOCK, HOST = "network.tandem.dev/rack", "network.tandem.dev/block", "kubernetes.io/hostname"
HYPERNODE_CRD = ROOT.parent / "shared" / "schemas" / "volcano" / "topology.volcano.sh_hypernodes.yaml"
HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
BATCH_WINDOW_S = 0.2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,16384,65536")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not HYPERNODE_CRD.is_file():
        print(f"skipped: {HYPERNODE_CRD} is absent (clone tandem with ../shared beside it)", file=sys.stderr)
        return 0
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for size in (int(s) for s in args.sizes.split(",")):
            print(json.dumps(run(size, args.repeats, progress)), flush=True)
    return 0


def run(size: int, repeats: int, progress: Progress) -> dict[str, Any]:
    task = progress.add_task(f"{size} nodes: starting tandem apiserver", total=None)
    blocks = max(1, size // (RACKS_PER_BLOCK * HOSTS_PER_RACK))
    topology, nodes = generate_cluster([("block", blocks), ("rack", RACKS_PER_BLOCK), ("host", HOSTS_PER_RACK)], 8)
    template, block = copy.deepcopy(nodes[0]), nodes[0]["metadata"]["labels"][BLOCK]
    typed = ClusterTopology.model_validate(topology)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "topology.json").write_text(json.dumps(topology))  # JSON: 65,536 nodes of YAML take minutes to parse
        (work / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
        del nodes
        processes.READY_LINE_TIMEOUT_S = 600.0  # the server loads every node before it says it serves
        server = start_apiserver(work, "--cluster", str(work / "topology.json"), "--cluster", str(work / "nodes.json"))
        controller = None
        try:
            server.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(HYPERNODE_CRD.read_text()))
            wait_for(lambda: _answers(server, HYPERNODES), 30, "the HyperNode CRD served")
            progress.update(task, description=f"{size} nodes: the topology controller settles")
            started = time.perf_counter()
            controller = _start_controller(server, work)
            expected = 1 + blocks + blocks * RACKS_PER_BLOCK  # the root, the blocks, the racks
            wait_for(lambda: len(server.get(HYPERNODES)["items"]) == expected, 600, f"{expected} HyperNodes", every=0.5)
            settle_s = time.perf_counter() - started
            times: list[float] = []
            in_passes: list[float] = []  # seconds spent in passes meanwhile (its /metrics)
            for i in range(repeats):
                progress.update(task, description=f"{size} nodes: rack {i + 1} of {repeats} added")
                rack = f"rack-added-{i}"
                leaf = hypernode_name(typed, (block, rack))
                parent = f"{HYPERNODES}/{hypernode_name(typed, (block,))}"
                for host in range(HOSTS_PER_RACK):
                    node = copy.deepcopy(template)
                    name = f"added-{i}-{host:02d}"
                    node["metadata"] = {"name": name, "labels": {BLOCK: block, RACK: rack, HOST: name}}
                    server.post("/api/v1/nodes", node)
                    if host == 0:
                        posted, (count, spent) = time.perf_counter(), _passes(controller)
                        wait_for(lambda: _answers(server, f"{HYPERNODES}/{leaf}") and _lists(server.get(parent), leaf), 30,
                                 f"HyperNode {leaf} in its block", every=0.005)
                        times.append(time.perf_counter() - posted)
                        # the pass that wrote it is counted once it has also patched the status
                        after = wait_for(lambda: (figures := _passes(controller))[0] > count and figures, 30, "the pass counted")
                        in_passes.append(after[1] - spent)
                time.sleep(2 * BATCH_WINDOW_S + 0.5)  # the next rack's first node meets no batching window already open
            rss_mb = _peak_rss_mb(controller.process.pid)
        finally:
            if controller is not None:
                controller.process.terminate()
                controller.process.wait(10)
            server.stop()
    progress.remove_task(task)
    return {
        "suite": "topology-controller-process", "case": "rack-added", "transport": "tandem apiserver + tandem topology-controller (processes)",
        "nodes": size, "blocks": blocks, "hosts_per_rack": HOSTS_PER_RACK, "hypernodes": expected, "repeats": repeats,
        "batch_window_s": BATCH_WINDOW_S, "s_median": round(statistics.median(times), 3), "s_min": round(min(times), 3),
        "s_max": round(max(times), 3), "in_passes_s_median": round(statistics.median(in_passes), 3),
        "cold_settle_s": round(settle_s, 1), "controller_peak_rss_mb": rss_mb, "goal_s": 1,
    }


def _start_controller(server: Any, work: Path) -> OperatorProcess:
    """`tandem topology-controller --backends volcano`, ready once its informers listed every node."""
    import subprocess

    port, metrics = free_port(), free_port()
    stderr = work / "topology-controller.stderr"
    process = subprocess.Popen(
        tandem("topology-controller", "--kubeconfig", str(server.kubeconfig), "--backends", "volcano", "--metrics-port", str(metrics),
               "--health-port", str(port), "--batch-window", str(BATCH_WINDOW_S)),
        stdout=subprocess.DEVNULL, stderr=stderr.open("w"), cwd=ROOT,
    )
    controller = OperatorProcess(process, "bench", f"http://127.0.0.1:{port}", stderr)
    controller.metrics = f"http://127.0.0.1:{metrics}/metrics"  # type: ignore[attr-defined]
    wait_for(lambda: controller.ready() or process.poll() is not None, 600, "the topology controller ready", every=0.2)
    if process.poll() is not None:
        raise SystemExit(f"the topology controller exited: {stderr.read_text()}")
    return controller


def _passes(controller: Any) -> tuple[float, float]:
    """The controller's passes so far and the seconds spent in them (its /metrics)."""
    import urllib.request

    figures = {}
    with urllib.request.urlopen(controller.metrics, timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            name, _, value = line.partition(" ")
            if name in ("tandem_topology_pass_duration_seconds_count", "tandem_topology_pass_duration_seconds_sum"):
                figures[name] = float(value)
    return figures.get("tandem_topology_pass_duration_seconds_count", 0.0), figures.get("tandem_topology_pass_duration_seconds_sum", 0.0)


def _answers(server: Any, path: str) -> bool:
    try:
        server.get(path)
    except OSError:
        return False
    return True


def _lists(hypernode: dict[str, Any], name: str) -> bool:
    return any(((m.get("selector") or {}).get("exactMatch") or {}).get("name") == name for m in hypernode["spec"].get("members") or [])


def _peak_rss_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


if __name__ == "__main__":
    sys.exit(main())
