"""The operator's loop in-process over the in-memory store: passes when due, coalesced;
only the leader writes; a standby finishes a rollout its leader left mid-way."""

from __future__ import annotations

import threading
import time
import urllib.request

from support.controller_world import design_group, kubelet, over_committed, world
from tandem.runtime.endpoints import serve
from tandem.runtime.leader import LeaderElector, LeaseConfig
from tandem.operator.runner import Operator
from tandem.runtime.schedule import PassSchedule


class Clock:
    def __init__(self, now=1_764_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def test_changes_are_coalesced_rate_limited_and_requeues_honoured():
    s = PassSchedule(debounce=0.05, min_interval=0.1, resync=300.0)
    assert s.due(0.0), "the first pass runs at once"
    s.ran(0.0, None)
    assert not s.due(0.01) and s.next_due(0.01) == 300.0, "nothing changed: the resync"
    for t in (0.02, 0.03, 0.04):
        s.changed(t)
    assert s.next_due(0.04) == 0.1, "three changes, one pass, not before min_interval"
    s.ran(0.1, 30.0)
    assert s.next_due(0.2) == 30.1, "requeue_after makes one due"
    s.changed(5.0)
    assert s.next_due(5.0) == 5.05


def test_a_change_that_comes_while_a_pass_runs_makes_another_pass_due():
    s = PassSchedule(debounce=0.05, min_interval=0.1, resync=300.0)
    s.ran(0.0, None)
    s.changed(1.0)
    s.changed(1.2)  # after the pass below started: it may not have seen this one
    s.ran(1.1, None)
    assert s.next_due(1.3) == 1.25, "the later change is not lost with the earlier one"
    s.ran(1.25, None)
    assert s.next_due(1.3) == 301.25, "every change seen: the resync"


def test_the_operator_rolls_a_group_out_and_then_idles():
    store = world(design_group())
    clock = Clock()
    operator = Operator(store, clock)
    for _ in range(60):
        operator.tick(clock.now)
        if kubelet(store):
            operator.changed()
        clock.now += 0.5
    group = store.get("InferenceGroup", "serving", "llama")
    assert {c["type"]: c["status"] for c in group["status"]["conditions"]}["Available"] == "True"
    before = operator.passes
    for _ in range(20):
        operator.tick(clock.now)
        clock.now += 1.0
    assert operator.passes == before, "a settled cluster with no changes: no pass until the resync"


def test_only_the_leader_writes_and_a_standby_finishes_the_rollout_after_the_leader_dies():
    store = world(design_group(replicas=2))
    clock = Clock()
    config = dict(namespace="tandem-system", duration=15.0)
    a = Operator(store, clock, LeaderElector(store, LeaseConfig(identity="a", **config)))
    b = Operator(store, clock, LeaderElector(store, LeaseConfig(identity="b", **config)))
    created = []
    real_create = store.create

    def counting(obj):
        created.append(obj["metadata"]["name"])
        return real_create(obj)

    store.create = counting  # type: ignore[method-assign]
    for _ in range(6):  # a leads; the rollout starts
        a.tick(clock.now)
        assert b.tick(clock.now) is None, "a follower writes nothing"
        kubelet(store)
        a.changed()
        clock.now += 0.5
    assert a.leading and not b.leading and a.passes > 0 and b.passes == 0
    # a is killed (SIGKILL: no release); b takes over once the lease expires as it saw it
    renewed = a.elector.last_renewed
    while not b.leading:
        b.tick(clock.now)
        clock.now += 0.5
    assert clock.now - 0.5 - renewed >= 15.0, "not before the lease it last saw renewed expired"
    for _ in range(60):
        b.tick(clock.now)
        if kubelet(store):
            b.changed()
        assert not over_committed(store)
        clock.now += 0.5
    group = store.get("InferenceGroup", "serving", "llama")
    assert group["status"]["functionalUnits"] == 2
    pods = [n for n in created if store.list("Pod", fields=f"metadata.name={n}")]
    assert len(pods) == len(set(pods)) == 16, "no pod created twice"


def test_health_readiness_and_metrics_endpoints():
    store = world(design_group())
    clock = Clock()
    operator = Operator(store, clock)
    operator.tick(clock.now)
    servers = serve(operator, {0: {"/healthz", "/readyz", "/metrics"}}, clock, host="127.0.0.1")
    try:
        port = servers[0].server_address[1]

        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        assert get("/healthz") == (200, "ok\n") and get("/readyz") == (200, "ok\n")
        status, text = get("/metrics")
        assert status == 200
        assert 'tandem_writes_total{kind="Pod",verb="create"} 3.0' in text
        assert "tandem_pass_duration_seconds_count 1.0" in text and "tandem_leader 1.0" in text
        assert 'tandem_units{state="Pending"} 1.0' in text, "created and placed, not bound yet"
        assert 'tandem_group_units{group="llama",kind="unschedulable",namespace="serving"} 0.0' in text
        clock.now += 60.0
        assert get("/healthz")[0] == 503, "a loop that stopped turning is not healthy"
        assert get("/nope")[0] == 404
    finally:
        for server in servers:
            server.shutdown()


def test_run_stops_on_request_and_releases_the_lease():
    store = world(design_group())
    operator = Operator(store, time.time, LeaderElector(store, LeaseConfig(identity="a", namespace="tandem-system")))
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop,))
    thread.start()
    deadline = time.time() + 10
    while operator.passes == 0 and time.time() < deadline:
        time.sleep(0.01)
    stop.set()
    operator.stop_waiting()
    thread.join(timeout=5)
    assert not thread.is_alive() and operator.passes >= 1
    assert "holderIdentity" not in store.get("Lease", "tandem-system", "tandem-operator")["spec"], "released on stop"


def test_on_synced_runs_once_when_the_informers_first_report_synced():
    store = world(design_group())
    calls = []

    class Syncing:
        synced = False

        def __getattr__(self, name):
            return getattr(store, name)

        def has_synced(self):
            return self.synced

    cluster = Syncing()
    clock = Clock()
    operator = Operator(cluster, clock, on_synced=lambda: calls.append(clock.now))
    operator.tick(clock.now)
    assert calls == [] and operator.passes == 0, "not synced: no pass, no call"
    cluster.synced = True
    for _ in range(3):
        clock.now += 1.0
        operator.tick(clock.now)
    assert calls == [clock.now - 2.0], "once, at the first synced turn"


def test_a_pass_whose_writes_failed_retryably_is_retried_soon_with_a_doubling_backoff():
    s = PassSchedule(debounce=0.05, min_interval=0.1, resync=300.0, retry_base=0.5, retry_cap=4.0)
    s.ran(0.0, None, retry=True)
    assert s.next_due(0.1) == 0.5, "not at the resync: nothing else may change to wake a pass"
    s.ran(0.5, None, retry=True)
    s.ran(1.5, None, retry=True)
    assert s.next_due(1.6) == 3.5, "0.5, 1, 2 s: doubling"
    for t in (3.5, 7.5, 11.5):
        s.ran(t, None, retry=True)
    assert s.next_due(11.6) == 15.5, "capped"
    s.ran(15.5, 2.0, retry=True)
    assert s.next_due(15.6) == 17.5, "an earlier requeue_after wins"
    s.ran(17.5, None)
    assert s.failures == 0 and s.next_due(17.6) == 317.5, "a clean pass: back to the resync"


def test_the_operator_retries_a_failed_write_before_the_resync():
    """Found by the fault campaign (issue 16): a peers ConfigMap patch answered 504 was tried
    again only at the next change or resync (5 minutes), the peers file stale until then."""
    from support.controller_world import FaultyWriter
    from tandem.errors import ServerTimeout

    store = world(design_group())
    clock = Clock()
    faults = {"left": 1}

    def fail(n, verb):
        if verb == "create" and faults["left"]:
            faults["left"] -= 1
            return ServerTimeout("injected")
        return None

    operator = Operator(FaultyWriter(store, fail), clock, schedule=PassSchedule(resync=300.0))
    report = operator.tick(clock.now)
    assert report is not None and report.retryable
    clock.now += 0.6  # nothing changes in between (no informer wakes it)
    again = operator.tick(clock.now)
    assert again is not None and not again.errors and again.created >= 1, "retried half a second later"


def test_an_election_that_keeps_failing_is_logged_once_a_minute_and_counted(caplog):
    from tandem.errors import Forbidden

    class Refusing(type(world())):
        def create(self, obj):
            if obj.get("kind") == "Lease":
                raise Forbidden('leases.coordination.k8s.io is forbidden: cannot create resource "leases"')
            return super().create(obj)

    store = Refusing()
    operator = Operator(store, lambda: 0.0, LeaderElector(store, LeaseConfig(identity="a")))
    with caplog.at_level("WARNING", logger="tandem.operator"):
        for now in range(0, 130, 2):  # a turn every renew period, for two minutes
            operator.tick(float(now))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 3 and all("cannot use the Lease tandem-system/tandem-operator (403 Forbidden" in w for w in warnings)
    assert not operator.leading and operator.passes == 0
    assert b'tandem_leader_election_errors_total{code="403"} 65.0' in operator.metrics.exposition()


def test_group_series_follow_the_groups_and_their_roles():
    from support.builders import group, role
    from tandem.operator.metrics import OperatorMetrics

    store = world(group("g", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    metrics = OperatorMetrics()
    metrics.observe_groups(store.snapshot())
    text = metrics.exposition().decode()
    assert 'tandem_group_role_replicas{group="g",kind="desired",namespace="serving",role="prefill"} 2.0' in text
    assert 'role="decode"' in text
    roles = [r for r in store.get("InferenceGroup", "serving", "g")["spec"]["roles"] if r["name"] == "prefill"]
    store.patch("InferenceGroup", "serving", "g", {"spec": {"roles": roles}})
    metrics.observe_groups(store.snapshot())
    text = metrics.exposition().decode()
    assert 'role="decode"' not in text and 'role="prefill"' in text, "a role removed loses its series"
    store.delete("InferenceGroup", "serving", "g")
    metrics.observe_groups(store.snapshot())
    assert 'group="g"' not in metrics.exposition().decode()


def test_unschedulable_units_are_a_series_per_group_and_count_in_the_units_by_state():
    from support.builders import group, role
    from tandem.controller import reconcile
    from tandem.operator.metrics import OperatorMetrics

    # 3 units of 20 eight-GPU pods inside one rack of 8 nodes: none fits
    store = world(group("big", [role("prefill", 20, 20, gpus=8, required="host")], required="rack", replicas=3))
    for step in range(3):
        reconcile(store, float(step))
    metrics = OperatorMetrics()
    metrics.observe_groups(store.snapshot())
    metrics.observe_cluster(store.snapshot())
    text = metrics.exposition().decode()
    assert 'tandem_group_units{group="big",kind="unschedulable",namespace="serving"} 3.0' in text
    assert 'tandem_units{state="Unschedulable"} 3.0' in text


def test_cluster_and_group_series_followed_from_the_changes_are_those_counted_afresh():
    """The operator counts units by state, gated pods and each group's series from what
    changed since its last count (`changes_since`); through a rollout, a scale-up that
    waits at the gate, a group removed and a journal too short to say what changed, they
    are at every step what a fresh count of the whole cluster gives."""
    from support.builders import group, role
    from tandem.cluster.memory import MemoryStore
    from tandem.controller import reconcile
    from tandem.operator.metrics import OperatorMetrics
    from tandem.topology.generate import generate_cluster

    def series(metrics):
        return sorted(line for line in metrics.exposition().decode().splitlines()
                      if line.startswith(("tandem_units", "tandem_gated", "tandem_group_")))

    store = MemoryStore(history=40)
    topology, nodes = generate_cluster([("block", 1), ("rack", 2), ("host", 2)], 8)
    for obj in (topology, *nodes):
        store.create(obj)
    store.create(group("a", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8)], required="block"))
    store.create(group("b", [role("prefill", 1, 1, gpus=8)], required="block"))
    followed = OperatorMetrics()
    steps = [lambda: None, lambda: store.patch("InferenceGroup", "serving", "b", {"spec": {"replicas": 3}}),
             lambda: store.delete("InferenceGroup", "serving", "a"), lambda: store.patch("InferenceGroup", "serving", "b", {"spec": {"replicas": 1}})]
    counts = []
    for at, change in enumerate(steps):
        change()
        for turn in range(4):
            reconcile(store, at * 100.0 + turn)
            for metrics in (followed, OperatorMetrics()):
                metrics.observe_groups(store.snapshot())
                metrics.observe_cluster(store.snapshot())
            counts.append(series(followed))
            assert series(followed) == series(metrics), (at, turn)
            kubelet(store)
    assert any('tandem_gated_pods_waiting 2.0' in c and 'tandem_units{state="Unschedulable"} 2.0' in c for c in counts), "b's new units waited"
    assert any('tandem_units{state="Complete"} 3.0' in c for c in counts) and not any('group="a"' in line for line in counts[-1])


def test_a_refused_write_is_logged_once_as_a_warning_and_the_event_once(caplog):
    from support.controller_world import FaultyWriter
    from tandem.errors import Forbidden

    class RefusesServices(FaultyWriter):
        def create(self, obj):
            if obj["kind"] == "Service":
                raise Forbidden('services is forbidden: User "tandem" cannot create resource "services"')
            return super().create(obj)

    store = world(design_group())
    clock = Clock()
    operator = Operator(RefusesServices(store), clock)
    with caplog.at_level("INFO", logger="tandem.operator"):
        for _ in range(8):
            operator.tick(clock.now)
            kubelet(store)
            clock.now += 1.0
    refused = [r for r in caplog.records if "403 Forbidden" in r.getMessage() and r.levelname != "INFO"]  # INFO: the condition turning
    assert [r.levelname for r in refused] == ["WARNING", "WARNING"], [r.getMessage() for r in refused]
    assert len([r for r in caplog.records if "403 Forbidden (terminal)" in r.getMessage()]) == 1, "the refusal once, not every pass"
    assert "create Service serving/llama" in refused[0].getMessage() and "WriteRejected" in refused[1].getMessage()
    group = store.get("InferenceGroup", "serving", "llama")
    degraded = next(c for c in group["status"]["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "WriteRejected")
    text = operator.metrics.exposition().decode()
    assert 'tandem_group_condition{condition="Degraded",group="llama",namespace="serving"} 1.0' in text


def test_the_metrics_say_which_scheduler_places_each_group_and_whether_each_backend_is_live():
    from prometheus_client.exposition import generate_latest

    from support.delegated_world import Served, delegated_store
    from tandem.controller import DelegationSettings

    g = design_group()
    g["spec"]["scheduler"] = {"backend": "volcano"}
    store = delegated_store(g)
    served = Served(store, ("PodGroup.scheduling.volcano.sh",))
    clock = Clock()
    operator = Operator(served, clock, delegation=DelegationSettings(backends=("kai", "volcano")))
    operator.tick(clock.now)
    text = generate_latest(operator.metrics.registry).decode()
    assert 'tandem_group_backend{backend="volcano",group="llama",namespace="serving"} 1.0' in text
    assert 'tandem_backend_served{backend="volcano"} 1.0' in text and 'tandem_backend_served{backend="kai"} 0.0' in text
