"""Admission webhook latency over HTTPS; prints one JSON object per case on stdout.

    python bench/webhook.py [--sequential 1000] [--concurrent 100] [--repeats 3]

The webhook runs in-process on 127.0.0.1 with a fresh certificate, over an in-memory
cluster of 64 nodes (4 blocks x 2 racks x 8 hosts, 8 GPUs each) and its ClusterTopology;
each review is the bundled llama-70b group (a CREATE), answered with the checks of
`tandem validate` and the never-fits trial. `sequential`: one client, one connection per
review (as the API server opens them), `--sequential` reviews; `concurrent`: that many
clients at once, one review each. Latency is client-side, request to answer. Each case
runs `--repeats` times; the rows give p50/p99 of each run and their spread. Two more rows
time the checks alone, in-process, `--sequential` times each: `review` (the whole verdict,
no HTTPS) and `templates` (the group's pod templates against Kubernetes' PodTemplateSpec
schema, `api/pod_templates.py`, a part of `review`).
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import yaml
from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]

from tandem.api.pod_templates import group_template_problems  # noqa: E402
from tandem.cluster.memory import MemoryStore  # noqa: E402
from tandem.operator.admission import review  # noqa: E402
from tandem.runtime.certs import make_certificates  # noqa: E402
from tandem.operator.webhook import serve_webhook  # noqa: E402
from tandem.topology.generate import generate_cluster  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _body() -> bytes:
    group = next(d for d in yaml.safe_load_all((ROOT / "examples" / "llama-70b.yaml").read_text()) if d and d.get("kind") == "InferenceGroup")
    group["spec"]["topologyName"] = "default"
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "bench", "operation": "CREATE", "object": group}}
    return json.dumps(review).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    store = MemoryStore()
    topology, nodes = generate_cluster([("block", 4), ("rack", 2), ("host", 8)], 8)
    for obj in [topology, *nodes]:
        store.create(obj)
    certs_dir = Path(tempfile.mkdtemp(prefix="tandem-bench-"))
    certs = make_certificates(["localhost"], datetime.now(timezone.utc))
    certs.write(certs_dir)
    server = serve_webhook(store.snapshot, certs_dir, 0, host="127.0.0.1")
    url = f"https://localhost:{server.server_address[1]}/validate"
    context = ssl.create_default_context(cadata=certs.ca_pem.decode())
    body = _body()

    def one() -> float:
        start = time.perf_counter()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            answer = json.loads(response.read())
        assert answer["response"]["allowed"], answer
        return time.perf_counter() - start

    rows = []
    with Progress(console=Console(stderr=True), transient=True) as progress:
        for case, count in (("sequential", args.sequential), ("concurrent", args.concurrent)):
            runs = []
            task = progress.add_task(case, total=args.repeats * count)
            for _ in range(args.repeats):
                latencies: list[float] = []
                if case == "sequential":
                    for _ in range(count):
                        latencies.append(one())
                        progress.advance(task)
                else:
                    lock = threading.Lock()

                    def client() -> None:
                        value = one()
                        with lock:
                            latencies.append(value)
                            progress.advance(task)

                    threads = [threading.Thread(target=client) for _ in range(count)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                runs.append((_percentile(latencies, 0.5) * 1000, _percentile(latencies, 0.99) * 1000))
            p50s, p99s = [r[0] for r in runs], [r[1] for r in runs]
            rows.append(
                {
                    "suite": "webhook",
                    "case": case,
                    "reviews": count,
                    "nodes": len(nodes),
                    "repeats": args.repeats,
                    "p50_ms": round(statistics.median(p50s), 2),
                    "p99_ms": round(statistics.median(p99s), 2),
                    "p99_ms_spread": [round(min(p99s), 2), round(max(p99s), 2)],
                    "p50_ms_spread": [round(min(p50s), 2), round(max(p50s), 2)],
                }
            )
    server.shutdown()
    group = json.loads(body)["request"]["object"]
    for case, check in (("review", lambda: review(body, store.snapshot())), ("templates", lambda: group_template_problems(group))):
        per_run = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(args.sequential):
                check()
            per_run.append((time.perf_counter() - start) / args.sequential * 1000)
        rows.append({"suite": "webhook", "case": case, "in_process": True, "reviews": args.sequential, "nodes": len(nodes),
                     "repeats": args.repeats, "mean_ms": round(statistics.median(per_run), 3),
                     "mean_ms_spread": [round(min(per_run), 3), round(max(per_run), 3)]})
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
