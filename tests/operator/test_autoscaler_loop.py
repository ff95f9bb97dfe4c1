"""The autoscaler as a loop of the operator, in-process over the in-memory store: each
group on its own interval, only on the Lease holder, a ScalingActive condition that says
when it cannot act (no metrics source, no signals, stale ones) and that the reconcile pass
keeps, ScaledTo events, and the series the operator exports."""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.exposition import generate_latest

from support.controller_world import world
from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.operator.runner import Operator
from tandem.runtime.leader import LeaderElector, LeaseConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"
T0 = 1_764_000_000.0


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def autoscaled(name: str = "chat", **autoscaling: Any) -> dict[str, Any]:
    group = yaml.safe_load(EXAMPLE.read_text())
    group["metadata"]["name"] = name
    group["spec"]["autoscaling"].update(autoscaling)
    return group


def signals(at: float, decode_tokens: float) -> Signals:
    role = RoleSignals(replicas=1, queue_depth=2.0, busy_fraction=0.5, kv_utilization=float("nan"), tokens_per_s=decode_tokens)
    return Signals(at, 60.0, {"prefill": role, "decode": role}, 5.0, 5000.0, decode_tokens, 0.2, 0.02)


class Source:
    """A metrics source the test sets: signals per group name, measured `lag` seconds ago."""

    def __init__(self, decode_tokens: float | None = 12_000.0, lag: float = 3.0):
        self.decode_tokens, self.lag = decode_tokens, lag
        self.asked: list[tuple[str, float]] = []

    def __call__(self, namespace: str, name: str, now: float) -> Signals | None:
        self.asked.append((name, now))
        return None if self.decode_tokens is None else signals(now - self.lag, self.decode_tokens)


def active(store, name: str = "chat") -> dict[str, Any] | None:
    conditions = store.get("InferenceGroup", "serving", name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "ScalingActive"), None)


def replicas(store, name: str = "chat") -> dict[str, int]:
    return {r["name"]: r["replicas"] for r in store.get("InferenceGroup", "serving", name)["spec"]["roles"]}


def events(store, reason: str) -> list[dict[str, Any]]:
    return [e for e in store.list("Event") if e["reason"] == reason]


def test_without_a_metrics_source_an_autoscaled_group_is_told_so_and_the_reconcile_pass_keeps_it():
    store = world(autoscaled())
    clock = Clock()
    operator = Operator(store, clock)
    operator.tick(clock.now)  # leads; the reconcile pass writes its status
    report = operator.autoscaler.tick(clock.now)
    assert report is not None and [d.outcome for d in report.decided] == ["NoMetricsSource"]
    condition = active(store)
    assert condition is not None and (condition["status"], condition["reason"]) == ("False", "NoMetricsSource")
    assert "--metrics-source" in condition["message"]
    assert replicas(store) == {"prefill": 2, "decode": 1}, "nothing sized without signals"
    warning = events(store, "NoMetricsSource")
    assert len(warning) == 1 and warning[0]["type"] == "Warning" and warning[0]["involvedObject"]["name"] == "chat"
    for _ in range(5):  # reconcile passes: their status writes keep the autoscaler's condition
        operator.changed("InferenceGroup")
        clock.now += 1.0
        operator.tick(clock.now)
    assert operator.passes > 1 and active(store) == condition
    types = [c["type"] for c in store.get("InferenceGroup", "serving", "chat")["status"]["conditions"]]
    assert "Accepted" in types and types[-1] == "ScalingActive"
    clock.now += 15.0
    operator.autoscaler.tick(clock.now)
    assert len(events(store, "NoMetricsSource")) == 1 and events(store, "NoMetricsSource")[0].get("count", 1) == 1, "said once, not every decision"


def test_with_signals_it_scales_says_so_in_an_event_and_exports_what_it_read():
    store = world(autoscaled())
    clock = Clock()
    source = Source(decode_tokens=12_000.0, lag=3.0)
    operator = Operator(store, clock, metrics_source=source)
    operator.tick(clock.now)
    report = operator.autoscaler.tick(clock.now)
    assert report is not None and report.changes == [("serving/chat", {"decode": 4, "prefill": 8})]
    assert replicas(store) == {"prefill": 8, "decode": 4}
    scaled = events(store, "ScaledTo")
    assert len(scaled) == 1 and scaled[0]["type"] == "Normal"
    assert scaled[0]["message"].startswith("prefill=8 decode=4: FixedRatio"), "spec order, then the decision's reason"
    condition = active(store)
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "ValidSignals")
    text = generate_latest(operator.metrics.registry).decode()
    labels = 'group="chat",namespace="serving"'
    assert f'tandem_autoscaler_decisions_total{{{labels},outcome="scaled"}} 1.0' in text
    assert f"tandem_autoscaler_signal_age_seconds{{{labels}}} 3.0" in text
    assert f'tandem_autoscaler_desired_replicas{{{labels},role="prefill"}} 8.0' in text
    assert f'tandem_autoscaler_role_signal{{{labels},role="decode",signal="tokensPerSecond"}} 12000.0' in text
    assert f'tandem_autoscaler_group_signal{{{labels},signal="ttftP90Seconds"}} 0.2' in text
    assert 'signal="kvUtilization"' not in text, "a figure not measured has no series"
    assert f"tandem_autoscaler_panic{{{labels}}}" in text


def test_each_group_decides_on_its_own_interval():
    store = world(autoscaled("fast", intervalSeconds=15), autoscaled("slow", intervalSeconds=40))
    clock = Clock()
    source = Source()
    operator = Operator(store, clock, metrics_source=source)
    operator.tick(clock.now)
    decided: list[tuple[float, str]] = []
    for _ in range(91):  # 90 s, a tick a second
        report = operator.autoscaler.tick(clock.now)
        decided += [(clock.now - T0, d.name) for d in (report.decided if report else [])]
        clock.now += 1.0
    assert [t for t, name in decided if name == "fast"] == [0.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0]
    assert [t for t, name in decided if name == "slow"] == [0.0, 40.0, 80.0]
    assert sorted(source.asked) == sorted((name, T0 + t) for t, name in decided), "signals read only for a group due"


def test_a_metrics_outage_holds_the_counts_and_the_condition_says_why():
    store = world(autoscaled(stabilization={"scaleUpSeconds": 0, "scaleDownSeconds": 0}))
    clock = Clock()
    source = Source(decode_tokens=12_000.0)
    operator = Operator(store, clock, metrics_source=source)
    operator.tick(clock.now)
    operator.autoscaler.tick(clock.now)
    assert replicas(store) == {"prefill": 8, "decode": 4}
    source.decode_tokens = None  # every scrape fails
    clock.now += 15.0
    assert [d.outcome for d in operator.autoscaler.tick(clock.now).decided] == ["NoSignals"]
    assert replicas(store) == {"prefill": 8, "decode": 4}, "an outage never scales down"
    assert (active(store)["status"], active(store)["reason"]) == ("False", "NoSignals")
    assert events(store, "NoSignals")[0]["type"] == "Warning"
    source.decode_tokens, source.lag = 1_000.0, 120.0  # signals again, but older than metricMaxAgeSeconds (60)
    clock.now += 15.0
    operator.autoscaler.tick(clock.now)
    assert replicas(store) == {"prefill": 8, "decode": 4} and active(store)["reason"] == "StaleSignals"
    source.lag = 1.0  # fresh low load: once the panic of the first scale-up is over (60 s), it scales down
    clock.now += 30.0
    operator.autoscaler.tick(clock.now)
    assert replicas(store) == {"prefill": 2, "decode": 1} and active(store)["status"] == "True"


def test_only_the_lease_holder_decides_and_a_leader_past_its_renew_deadline_stops():
    store = world(autoscaled())
    clock = Clock()
    config = dict(namespace="tandem-system", duration=15.0)
    a = Operator(store, clock, LeaderElector(store, LeaseConfig(identity="a", **config)), metrics_source=Source())
    b = Operator(store, clock, LeaderElector(store, LeaseConfig(identity="b", **config)), metrics_source=Source())
    a.tick(clock.now)
    b.tick(clock.now)
    assert a.leading and not b.leading
    assert b.autoscaler.tick(clock.now) is None, "a follower decides nothing"
    assert a.autoscaler.tick(clock.now) is not None and replicas(store) == {"prefill": 8, "decode": 4}
    # a's reconcile loop stops turning (hung): its elector no longer renews
    clock.now += 15.0
    assert a.leading and a.autoscaler.tick(clock.now) is None, "past the renew deadline: no write, though no loop said it lost"


def test_spec_autoscaling_removed_drops_the_condition_and_the_series():
    store = world(autoscaled())
    clock = Clock()
    operator = Operator(store, clock, metrics_source=Source())
    operator.tick(clock.now)
    operator.autoscaler.tick(clock.now)
    assert active(store) is not None
    group = copy.deepcopy(store.get("InferenceGroup", "serving", "chat"))
    del group["spec"]["autoscaling"]
    store.update(group)
    operator.changed("InferenceGroup")
    clock.now += 1.0  # past the debounce
    assert operator.tick(clock.now) is not None
    assert active(store) is None, "the reconcile pass drops the condition of a group no longer autoscaled"
    operator.autoscaler.tick(clock.now + 2.0)
    text = generate_latest(operator.metrics.registry).decode()
    assert 'group="chat"' not in "\n".join(line for line in text.splitlines() if line.startswith("tandem_autoscaler_"))


def test_run_starts_the_autoscaler_beside_the_reconcile_loop_and_ends_it_before_the_lease_goes():
    store = world(autoscaled())
    operator = Operator(store, time.time, LeaderElector(store, LeaseConfig(identity="a", namespace="tandem-system")), metrics_source=Source())
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop,))
    thread.start()
    deadline = time.time() + 10
    while operator.autoscaler.passes == 0 and time.time() < deadline:
        time.sleep(0.01)
    stop.set()
    operator.stop_waiting()
    thread.join(timeout=10)
    assert not thread.is_alive() and operator.autoscaler.passes >= 1
    assert replicas(store) == {"prefill": 8, "decode": 4}
    assert operator._autoscaler_thread is not None and not operator._autoscaler_thread.is_alive()
    assert "holderIdentity" not in store.get("Lease", "tandem-system", "tandem-operator")["spec"], "released on stop"


def test_a_decision_lost_to_a_concurrent_edit_is_decided_again_soon_not_an_interval_later():
    from tandem.cluster.ports import Conflict

    store = world(autoscaled())
    clock = Clock()
    operator = Operator(store, clock, metrics_source=Source())
    operator.tick(clock.now)
    real_patch, refused = store.patch, []

    def conflicting(kind, namespace, name, patch, **kw):
        if kind == "InferenceGroup" and not refused:
            refused.append(name)
            raise Conflict("the object has been modified")
        return real_patch(kind, namespace, name, patch, **kw)

    store.patch = conflicting  # type: ignore[method-assign]
    first = operator.autoscaler.tick(clock.now)
    assert first is not None and [d.outcome for d in first.decided] == ["conflict"] and replicas(store) == {"prefill": 2, "decode": 1}
    clock.now += 1.0
    again = operator.autoscaler.tick(clock.now)
    assert again is not None and [d.outcome for d in again.decided] == ["scaled"] and replicas(store) == {"prefill": 8, "decode": 4}
    text = generate_latest(operator.metrics.registry).decode()
    assert 'tandem_autoscaler_decisions_total{group="chat",namespace="serving",outcome="conflict"} 1.0' in text


def test_a_source_that_keeps_history_forgets_a_group_no_longer_autoscaled():
    store = world(autoscaled("a"), autoscaled("b"))
    clock = Clock()

    class Keeping(Source):
        def __init__(self) -> None:
            super().__init__()
            self.forgotten: list[tuple[str, str]] = []

        def forget(self, namespace: str, name: str) -> None:
            self.forgotten.append((namespace, name))

    source = Keeping()
    operator = Operator(store, clock, metrics_source=source)
    operator.tick(clock.now)
    operator.autoscaler.tick(clock.now)
    store.delete("InferenceGroup", "serving", "a")
    operator.autoscaler.changed()
    clock.now += 1.0
    assert operator.autoscaler.tick(clock.now) is not None
    assert source.forgotten == [("serving", "a")]
