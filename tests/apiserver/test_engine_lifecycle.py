"""Engine stand-ins through their lifecycle: every request hears back when an engine stops,
loopback HTTP never goes through a proxy, a stopped stand-in lets go of its connections,
and its timing keeps to the serving model.

Stand-ins built here listen on a pod network block of their own (`pod_network.reserve()`),
so they never collide with another server on the machine."""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
from typing import Any, Iterator

import pytest

from apiserver.engine_pods import LLAMA, PODS, sglang_pod, vllm_pod
from apiserver.helpers import Client, Clock, small_cluster
from tandem.apiserver import pod_network
from tandem.apiserver.engines import timing
from tandem.apiserver.engines.core import EngineLoop, Job, next_deadline
from tandem.apiserver.engines.host import EngineHost
from tandem.apiserver.engines.recognition import EngineSpec, recognise
from tandem.apiserver.engines.standin import RequestLog, StandIn, _updates
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer
from tandem.sim.serving.profiles import GPU_NAMES, MODEL_NAMES, gpu_profile

FIXED = timing.timing(None, gpu_profile("h100-sxm"), 1)  # 10 ms per prefill iteration, 10 ms per decode step
# Reserved blocks from 127.11 up: kubelets that tests build without a reservation hand out 127.10.
OWN_BLOCKS = pod_network.DEFAULT_BLOCK + 1
BACKSTOP = 10.0  # seconds a test waits for an event that must come (a hang fails, it does not block the run)


class Network:
    """Stand-ins on a reserved 127.X block: the n-th at 127.X.0.n+1."""

    def __init__(self, block: int):
        self.block = block
        self.standins: list[StandIn] = []

    def standin(self, engine: str, role: str | None, *, scale: float = 0.001, bootstrap: int | None = None, **more: Any) -> StandIn:
        port = 30000 if engine == "sglang" else 8000
        spec = EngineSpec(engine=engine, container="engine", port=port, role=role, served_model="m", profile=None,  # type: ignore[arg-type]
                          gpu="h100-sxm", tp=1, bootstrap_port=bootstrap, **more)
        ip = pod_network.address(self.block, len(self.standins) + 1)
        made = StandIn(spec, ip, FIXED, scale, RequestLog(), f"test/{ip}", 0.0)
        self.standins.append(made)
        return made


@pytest.fixture
def network() -> Iterator[Network]:
    reservation = pod_network.reserve(OWN_BLOCKS)
    made = Network(reservation.block)
    try:
        yield made
    finally:
        for standin in made.standins:
            standin.close(wait=True)
        reservation.release()


def request(standin: StandIn, path: str, body: Any = None, port: int | None = None) -> tuple[int, str]:
    """(status, text) of a GET, or a JSON POST when `body` is given: straight to the stand-in."""
    connection = http.client.HTTPConnection(standin.ip, port or standin.spec.port, timeout=BACKSTOP)
    try:
        data = None if body is None else json.dumps(body)
        connection.request("GET" if body is None else "POST", path, data, {"Content-Type": "application/json"} if data else {})
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


def _quiet(kind: str, value: float) -> None:
    return None


def _wait_until(condition: Any) -> None:
    """Until `condition()` holds (no timing asserted: a backstop against a hang)."""
    done = threading.Event()
    for _ in range(int(BACKSTOP / 0.005)):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError("never happened")


# ---------------------------------------------------------------------- 1. stopping fails every job


def test_a_job_in_the_prefill_iteration_in_progress_fails_when_the_engine_stops():
    loop = EngineLoop(FIXED, 1000.0, _quiet, "t")  # a prefill iteration of 10 s: the test stops it midway
    job = Job(10, 5, prefill=True, decode=True)
    loop.submit(job)
    _wait_until(lambda: loop.load()[:2] == (0, 1))  # taken out of the queue into the iteration
    loop.close()
    assert job.events.get(timeout=BACKSTOP) == ("error", 0)


def test_a_job_submitted_after_the_engine_stopped_fails_at_once():
    loop = EngineLoop(FIXED, 0.001, _quiet, "t")
    loop.close()
    for late in (Job(10, 5, prefill=True, decode=True), Job(10, 5, prefill=False, decode=True)):  # the second: a decode whose KV came late
        loop.submit(late)
        assert late.events.get_nowait()[0] == "error"
    assert loop.load() == (0, 0, 0)


def test_a_handler_that_hears_nothing_of_its_job_gives_up_as_failed():
    assert list(_updates(Job(10, 5, prefill=True, decode=True), silence=0.01)) == [(0, False, True)]


# ---------------------------------------------------------------------- 2. no proxy on loopback


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy configured that nothing listens on: any request sent through it fails."""
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_the_probe_and_the_kv_handoff_never_go_through_a_proxy(network, proxied):
    prefill = network.standin("sglang", "prefill", bootstrap=8998)
    decode = network.standin("sglang", "decode")
    assert prefill.probe() and decode.probe()
    body = {"text": "a b c", "sampling_params": {"max_new_tokens": 3}, "bootstrap_host": prefill.ip, "bootstrap_port": 8998, "bootstrap_room": 7}
    answers: list[tuple[int, str]] = []
    decoding = threading.Thread(target=lambda: answers.append(request(decode, "/generate", body)))
    decoding.start()
    assert request(prefill, "/generate", body)[0] == 200
    decoding.join()
    assert answers[0][0] == 200 and json.loads(answers[0][1])["text"] == " t1 t2 t3"


# ---------------------------------------------------------------------- 3. the kubelet asks in-process


def test_the_kubelet_turns_an_engine_pod_ready_without_a_connection_under_the_lock(monkeypatch: pytest.MonkeyPatch):
    """The kubelet's step runs under the server's lock: it asks the stand-in in-process, so no
    connection is opened there (one that stalled would freeze the whole API)."""
    reservation = pod_network.reserve(OWN_BLOCKS)
    clock = Clock()
    host = EngineHost(0.001, monotonic=clock)
    try:
        with ApiServer(objects=small_cluster(gpus=8), kubelet=False) as server:
            client = Client(server.url)
            kubelet = Kubelet(server.state, engines=host, monotonic=clock, address_block=reservation.block)
            assert client.post(PODS, sglang_pod("d", "decode")).code == 201
            with server.state.lock:
                kubelet.step()
            clock.now += 1.0  # past the load time, scaled
            opened: list[Any] = []

            def refuse(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
                opened.append(address)
                raise ConnectionRefusedError("no connection under the lock")

            monkeypatch.setattr(socket, "create_connection", refuse)
            with server.state.lock:
                kubelet.step()
            monkeypatch.undo()
            pod = client.get(f"{PODS}/d").body
            assert opened == [] and any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
    finally:
        host.close_all()
        reservation.release()


# ---------------------------------------------------------------------- 4. a cut stream is a failure


def test_a_stream_cut_by_a_stopping_engine_is_recorded_as_failed(network):
    engine = network.standin("sglang", None, scale=1.0)  # 10 ms decode steps: 1000 tokens outlast the test's stop
    answers: list[tuple[int, str]] = []
    body = {"text": "a", "sampling_params": {"max_new_tokens": 1000}, "stream": True}
    streaming = threading.Thread(target=lambda: answers.append(request(engine, "/generate", body)))
    streaming.start()
    _wait_until(lambda: engine.loop.load()[1] == 1)
    engine.loop.close()  # the engine stops under the stream (the grace period ended)
    streaming.join()
    assert answers[0][0] == 200 and '"error"' in answers[0][1], "the header had gone out: the stream ends with an error event"
    _wait_until(lambda: engine.requests.snapshot()[-1]["status"] is not None)
    (record,) = engine.requests.snapshot()
    assert (record["path"], record["status"], record["failed"]) == ("/generate", 503, True)


# ---------------------------------------------------------------------- 5. vLLM's KV handoff while the prefill drains


def test_a_vllm_engine_with_a_kv_connector_listens_on_its_nixl_side_channel_port():
    producer = vllm_pod("p", LLAMA, "kv_producer")
    assert recognise(producer, None, MODEL_NAMES, GPU_NAMES).side_channel_port == 5600  # type: ignore[union-attr]
    producer["spec"]["containers"][0]["env"] = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "5601"}]
    assert recognise(producer, None, MODEL_NAMES, GPU_NAMES).side_channel_port == 5601  # type: ignore[union-attr]
    assert recognise(vllm_pod("v", LLAMA), None, MODEL_NAMES, GPU_NAMES).side_channel_port is None  # type: ignore[union-attr]


def test_a_vllm_decode_fetches_its_kv_from_a_prefill_that_stopped_taking_requests(network):
    prefill = network.standin("vllm", "prefill", side_channel_port=5600)
    decode = network.standin("vllm", "decode", side_channel_port=5600)
    ask = {"model": "m", "prompt": "a b", "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    code, text = request(prefill, "/v1/completions", ask)
    handed = json.loads(text)["kv_transfer_params"]
    assert code == 200 and (handed["remote_host"], handed["remote_port"]) == (prefill.ip, 5600), "the side channel, as NixlConnector names it"
    prefill.stop_accepting()  # its deletion began: the HTTP listener closes
    with pytest.raises(OSError):
        request(prefill, "/health")
    code, text = request(decode, "/v1/completions", {**ask, "max_tokens": 3, "kv_transfer_params": handed})
    assert code == 200 and json.loads(text)["choices"][0]["text"] == " t1 t2 t3"


# ---------------------------------------------------------------------- 6. a stopped stand-in ends its connections


def test_a_stopped_stand_in_ends_the_keep_alive_connections_it_had(network):
    engine = network.standin("sglang", None)
    connection = http.client.HTTPConnection(engine.ip, engine.spec.port, timeout=BACKSTOP)
    connection.request("GET", "/health")
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200 and not answer.will_close, "kept alive"
    engine.close(wait=True)
    assert connection.sock is not None
    assert connection.sock.recv(1) == b"", "the stand-in closed it (it did not wait for another request)"
    connection.close()


# ---------------------------------------------------------------------- 7. only serving requests are recorded


def test_only_serving_requests_and_kv_handoffs_are_recorded_not_polls(network):
    prefill = network.standin("sglang", "prefill", bootstrap=8998)
    decode = network.standin("sglang", "decode")
    for path in ("/health", "/metrics", "/model_info", "/server_info", "/get_load", "/v1/models", "/nowhere"):
        request(decode, path)
    body = {"text": "a b", "sampling_params": {"max_new_tokens": 2}, "bootstrap_host": prefill.ip, "bootstrap_port": 8998, "bootstrap_room": 9}
    answers: list[tuple[int, str]] = []
    decoding = threading.Thread(target=lambda: answers.append(request(decode, "/generate", body)))
    decoding.start()
    assert request(prefill, "/generate", body)[0] == 200
    decoding.join()
    assert answers[0][0] == 200
    _wait_until(lambda: all(r["status"] for r in decode.requests.snapshot()))  # a record is finished a moment after its answer went out
    assert [(r["path"], r["status"], r.get("bootstrapRoom")) for r in decode.requests.snapshot()] == [("/generate", 200, 9)]
    _wait_until(lambda: len(prefill.requests.snapshot()) == 2 and all(r["status"] for r in prefill.requests.snapshot()))
    assert sorted((r["path"], r["status"], str(r.get("bootstrapRoom"))) for r in prefill.requests.snapshot()) == [("/generate", 200, "9"), ("/tandem/kv", 200, "9")]


# ---------------------------------------------------------------------- 8. timing: no overhead adds up


class OverheadClock:
    """A clock that moves only by sleeping, each sleep costing `overhead` more than asked,
    as the loop's own work does between iterations."""

    def __init__(self, overhead: float):
        self.now, self.overhead = 0.0, overhead

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self.overhead


def test_the_loops_overhead_does_not_add_up_in_the_inter_token_latency():
    clock = OverheadClock(overhead=0.001)  # 10% of a 10 ms decode step
    itls: list[float] = []
    loop = EngineLoop(FIXED, 1.0, lambda kind, value: itls.append(value) if kind == "itl" else None, "t", monotonic=clock, sleep=clock.sleep)
    job = Job(4, 6, prefill=True, decode=True)
    loop.submit(job)
    while job.events.get(timeout=BACKSTOP)[0] != "done":
        pass
    loop.close()
    steps = [timing.decode_step_seconds(FIXED, 1, 4 + generated) for generated in range(1, 6)]
    assert itls == pytest.approx(steps, rel=1e-9), "each token one decode step after the last, as the model says"


def test_a_deadline_follows_the_last_one_and_restarts_after_an_idle_spell_or_a_long_stall():
    assert next_deadline(None, 5.0, 0.5) == 5.5
    assert next_deadline(5.5, 5.6, 0.5) == 6.0, "the 0.1 s spent between iterations is not added"
    assert next_deadline(5.5, 7.0, 0.5) == 7.5, "more than a step behind: no burst to catch up"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_tp8_pp2_engines_decode_step_is_the_one_profile_predict_prints(engine, run_cli):
    model = "meta-llama/Llama-3.1-70B-Instruct"
    if engine == "sglang":
        pod = sglang_pod("d", "decode", model=model)
        pod["spec"]["containers"][0]["args"] += ["--tp-size", "8", "--pp-size", "2"]
    else:
        pod = vllm_pod("d", model, "kv_consumer")
        pod["spec"]["containers"][0]["args"] += ["--tensor-parallel-size=8", "--pipeline-parallel-size=2"]
    spec = recognise(pod, None, MODEL_NAMES, GPU_NAMES)
    assert spec is not None and (spec.tp, spec.pp) == (8, 2)
    cost = EngineHost()._timing(spec)
    result = run_cli("profile", "predict", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "2", "--prompt", "1024", "--batch", "16")
    predicted = json.loads(result.stdout)
    assert timing.decode_step_seconds(cost, 16, 16 * 1024) == predicted["decode_step_s"]
    assert timing.prefill_seconds(cost, [1024] * 16) == predicted["prefill_s"]


# ---------------------------------------------------------------------- 9. small ones


def test_a_bad_content_length_is_answered_400_not_a_traceback(network):
    engine = network.standin("sglang", None)
    with socket.create_connection((engine.ip, engine.spec.port), timeout=BACKSTOP) as raw:
        raw.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: many\r\n\r\n")
        answer = b""
        while chunk := raw.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 ") and b"Content-Length" in answer


def test_vllm_counts_finished_requests_by_their_finished_reason(network):
    engine = network.standin("vllm", None)
    assert request(engine, "/v1/completions", {"model": "m", "prompt": "a", "max_tokens": 2})[0] == 200
    metrics = request(engine, "/metrics")[1]
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1.0' in metrics


def test_a_server_whose_port_is_taken_gives_its_pod_network_block_back(monkeypatch: pytest.MonkeyPatch):
    taken: list[pod_network.Reservation] = []
    reserve = pod_network.reserve

    def remembered(*args: Any) -> pod_network.Reservation:
        taken.append(reserve(*args))
        return taken[-1]

    monkeypatch.setattr(pod_network, "reserve", remembered)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError):
            ApiServer(port=busy.getsockname()[1], objects=small_cluster(), engines=True)
    assert len(taken) == 1 and taken[0]._socket.fileno() == -1, "released"


class _Unbindable:
    """A socket module whose sockets never bind: every pod network block looks held."""

    AF_INET, SOCK_STREAM = socket.AF_INET, socket.SOCK_STREAM

    class socket:  # noqa: N801 - stands in for socket.socket
        def __init__(self, *args: Any) -> None:
            pass

        def bind(self, address: Any) -> None:
            raise OSError(98, "Address already in use")

        def close(self) -> None:
            pass


def test_no_free_pod_network_block_is_reported_against_engines_not_port(monkeypatch: pytest.MonkeyPatch, run_cli, tmp_path):
    monkeypatch.setattr(pod_network, "socket", _Unbindable)
    result = run_cli("apiserver", "--engines", "--port", "0", "--kubeconfig", tmp_path / "kubeconfig")
    assert result.exit_code == 2 and "--engines" in result.stderr and "--port" not in result.stderr, result.stderr
    assert not (tmp_path / "kubeconfig").exists()
