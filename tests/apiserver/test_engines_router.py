"""The real SGLang router (sglang-router, a test dependency) in PD mode in front of two stand-ins:
every endpoint a client uses through it answers, and each request reaches both sides of
one bootstrap room. Skipped where sglang-router is not installed."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Iterator

import pytest

from apiserver.engine_pods import LLAMA, PODS, call, events, sglang_pod
from apiserver.helpers import Client, small_cluster
from e2e.processes import NO_ROUTER, start_router
from tandem.apiserver.server import ApiServer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("sglang_router") is None, reason=NO_ROUTER)


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[tuple[str, ApiServer]]:
    with ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=0.001) as server:
        client = Client(server.url)
        client.post(PODS, sglang_pod("p", "prefill"))
        client.post(PODS, sglang_pod("d", "decode"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pods = client.get(PODS).body["items"]
            if len(pods) == 2 and all(any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])) for p in pods):
                break
            time.sleep(0.02)
        ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods}
        router = start_router(tmp_path, ["--pd-disaggregation", "--prefill", f"http://{ips['p']}:30000", "8998",
                                         "--decode", f"http://{ips['d']}:30000"])
        base = router.url
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if len(json.loads(call(base + "/workers", timeout=1)[1]).get("workers", [])) == 2:
                        break
                except OSError:
                    pass
                time.sleep(0.1)
            yield base, server
        finally:
            router.stop()


def test_the_router_s_pd_mode_works_through_the_stand_ins(routed):
    base, server = routed
    answers = [
        call(base + "/generate", {"text": "hello there friend", "sampling_params": {"max_new_tokens": 8}}),
        call(base + "/generate", {"text": "hello there friend", "sampling_params": {"max_new_tokens": 8}, "stream": True}),
        call(base + "/v1/completions", {"model": LLAMA, "prompt": "hello there", "max_tokens": 6}),
        call(base + "/v1/completions", {"model": LLAMA, "prompt": "hello there", "max_tokens": 6, "stream": True}),
        call(base + "/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
        call(base + "/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}),
    ]
    assert [code for code, _ in answers] == [200] * 6
    assert json.loads(answers[0][1])["meta_info"]["completion_tokens"] == 8
    assert events(answers[1][1])[-1] == "[DONE]" and events(answers[1][1])[-2]["text"].split() == [f"t{i}" for i in range(1, 9)]
    assert json.loads(answers[2][1])["choices"][0]["text"] == " t1 t2 t3 t4 t5 t6"
    report = {p["name"]: p["requests"] for p in server.engine_report()["pods"]}
    rooms = {name: [r.get("bootstrapRoom") for r in requests if r["path"] in ("/generate", "/v1/completions", "/v1/chat/completions")]
             for name, requests in report.items()}
    assert len(rooms["p"]) == len(rooms["d"]) == 6 and None not in rooms["d"] and sorted(rooms["p"]) == sorted(rooms["d"])
    assert not any(r["failed"] for requests in report.values() for r in requests)
