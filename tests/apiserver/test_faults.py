"""The local API server's fault-injection hook (`tandem.apiserver.faults`), and the fault
campaign's HTTP world that runs the operator replicas against it (docs/reliability.md).

The hook is off unless a test installs one in-process: errors answered before anything is
done, writes committed whose answer is lost (504-applied), watches cut, history compacted
(410 Gone as an ERROR event or as the answer)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from apiserver.helpers import NS, Client, pod, small_cluster
from tandem.apiserver.faults import Faults, Injected, Request
from tandem.apiserver.server import ApiServer

PODS = f"/api/v1/namespaces/{NS}/pods"
ROOT = Path(__file__).resolve().parents[2]


def test_the_server_has_no_fault_hook_unless_a_test_installs_one():
    with ApiServer(kubelet=False, crds=False) as server:
        assert server.faults is None and server.state.faults is None
    cli = (ROOT / "src" / "tandem" / "cli" / "main.py").read_text()
    started = [line for line in cli.splitlines() if "ApiServer(" in line]
    assert started and not any("faults" in line for line in started), "`tandem apiserver` cannot be started with faults"
    assert "apiserver.faults" not in cli and "apiserver import faults" not in cli


def test_an_injected_error_is_answered_before_anything_is_done():
    asked: list[Request] = []

    def decide(request: Request) -> Injected | None:
        asked.append(request)
        if request.method == "POST":
            return Injected(429, headers={"Retry-After": "1"})
        return None

    with ApiServer(objects=small_cluster(), kubelet=False, faults=Faults(decide)) as server:
        client = Client(server.url)
        refused = client.post(PODS, pod("a"))
        assert refused.code == 429 and refused.body["reason"] == "TooManyRequests" and refused.headers["retry-after"] == "1"
        assert client.get(f"{PODS}/a").code == 404, "nothing was created"
        assert client.get("/healthz").code == 200 and client.get("/api/v1").code == 200, "health and discovery are never asked"
    post = next(r for r in asked if r.method == "POST")
    assert post.kind == "Pod" and not post.watch and post.path == PODS
    assert all(r.path.startswith("/api/v1/") and r.path != "/api/v1" for r in asked)


def test_an_applied_fault_commits_the_write_and_loses_its_answer():
    faults = Faults(lambda r: Injected(504, "injected: applied", applied=True) if r.method in ("POST", "DELETE") else None)
    with ApiServer(objects=small_cluster(), kubelet=False, faults=faults) as server:
        client = Client(server.url)
        answer = client.post(PODS, pod("a"))
        assert answer.code == 504 and answer.body["reason"] == "Timeout" and answer.body["message"] == "injected: applied"
        stored = client.get(f"{PODS}/a")
        assert stored.code == 200, "the write went through"
        (request, code, body), = faults.lost_answers
        assert request.method == "POST" and code == 201 and body["metadata"]["uid"] == stored.body["metadata"]["uid"]
        assert client.delete(f"{PODS}/a").code == 504
        assert client.get(f"{PODS}/a").code == 404, "the delete went through too"
        refused = client.delete(f"{PODS}/a")
        assert refused.code == 404, "a write that fails answers its own error, not the injected one"


def test_cut_watches_ends_every_open_watch_and_a_new_one_goes_on_from_its_version():
    faults = Faults()
    with ApiServer(objects=small_cluster(), kubelet=False, faults=faults) as server:
        client = Client(server.url)
        client.post(PODS, pod("a"))
        version = client.get(PODS).body["metadata"]["resourceVersion"]
        events: list = []
        done = threading.Event()

        def read() -> None:
            events.extend(client.watch(f"{PODS}?watch=true&resourceVersion={version}&timeoutSeconds=30", timeout=30))
            done.set()

        threading.Thread(target=read, daemon=True).start()
        time.sleep(0.3)
        client.post(PODS, pod("b"))
        time.sleep(0.3)
        started = time.monotonic()
        faults.cut_watches()
        assert done.wait(5) and time.monotonic() - started < 2, "the watch ended long before its time-out"
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]
        later = client.watch(f"{PODS}?watch=true&resourceVersion={version}&timeoutSeconds=1")
        assert [e["object"]["metadata"]["name"] for e in later] == ["b"], "a watch begun after the cut is served"


def test_a_compacted_history_answers_410_as_an_error_event_or_as_the_status():
    faults = Faults()
    with ApiServer(objects=small_cluster(), kubelet=False, faults=faults) as server:
        client = Client(server.url)
        old = client.get(PODS).body["metadata"]["resourceVersion"]
        client.post(PODS, pod("a"))
        faults.compact()
        now = client.get(PODS).body["metadata"]["resourceVersion"]
        events = client.watch(f"{PODS}?watch=true&resourceVersion={old}&timeoutSeconds=5")
        assert len(events) == 1 and events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        assert events[0]["object"]["reason"] == "Expired"
        assert client.watch(f"{PODS}?watch=true&resourceVersion={now}&timeoutSeconds=1") == [], "from the compaction on: served"
        faults.gone_as_status = True
        answer = client.get(f"{PODS}?watch=true&resourceVersion={old}&timeoutSeconds=5")
        assert answer.code == 410 and answer.body["reason"] == "Expired"


# ----------------------------------------------------------------------------- the campaign's HTTP world


def _http_outcome(seed: int):
    from support.faults.campaign import play
    from support.faults.http import HttpWorld
    from support.faults.invariants import Checker
    from support.faults.schedule import generate

    world = HttpWorld(generate(seed, world="http"), Checker)
    try:
        outcome = play(world)
        assert world.hook is not None
        return outcome, list(world.hook.lost_answers), world.server
    finally:
        world.close()


def test_the_campaign_over_http_runs_against_the_local_api_server_with_writes_applied_and_answers_lost():
    from support.faults.schedule import generate

    assert any(e.get("code") == "504-applied" for e in generate(8, world="http").events), "seed 8 draws a 504-applied storm"
    outcome, lost, server = _http_outcome(8)
    assert isinstance(server, ApiServer)
    assert outcome.ok, [f"{v.invariant}: {v.detail}" for v in outcome.violations]
    assert lost, "some writes were committed and their answers lost"
    assert outcome.counts["injected_errors"] > 0


def test_the_same_seed_gives_the_same_outcome_over_http():
    first, second = _http_outcome(8)[0], _http_outcome(8)[0]
    assert first.to_json() == second.to_json() and first.steps > 0
