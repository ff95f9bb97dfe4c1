"""The pods' own /metrics as the autoscaler's source, against the local API server's engine
stand-ins (vLLM- and SGLang-format /metrics on 127.X pod IPs): Signals from a load, a
restarted pod, a pod that stops answering, and an outage of every pod."""

from __future__ import annotations

import http.server
import math
import socket
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.engine_pods import LLAMA, PODS, call, sglang_pod, vllm_pod
from apiserver.helpers import NS, Client, Clock, small_cluster
from support.metrics_fakes import VllmExposition
from support.one_group import HeldPods, OneGroup
from tandem.apiserver import pod_network
from tandem.apiserver.engines.host import EngineHost
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer
from tandem.cluster.pods import pod_ready
from tandem.autoscaling.engine_metrics import engine_names
from tandem.cluster.memory import MemoryStore
from tandem.controller.autoscaler import autoscale
from tandem.operator.pod_metrics import PodMetrics, parse_exposition

SCALE = 0.001
GROUP = "g"
AUTOSCALED = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"


def member(pod: dict[str, Any], role: str, index: int = 0) -> dict[str, Any]:
    labels = pod["metadata"].setdefault("labels", {})
    labels.update({"tandem.dev/group": GROUP, "tandem.dev/role": role, "tandem.dev/pod-index": str(index)})
    return pod


class Snapshot(OneGroup):
    """A Reader over the server: the group as given, its pods as the API lists them."""

    def __init__(self, client: Client, roles: list[str]):
        super().__init__(NS, GROUP, roles)
        self.client = client

    def pods(self, namespace: str | None) -> list[dict[str, Any]]:
        selector = urllib.parse.quote(f"tandem.dev/group={GROUP}")
        return list(self.client.get(f"{PODS}?labelSelector={selector}").body["items"])


@pytest.fixture
def world():
    with ApiServer(objects=small_cluster(gpus=8), kubelet=False) as server:
        client = Client(server.url)
        clock = Clock()
        host = EngineHost(SCALE, monotonic=clock)
        network = pod_network.reserve()
        kubelet = Kubelet(server.state, engines=host, monotonic=clock, address_block=network.block)

        def settle() -> None:
            """Every start and graceful stop the kubelet has under way, carried out."""
            for _ in range(3):
                with server.state.lock:
                    kubelet.step()
                clock.now += 1000 * SCALE

        def ready(*pods: dict[str, Any]) -> None:
            for p in pods:
                assert client.post(PODS, p).code == 201
            settle()
            for p in pods:
                assert pod_ready(client.get(f"{PODS}/{p['metadata']['name']}").body)

        def url(name: str, port: int) -> str:
            return f"http://{client.get(f'{PODS}/{name}').body['status']['podIP']}:{port}"

        try:
            yield client, ready, url, settle
        finally:
            host.close_all()
            network.release()


def complete(url: str, tokens: int, times: int = 1) -> None:
    for _ in range(times):
        assert call(url + "/v1/completions", {"prompt": "a b c d", "max_tokens": tokens})[0] == 200


def test_vllm_pods_give_decode_token_rates_requests_and_percentiles_over_the_window(world) -> None:
    client, ready, url, _ = world
    ready(member(vllm_pod("d-0"), "decode"), member(vllm_pod("d-1"), "decode"), member(vllm_pod("d-1-w", kv_role=None), "decode", index=1))
    metrics = PodMetrics(Snapshot(client, ["decode"]), window_s=60)
    first = metrics("serving", GROUP, 0.0)
    assert first is not None and first.roles["decode"].replicas == 2, "one pod per replica: the leader"
    assert math.isnan(first.roles["decode"].tokens_per_s), "one reading has no rate yet"
    assert first.roles["decode"].queue_depth == 0.0
    complete(url("d-0", 8000), 5, times=2)
    complete(url("d-1", 8000), 3)
    got = metrics("serving", GROUP, 10.0)
    assert got is not None and got.at == 10.0
    assert got.roles["decode"].tokens_per_s == pytest.approx((10 + 3) / 10)
    assert got.output_tokens_per_s == pytest.approx(1.3) and got.arrival_rate == pytest.approx(0.3)
    assert got.ttft_p90_s > 0 and got.itl_p90_s > 0


def test_sglang_prefill_counts_prompt_tokens_and_every_role_of_the_group_is_listed(world) -> None:
    client, ready, url, _ = world
    ready(member(sglang_pod("p-0", "prefill"), "prefill"), member(sglang_pod("d-0", "decode"), "decode"))
    metrics = PodMetrics(Snapshot(client, ["prefill", "decode", "router"]))
    metrics("serving", GROUP, 0.0)
    got = metrics("serving", GROUP, 15.0)
    assert got is not None and sorted(got.roles) == ["decode", "prefill", "router"]
    assert got.roles["prefill"].tokens_per_s == 0.0 and got.roles["router"].replicas == 0
    assert got.roles["decode"].kv_utilization == 0.0 and got.roles["decode"].busy_fraction == 0.0


def test_a_restarted_pod_under_the_same_name_counts_its_new_tokens_not_a_negative_rate(world) -> None:
    client, ready, url, settle = world
    ready(member(vllm_pod("d-0"), "decode"))
    metrics = PodMetrics(Snapshot(client, ["decode"]))
    metrics("serving", GROUP, 0.0)
    complete(url("d-0", 8000), 8)
    metrics("serving", GROUP, 10.0)
    assert client.delete(f"{PODS}/d-0").code == 200
    settle()
    assert client.get(f"{PODS}/d-0").code == 404
    ready(member(vllm_pod("d-0"), "decode"))  # made again under its name: its counters start from 0
    complete(url("d-0", 8000), 2)
    got = metrics("serving", GROUP, 20.0)
    assert got is not None and got.roles["decode"].tokens_per_s == pytest.approx((8 + 2) / 20)


def test_a_pod_that_stops_answering_is_missing_and_an_outage_of_every_pod_gives_no_signals(world) -> None:
    client, ready, url, host = world
    ready(member(vllm_pod("d-0"), "decode"), member(vllm_pod("d-1"), "decode"))
    snapshot = Snapshot(client, ["decode"])
    metrics = PodMetrics(snapshot, window_s=60, timeout_s=0.5)
    metrics("serving", GROUP, 0.0)
    metrics("serving", GROUP, 15.0)
    broken = {p["metadata"]["name"]: p for p in snapshot.list("Pod", NS, {"tandem.dev/group": GROUP})}
    nowhere = ".".join(broken["d-1"]["status"]["podIP"].split(".")[:2] + ["255", "254"])  # in the server's block, never handed out
    lying = dict(broken["d-1"], status={**broken["d-1"]["status"], "podIP": nowhere})
    snapshot.list = lambda *a, **k: [broken["d-0"], lying]  # type: ignore[method-assign]
    got = metrics("serving", GROUP, 30.0)
    assert got is not None and got.roles["decode"].replicas == 2 and got.roles["decode"].tokens_per_s == 0.0, "d-1 stands on its readings at 0 and 15 s"
    nobody = dict(broken["d-0"], status={**broken["d-0"]["status"], "podIP": nowhere})
    snapshot.list = lambda *a, **k: [nobody, lying]  # type: ignore[method-assign]
    assert metrics("serving", GROUP, 45.0) is None, "every scrape failed: no signals, so no decision"
    last = metrics.last_round("serving", GROUP)
    assert last is not None and last.at == 45.0 and {p: s.reading for p, s in last.pods.items()} == {"d-0": None, "d-1": None}
    snapshot.group = None
    assert metrics("serving", GROUP, 60.0) is None and metrics.last_round("serving", GROUP) is None, "a group gone is forgotten"


def test_an_exposition_that_does_not_parse_is_a_value_error_and_counters_keep_their_total() -> None:
    samples = parse_exposition('# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{engine="0"} 3.0\n')
    assert [(s.name, s.labels, s.value) for s in samples if not s.name.endswith("_created")] == [
        ("vllm:prompt_tokens_total", (("engine", "0"),), 3.0)]
    with pytest.raises(ValueError):
        parse_exposition("vllm:num_requests_waiting not-a-number\n")


def ready_pod(name: str, role: str, port: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "annotations": annotations,
                         "labels": {"tandem.dev/group": GROUP, "tandem.dev/role": role, "tandem.dev/pod-index": "0"}},
            "spec": {"containers": [{"name": "e", "image": "acme/engine:1", "ports": [{"name": "metrics", "containerPort": port}]}]},
            "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}}


def held_pods(pods: list[dict[str, Any]], roles: list[str]) -> HeldPods:
    return HeldPods(NS, GROUP, roles, pods)


def test_another_engine_is_read_through_its_mapping_and_its_named_metrics_port() -> None:
    """Any engine: annotated `tandem.dev/engine: KIND`, its series mapped, its port named `metrics`."""
    names = engine_names({"waiting": "acme_queue", "running": "acme_running", "kv_usage": "acme_kv", "prompt_tokens": "acme_prompt",
                          "generation_tokens": "acme_generated", "requests": "acme_requests", "ttft": "acme_ttft", "itl": "acme_itl"})
    generated = [0]

    class Exposition(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"acme_queue 4\nacme_running 1\nacme_kv 0.5\nacme_generated_total {generated[0]}\n".encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exposition)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pods = held_pods([ready_pod("x-0", "worker", server.server_address[1], {"tandem.dev/engine": "acme"})], ["worker"])
        metrics = PodMetrics(pods, names={"acme": names})
        metrics("serving", GROUP, 0.0)
        generated[0] = 50
        got = metrics("serving", GROUP, 10.0)
        assert got is not None and got.roles["worker"].queue_depth == 4.0 and got.roles["worker"].tokens_per_s == 5.0
        assert PodMetrics(pods)("serving", GROUP, 0.0) is None, "an engine without a mapping is never read"
    finally:
        server.shutdown()
        server.server_close()


# Hugging Face TGI's series (its docs' metrics reference), as docs/autoscaling.md maps them.
TGI = {"waiting": "tgi_queue_size", "running": "tgi_batch_current_size", "requests": "tgi_request_success",
       "prompt_tokens": "tgi_request_input_length_sum", "generation_tokens": "tgi_request_generated_tokens_sum",
       "itl": "tgi_request_mean_time_per_token_duration"}


class TgiExposition:
    """A TGI-format /metrics on 127.0.0.1 (gauges, a counter, per-request histograms) that a test moves."""

    def __init__(self) -> None:
        self.requests, self.generated, self.prompt = 0, 0, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                n = outer.requests
                body = ("# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 2\n"
                        f"# TYPE tgi_request_success counter\ntgi_request_success {n}\n"
                        "# TYPE tgi_request_generated_tokens histogram\n"
                        f'tgi_request_generated_tokens_bucket{{le="+Inf"}} {n}\ntgi_request_generated_tokens_sum {outer.generated}\n'
                        f"tgi_request_generated_tokens_count {n}\n"
                        "# TYPE tgi_request_input_length histogram\n"
                        f'tgi_request_input_length_bucket{{le="+Inf"}} {n}\ntgi_request_input_length_sum {outer.prompt}\n'
                        f"tgi_request_input_length_count {n}\n"
                        "# TYPE tgi_request_mean_time_per_token_duration histogram\n"
                        f'tgi_request_mean_time_per_token_duration_bucket{{le="0.01"}} 0\n'
                        f'tgi_request_mean_time_per_token_duration_bucket{{le="0.05"}} {n}\n'
                        f'tgi_request_mean_time_per_token_duration_bucket{{le="+Inf"}} {n}\n'
                        f"tgi_request_mean_time_per_token_duration_sum {0.03 * n}\ntgi_request_mean_time_per_token_duration_count {n}\n").encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_group_naming_tgis_series_gets_its_signals_read_from_them_on_the_port_it_names() -> None:
    """A group's own mapping (spec.autoscaling.metrics: names, pods.port): TGI pods, annotated
    `tandem.dev/engine: tgi`, are read through TGI's series on the port named `http`."""
    tgi = TgiExposition()
    try:
        made = ready_pod("t-0", "decode", tgi.server.server_address[1], {"tandem.dev/engine": "tgi"})
        made["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": tgi.server.server_address[1]}, {"name": "metrics", "containerPort": 1}]
        pods = held_pods([made], ["prefill", "decode"])
        metrics = PodMetrics(pods, renames=TGI, port="http")
        metrics("serving", GROUP, 0.0)
        tgi.requests, tgi.generated, tgi.prompt = 20, 4_000, 10_000
        got = metrics("serving", GROUP, 10.0)
        assert got is not None and got.roles["decode"].replicas == 1
        assert (got.roles["decode"].queue_depth, got.roles["decode"].busy_fraction) == (3.0, 1.0)
        assert got.roles["decode"].tokens_per_s == 400.0 and got.output_tokens_per_s == 400.0 and got.arrival_rate == 2.0
        assert got.input_tokens_per_s == 1_000.0, "prompt tokens from the input-length histogram's sum"
        assert 0.01 < got.itl_p90_s <= 0.05
        assert math.isnan(got.roles["decode"].kv_utilization) and math.isnan(got.ttft_p90_s), "TGI exports neither: not measured"
        assert PodMetrics(pods)("serving", GROUP, 0.0) is None, "without the group's mapping an engine tandem does not know is not read"
        assert PodMetrics(pods, renames=TGI)("serving", GROUP, 0.0) is None, "the port named metrics (1) answers nothing"
        assert PodMetrics(pods, renames=TGI, port="http", path="/prometheus/metrics")("serving", GROUP, 0.0) is None, "the path is the group's too"
    finally:
        tgi.close()


def test_a_pod_that_accepts_but_never_answers_is_missing_after_the_time_out() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # connections queue; nothing ever reads or answers
    try:
        pods = held_pods([ready_pod("x-0", "worker", silent.getsockname()[1], {"tandem.dev/engine": "acme"})], ["worker"])
        names = engine_names({f: f for f in ("waiting", "running", "kv_usage", "prompt_tokens", "generation_tokens", "requests", "ttft", "itl")})
        assert PodMetrics(pods, names={"acme": names}, timeout_s=0.2)("serving", GROUP, 0.0) is None
    finally:
        silent.close()


def test_the_autoscaler_pass_scales_on_scraped_token_rates_and_takes_no_action_through_an_outage() -> None:
    """The whole chain: pods' /metrics -> PodMetrics -> the autoscaler's pass (FixedRatio,
    3,000 decode tokens/s per replica, 2:1). An outage of every pod is no signals, so no
    action; the same pods answering with no load scale down."""
    group = yaml.safe_load(AUTOSCALED.read_text())
    group["spec"]["autoscaling"]["stabilization"] = {"scaleUpSeconds": 0, "scaleDownSeconds": 0}
    store = MemoryStore()
    store.create(group)
    name = group["metadata"]["name"]
    engines = {pod: VllmExposition() for pod in ("p-0", "d-0")}
    try:
        for pod, exposition in engines.items():
            role = "prefill" if pod.startswith("p") else "decode"
            made = ready_pod(pod, role, exposition.server.server_address[1], {})
            made["metadata"]["labels"]["tandem.dev/group"] = name
            made["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.11.0"
            store.create({"apiVersion": "v1", "kind": "Pod", **made})
        metrics = PodMetrics(store.snapshot)

        def decide(now: float) -> tuple[list[int], str]:
            autoscale(store, now, metrics)
            stored = store.get("InferenceGroup", "serving", name)
            return [r["replicas"] for r in stored["spec"]["roles"]], stored["status"]["autoscaling"]["reason"]

        assert decide(0.0) == ([2, 1], "no action: decode tokensPerSecond not measured (NaN) -> unchanged (prefill 2, decode 1)")
        engines["d-0"].generated = 15 * 12_000
        assert decide(15.0)[0] == [8, 4], "12,000 tok/s / 3,000 = 4 decode, prefill 2:1"
        for exposition in engines.values():
            exposition.up = False
        counts, reason = decide(30.0)
        assert counts == [8, 4] and reason.startswith("no action: no signals"), reason
        assert decide(45.0)[0] == [8, 4], "still down"
        for exposition in engines.values():
            exposition.up = True
        assert decide(90.0)[0] == [8, 4], "one scrape in the window: no rate yet (and the panic of the burst at 15 s is over at 75 s)"
        assert decide(105.0)[0] == [1, 1], "answering again with no new tokens: the load is gone, down to the minimums"
    finally:
        for exposition in engines.values():
            exposition.close()
