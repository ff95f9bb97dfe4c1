"""Engine stand-ins: SGLang and vLLM pods answer on their pod IPs, Ready once loaded, deleted gracefully.

The kubelet runs on a clock the test moves by hand (load time, preStop, grace period); the
engines' own iterations run in real time, scaled down to microseconds."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest

from apiserver.engine_pods import LLAMA, PODS, call, events, sglang_pod, vllm_pod
from apiserver.helpers import Client, Clock, pod, small_cluster
from tandem.apiserver import pod_network
from tandem.cluster.pods import pod_ready
from tandem.apiserver.engines.host import EngineHost
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer

SCALE = 0.001  # Llama 3.1 8B loads in 38 s: 0.038 s of the test's clock


class World:
    def __init__(self, server: ApiServer, scale: float, lifecycle: float | None = None):
        self.client = Client(server.url)
        self.clock = Clock()
        self.host = EngineHost(scale, monotonic=self.clock, lifecycle_scale=lifecycle)
        self.server = server
        # Pod IPs of its own, as a server with engines takes (another test's server may run beside)
        self.network = pod_network.reserve()
        self.kubelet = Kubelet(server.state, engines=self.host, monotonic=self.clock, address_block=self.network.block)

    def step(self) -> float | None:
        with self.server.state.lock:
            return self.kubelet.step()

    def pod(self, name: str) -> dict[str, Any]:
        return self.client.get(f"{PODS}/{name}").body

    def url(self, name: str, port: int = 30000) -> str:
        return f"http://{self.pod(name)['status']['podIP']}:{port}"

    def ready(self, *pods: dict[str, Any]) -> None:
        """Create the pods and bring them to Ready: started, loaded, healthy."""
        for p in pods:
            assert self.client.post(PODS, p).code == 201
        self.step()
        self.clock.now += 1000 * self.host.lifecycle_scale
        self.step()
        for p in pods:
            assert pod_ready(self.pod(p["metadata"]["name"])), p["metadata"]["name"]


@pytest.fixture
def world():
    with ApiServer(objects=small_cluster(gpus=8), kubelet=False) as server:
        made: list[World] = []

        def make(scale: float = SCALE, lifecycle: float | None = None) -> World:
            made.append(World(server, scale, lifecycle))
            return made[-1]

        yield make
        for w in made:
            w.host.close_all()
            w.network.release()


def test_an_engine_pod_turns_ready_only_once_its_model_loaded_and_its_health_answers(world):
    w = world()
    w.client.post(PODS, sglang_pod("d", "decode"))
    due = w.step()
    running = w.pod("d")
    assert running["status"]["phase"] == "Running" and not pod_ready(running)
    assert running["status"]["podIP"].startswith("127.")
    assert call(w.url("d") + "/health")[0] == 503, "loading: not healthy yet"
    assert due == pytest.approx(38.03 * SCALE, abs=1e-4), "the serving model's cold start, scaled"
    assert w.host.report()["pods"][0]["readySince"] is None
    w.clock.now += due
    w.step()
    assert pod_ready(w.pod("d")) and call(w.url("d") + "/health")[0] == 200
    assert w.host.report()["pods"][0]["readySince"] is not None, "when it turned Ready, for tests that check no request came earlier"


def test_a_lifecycle_scale_shortens_the_load_and_the_grace_but_not_the_requests(world):
    w = world(scale=1.0, lifecycle=SCALE)
    w.client.post(PODS, sglang_pod("d", "decode", pre_stop=10, grace=60))
    assert w.step() == pytest.approx(38.03 * SCALE, abs=1e-4), "the cold start times the lifecycle scale"
    assert w.host.time_scale == 1.0 and w.host.report()["lifecycleScale"] == SCALE
    w.clock.now += 1
    w.step()
    assert pod_ready(w.pod("d"))
    w.client.delete(f"{PODS}/d")
    assert w.step() == pytest.approx(10 * SCALE), "the preStop sleep times the lifecycle scale"


def test_sglang_prefill_hands_its_kv_to_the_decode_of_the_same_bootstrap_room(world):
    w = world()
    w.ready(sglang_pod("p", "prefill"), sglang_pod("d", "decode"))
    prefill_ip = w.pod("p")["status"]["podIP"]
    body = {"text": "the quick brown fox", "sampling_params": {"max_new_tokens": 6},
            "bootstrap_host": prefill_ip, "bootstrap_port": 8998, "bootstrap_room": 7}
    answers: dict[str, tuple[int, str]] = {}
    threads = [threading.Thread(target=lambda n=n: answers.__setitem__(n, call(w.url(n) + "/generate", body))) for n in ("d", "p")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    decoded, prefilled = json.loads(answers["d"][1]), json.loads(answers["p"][1])
    assert answers["d"][0] == answers["p"][0] == 200
    assert decoded["meta_info"]["completion_tokens"] == 6 and decoded["text"] == " t1 t2 t3 t4 t5 t6"
    assert decoded["meta_info"]["prompt_tokens"] == 4 and decoded["meta_info"]["finish_reason"] == {"type": "length", "length": 6}
    assert prefilled["meta_info"]["completion_tokens"] == 1
    rooms = {r["path"]: r.get("bootstrapRoom") for p in w.host.report()["pods"] for r in p["requests"] if r["path"] == "/generate"}
    assert rooms == {"/generate": 7}


def test_streams_and_openai_endpoints_answer_in_the_engines_shapes(world):
    w = world()
    w.ready(sglang_pod("a", "null"))
    url = w.url("a")
    code, text = call(url + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3}, "stream": True})
    chunks = events(text)
    assert code == 200 and chunks[-1] == "[DONE]"
    texts = [c["text"] for c in chunks[:-1]]
    assert texts[-1] == " t1 t2 t3" and all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:])), "SGLang streams the text so far"
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-2])
    assert chunks[-2]["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    code, text = call(url + "/v1/completions", {"model": LLAMA, "prompt": "hi there", "max_tokens": 2, "stream": True})
    chunks = events(text)
    assert code == 200 and "".join(c["choices"][0]["text"] for c in chunks[:-1]) == " t1 t2" and chunks[-2]["choices"][0]["finish_reason"] == "length"
    code, text = call(url + "/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True})
    chunks = events(text)
    assert code == 200 and chunks[0]["object"] == "chat.completion.chunk" and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    code, text = call(url + "/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    whole = json.loads(text)
    assert whole["choices"][0]["message"]["content"] == " t1 t2" and whole["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    info = json.loads(call(url + "/model_info")[1])
    assert info["served_model_name"] == LLAMA and "model_path" not in info, "no path: the router would fetch a tokenizer off this machine"
    assert json.loads(call(url + "/v1/models")[1])["data"][0]["id"] == LLAMA
    metrics = call(url + "/metrics")[1]
    for name in ("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage", "sglang:prompt_tokens_total",
                 "sglang:generation_tokens_total", "sglang:time_to_first_token_seconds_bucket", "sglang:inter_token_latency_seconds_bucket"):
        assert f"\n{name}{{" in metrics, name
    assert f'sglang:generation_tokens_total{{model_name="{LLAMA}"}} 9.0' in metrics


def test_vllm_answers_with_its_own_names_and_a_model_without_profile_says_its_timing_is_fixed(world):
    w = world()
    w.client.post(PODS, vllm_pod("v"))
    w.step()
    w.clock.now += 10.0 * SCALE  # the fixed load time
    w.step()
    assert pod_ready(w.pod("v"))
    url = w.url("v", 8000)
    assert call(url + "/health")[0] == 200 and call(url + "/health_generate")[0] == 404
    assert call(url + "/v1/completions", {"prompt": "a b c", "max_tokens": 4})[0] == 200
    metrics = call(url + "/metrics")[1]
    for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket"):
        assert f"\n{name}{{" in metrics, name
    assert 'timing="fixed"' in metrics and 'vllm:prompt_tokens_total{engine="0",model_name="acme/unprofiled-7b"} 3.0' in metrics


def test_vllm_prefill_hands_its_kv_to_the_decode_its_proxy_names(world):
    """The NixlConnector proxy's protocol: the prefill, asked `do_remote_decode`, answers
    `kv_transfer_params` naming itself; the decode given them fetches the KV from there."""
    w = world()
    w.ready(vllm_pod("p", LLAMA, "kv_producer"), vllm_pod("d", LLAMA, "kv_consumer"))
    request = {"model": LLAMA, "prompt": "one two three", "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    code, text = call(w.url("p", 8000) + "/v1/completions", request)
    handed = json.loads(text)["kv_transfer_params"]
    assert code == 200 and handed["do_remote_prefill"] is True and handed["remote_host"] == w.pod("p")["status"]["podIP"]
    code, text = call(w.url("d", 8000) + "/v1/completions", {**request, "max_tokens": 5, "kv_transfer_params": handed})
    assert code == 200 and json.loads(text)["choices"][0]["text"] == " t1 t2 t3 t4 t5"
    assert "vllm:prompt_tokens_total" in call(w.url("p", 8000) + "/metrics")[1]


def test_deleting_an_engine_pod_is_graceful_prestop_then_drain_then_gone(world):
    w = world()
    w.ready(sglang_pod("d", "decode", pre_stop=10, grace=60))
    before = w.pod("d")
    url = w.url("d")
    answer = w.client.delete(f"{PODS}/d")
    assert answer.code == 200 and answer.body["metadata"]["deletionGracePeriodSeconds"] == 60 and answer.body["metadata"]["deletionTimestamp"]
    marked = w.pod("d")
    assert marked["status"] == before["status"], "the status stays (Running, Ready) in the one MODIFIED event"
    assert w.step() == pytest.approx(10 * SCALE), "the preStop sleep, scaled"
    assert call(url + "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2}})[0] == 200, "it serves through preStop"
    w.clock.now += 10 * SCALE
    w.step()
    for _ in range(200):  # the handler ends a moment after its answer went out: then the engine is idle
        if w.client.get(f"{PODS}/d").code == 404:
            break
        threading.Event().wait(0.01)
        w.step()
    assert w.client.get(f"{PODS}/d").code == 404
    try:
        code: int | None = call(url + "/health", timeout=2)[0]
    except OSError:  # refused: the listener is closed (URLError is an OSError)
        code = None
    assert code in (None, 503), "a stopped engine takes no requests"
    record = w.host.report()["pods"][0]
    assert record["deletingSince"] is not None and record["stoppedAt"] >= record["deletingSince"] and not record["running"]
    assert all(r["arrival"] <= record["stoppedAt"] for r in record["requests"])


def test_an_in_flight_request_finishes_before_the_pod_goes(world):
    w = world(scale=1.0)  # decode steps of real milliseconds; the kubelet's clock still moves by hand
    w.client.post(PODS, sglang_pod("a", "null", pre_stop=1, grace=600))
    w.step()
    w.clock.now += 60
    w.step()
    url = w.url("a")
    answer: list[tuple[int, str]] = []
    started = threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), answer.append(call(url + "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 300}}))))
    thread.start()
    started.wait()
    while not any(r["path"] == "/generate" for r in w.host.report()["pods"][0]["requests"]):
        threading.Event().wait(0.005)
    w.client.delete(f"{PODS}/a")
    w.step()
    w.clock.now += 1
    assert w.step() is not None, "stopped taking requests, waiting for the one in flight"
    assert w.client.get(f"{PODS}/a").code == 200
    thread.join()
    assert answer[0][0] == 200 and '"completion_tokens": 300' in answer[0][1]
    for _ in range(200):  # the handler ends a moment after its answer went out
        w.step()
        if w.client.get(f"{PODS}/a").code == 404:
            break
        threading.Event().wait(0.01)
    assert w.client.get(f"{PODS}/a").code == 404


def test_grace_period_zero_removes_at_once_and_other_pods_go_at_once(world):
    w = world()
    w.ready(sglang_pod("d", "decode", pre_stop=10))
    plain = pod("plain")
    plain["spec"]["containers"][0]["image"] = "nginx:1.27"
    w.client.post(PODS, plain)
    w.step()
    assert w.client.delete(f"{PODS}/d", {"gracePeriodSeconds": 0}).code == 200
    assert w.client.get(f"{PODS}/d").code == 404
    assert w.client.delete(f"{PODS}/plain").code == 200 and w.client.get(f"{PODS}/plain").code == 404


def _one_ready_engine(client: Client) -> str:
    """Pod `d`, an SGLang engine, created and waited for until Ready (the server's own
    kubelet runs it); its engine's URL."""
    client.post(PODS, sglang_pod("d", "null"))
    for _ in range(400):
        if pod_ready(client.get(f"{PODS}/d").body):
            break
        threading.Event().wait(0.01)
    return f"http://{client.get(f'{PODS}/d').body['status']['podIP']}:30000"


def test_the_server_reports_every_engine_pod_and_its_requests_after_it_is_gone():
    with ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=SCALE) as server:
        client = Client(server.url)
        url = _one_ready_engine(client)
        assert call(url + "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})[0] == 200
        for _ in range(400):  # a record is finished a moment after its answer went out
            if all(r["status"] for r in server.engine_report()["pods"][0]["requests"]):
                break
            threading.Event().wait(0.005)
        own = json.loads(call(url + "/tandem/requests")[1])
        assert [r["path"] for r in own["requests"]][-1] == "/generate" and own["pod"] == "serving/d"
        client.delete(f"{PODS}/d", {"gracePeriodSeconds": 0})
        report = client.get("/tandem/engines").body
        (entry,) = report["pods"]
        assert (entry["name"], entry["engine"], entry["profile"], entry["gpu"]) == ("d", "sglang", "llama-3.1-8b", "h100-sxm")
        assert any(r["path"] == "/generate" and r["status"] == 200 and not r["failed"] for r in entry["requests"])


def test_a_pod_being_deleted_stays_through_other_writes_and_a_second_delete_may_end_it_at_once(world):
    w = world()
    w.ready(sglang_pod("d", "decode", pre_stop=10, grace=60))
    w.client.delete(f"{PODS}/d")
    patched = w.client.patch(f"{PODS}/d", {"metadata": {"labels": {"draining": "yes"}}})
    assert patched.code == 200 and patched.body["metadata"]["deletionGracePeriodSeconds"] == 60
    assert w.client.get(f"{PODS}/d").code == 200, "a write during the grace period does not remove it"
    assert w.client.delete(f"{PODS}/d", {"gracePeriodSeconds": 0}).code == 200
    assert w.client.get(f"{PODS}/d").code == 404


def test_an_engine_that_cannot_listen_is_an_event_and_the_pod_runs_without_it(world):
    w = world()
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # an earlier test's stand-in may have left TIME_WAIT behind
        first = pod_network.address(w.network.block, 1)
        taken.bind((first, 30000))  # the first pod IP the kubelet hands out
        taken.listen()
        w.client.post(PODS, sglang_pod("d", "decode"))
        w.step()
        events = w.client.get("/api/v1/namespaces/serving/events").body["items"]
        assert [(e["reason"], e["type"], e["involvedObject"]["name"]) for e in events] == [("EngineNotStarted", "Warning", "d")]
        assert f"cannot listen on {first}:30000" in events[0]["message"]
        assert pod_ready(w.pod("d")), "no engine to wait for"
        assert w.client.delete(f"{PODS}/d").code == 200 and w.client.get(f"{PODS}/d").code == 404, "deleted at once, as any other pod"


def test_the_metrics_fault_switch_makes_every_engine_s_metrics_answer_503_while_it_serves():
    """`PUT /tandem/engines/faults {"metricsDown": true}`: a metrics outage as an autoscaler
    sees one (tests/e2e/test_autoscaling_load.py), the engine still serving; a wrong body is a 400."""
    with ApiServer(objects=small_cluster(gpus=8), engines=True, engine_time_scale=SCALE) as server:
        client = Client(server.url)
        url = _one_ready_engine(client)
        assert client.get("/tandem/engines/faults").body == {"metricsDown": False}
        assert call(url + "/metrics")[0] == 200
        assert client.put("/tandem/engines/faults", {"metricsDown": True}).body == {"metricsDown": True}
        assert call(url + "/metrics")[0] == 503
        assert call(url + "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})[0] == 200, "still serving"
        client.post(PODS, sglang_pod("e", "null"))  # a stand-in started during the outage is in it too
        for _ in range(400):
            if pod_ready(client.get(f"{PODS}/e").body):
                break
            threading.Event().wait(0.01)
        assert call(f"http://{client.get(f'{PODS}/e').body['status']['podIP']}:30000/metrics")[0] == 503
        for body in ({"metricsDown": "yes"}, {"metricsDown": True, "other": 1}, [1]):
            reply = client.put("/tandem/engines/faults", body)
            assert reply.code == 400 and "/tandem/engines/faults" in reply.body["message"], reply.body
        assert client.put("/tandem/engines/faults", {"metricsDown": False}).body == {"metricsDown": False}
        assert call(url + "/metrics")[0] == 200
