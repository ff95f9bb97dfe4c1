"""Metrics an SRE alerts on: where each group's rollout stands, and the informers' lag as
lag (delivery delay; seconds without a watch), not as time since the last event."""

from __future__ import annotations

from support.controller_world import design_group, kubelet, world
from tandem.runtime.informer_metrics import follow_informers
from tandem.operator.metrics import OperatorMetrics
from tandem.operator.runner import Operator


def sample(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_group_says_how_many_units_are_in_each_state_and_under_which_operation():
    store, now = world(design_group()), [1_764_000_000.0]
    operator = Operator(store, lambda: now[0])
    operator.tick(now[0])
    group = {"namespace": "serving", "group": "llama"}
    assert sample(operator.metrics, "tandem_group_unit_states", **group, state="Pending") == 1.0, "placed, not bound yet"
    assert sample(operator.metrics, "tandem_group_unit_states", **group, state="Unschedulable") == 0.0
    assert sample(operator.metrics, "tandem_group_unit_operations", **group, operation="Rollout") == 1.0
    for _ in range(60):
        now[0] += 0.5
        operator.tick(now[0])
        if kubelet(store):
            operator.changed()
    assert sample(operator.metrics, "tandem_group_unit_states", **group, state="Complete") == 1.0
    assert sample(operator.metrics, "tandem_group_unit_states", **group, state="Progressing") == 0.0
    assert sample(operator.metrics, "tandem_group_unit_operations", **group, operation="Idle") == 1.0
    store.delete("InferenceGroup", "serving", "llama")
    operator.changed()
    now[0] += 1.0
    operator.tick(now[0])
    assert sample(operator.metrics, "tandem_group_unit_states", **group, state="Complete") is None, "gone with the group"


class Watching:
    """What the operator reads of a cluster with informers (`KubeCluster`)."""

    def __init__(self) -> None:
        self.down = {"Pod": 0.0, "Node": 42.0}
        self.hook = None

    def follow_delays(self, hook):
        self.hook = hook

    def disconnected(self):
        return dict(self.down)


def test_the_informers_delivery_delay_and_disconnection_are_exported_as_they_are_at_scrape():
    metrics, cluster = OperatorMetrics(), Watching()
    follow_informers(metrics.registry, cluster)
    cluster.hook("Pod", 0.3)
    cluster.hook("Pod", 1.2)
    assert sample(metrics, "tandem_informer_event_delay_seconds_count", kind="Pod") == 2.0
    assert sample(metrics, "tandem_informer_event_delay_seconds_bucket", kind="Pod", le="0.5") == 1.0
    assert sample(metrics, "tandem_informer_disconnected_seconds", kind="Pod") == 0.0
    assert sample(metrics, "tandem_informer_disconnected_seconds", kind="Node") == 42.0
    cluster.down["Pod"] = 7.0
    assert sample(metrics, "tandem_informer_disconnected_seconds", kind="Pod") == 7.0, "read at scrape, not after a pass"
    assert b"tandem_informer_lag_seconds" not in metrics.exposition(), "the time since the last event is no longer called lag"
    assert follow_informers(OperatorMetrics().registry, object()) is None, "a cluster without informers exports neither"
