"""TTFT and ITL through the real sglang-router in front of two engine stand-ins, against what
`tandem profile predict` says; prints one JSON object per prompt length on stdout.

    python bench/engine_standins.py [--prompts 512,2048] [--requests 20] [--new-tokens 64] [--scale 1.0]

An in-process `tandem apiserver --engines` (Llama 3.1 8B on H100, TP 1, one SGLang prefill
and one decode pod), sglang-router in PD mode with the two as static workers, and requests
sent one at a time (batch 1) as streams of `/generate`: TTFT is the first streamed event,
ITL the mean gap between the first and the last. The stand-ins sleep the serving model's
times multiplied by `--scale`; the figures are divided by it back. What the router, HTTP and
the KV handoff add shows as the difference (docs/apiserver.md, "Engine stand-ins").
Needs sglang-router (a test dependency); everything stays on 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from apiserver.engine_pods import PODS, sglang_pod  # noqa: E402
from apiserver.helpers import Client, small_cluster  # noqa: E402
from e2e.processes import start_router  # noqa: E402
from tandem.apiserver.server import ApiServer  # noqa: E402
from tandem.sim.serving import gpu_profile, model_profile, roofline  # noqa: E402


def _ready(pods: list[dict[str, Any]]) -> bool:
    return len(pods) == 2 and all(any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])) for p in pods)


def _stream(port: int, prompt: int, new_tokens: int) -> tuple[float, float]:
    body = json.dumps({"text": " ".join(["w"] * prompt), "sampling_params": {"max_new_tokens": new_tokens}, "stream": True})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/generate", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    times: list[float] = []
    while chunk := answer.read1(65536):
        times += [time.perf_counter()] * chunk.count(b"data: {")
    connection.close()
    return times[0] - started, (times[-1] - times[0]) / max(len(times) - 1, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", default="512,2048")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    model, gpu = model_profile("llama-3.1-8b"), gpu_profile("h100-sxm")
    with ApiServer(objects=small_cluster(), engines=True, engine_time_scale=args.scale) as server:
        client = Client(server.url)
        client.post(PODS, sglang_pod("p", "prefill"))
        client.post(PODS, sglang_pod("d", "decode"))
        while not _ready(pods := client.get(PODS).body["items"]):
            time.sleep(0.2)
        ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods}
        work = Path(tempfile.mkdtemp(prefix="tandem-bench-router-"))
        router = start_router(work, ["--pd-disaggregation", "--prefill", f"http://{ips['p']}:30000", "8998", "--decode", f"http://{ips['d']}:30000"])
        port = int(router.url.rsplit(":", 1)[1])
        try:
            time.sleep(3)
            for prompt in (int(p) for p in args.prompts.split(",")):
                samples = [_stream(port, prompt, args.new_tokens) for _ in range(args.requests)]
                ttft = statistics.median(s[0] for s in samples) / args.scale
                itl = statistics.median(s[1] for s in samples) / args.scale
                predicted_ttft = roofline.prefill_seconds(model, gpu, 1, prompt)
                context = prompt + args.new_tokens // 2
                predicted_itl = roofline.decode_step_seconds(model, gpu, 1, 1, context)
                print(json.dumps({"prompt": prompt, "new_tokens": args.new_tokens, "scale": args.scale, "ttft_s": ttft,
                                  "predicted_ttft_s": predicted_ttft, "ttft_ratio": ttft / predicted_ttft, "itl_s": itl,
                                  "predicted_itl_s": predicted_itl, "itl_ratio": itl / predicted_itl}), flush=True)
        finally:
            router.stop()


if __name__ == "__main__":
    main()
