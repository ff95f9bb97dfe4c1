"""Taint-based eviction as a pure decision: a node's NoExecute taints (and the one its Ready
condition implies), a pod's tolerations, and the time each taint appeared."""

from __future__ import annotations

from tandem.apiserver.evictions import NOT_READY, UNREACHABLE, Taint, eviction_time, no_execute_taints, with_default_tolerations

OUT = Taint("maintenance", "now", "NoExecute")


def node(taints=(), ready: str | None = "True") -> dict:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": "n1"}, "spec": {"taints": list(taints)}, "status": {"conditions": conditions}}


def test_only_no_execute_taints_and_an_unready_node_count():
    assert no_execute_taints(node([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}])) == frozenset()
    assert no_execute_taints(node([{"key": "maintenance", "value": "now", "effect": "NoExecute"}])) == {OUT}
    assert no_execute_taints(node(ready="False")) == {Taint(NOT_READY, "", "NoExecute")}
    assert no_execute_taints(node(ready="Unknown")) == {Taint(UNREACHABLE, "", "NoExecute")}, "a kubelet that stopped reporting"
    assert no_execute_taints(node(ready=None)) == frozenset(), "a node without a Ready condition is taken as ready"


def test_a_pod_not_tolerating_a_taint_goes_at_once_whenever_the_taint_appeared():
    assert eviction_time({OUT: 50.0}, []) == 50.0
    other = [{"key": "maintenance", "operator": "Equal", "value": "later", "effect": "NoExecute"}]
    assert eviction_time({OUT: 50.0}, other) == 50.0, "another value does not tolerate it"
    assert eviction_time({OUT: 50.0}, [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]) == 50.0


def test_a_toleration_without_seconds_keeps_the_pod_for_ever():
    assert eviction_time({OUT: 50.0}, [{"key": "maintenance", "operator": "Exists"}]) is None
    assert eviction_time({OUT: 50.0}, [{"operator": "Exists"}]) is None, "an empty key with Exists tolerates everything"
    assert eviction_time({}, []) is None, "no taint, no eviction"


def test_toleration_seconds_count_from_when_the_taint_appeared_and_the_smallest_wins():
    tolerations = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                   {"key": "maintenance", "operator": "Equal", "value": "now", "tolerationSeconds": 10}]
    assert eviction_time({OUT: 50.0}, tolerations) == 60.0
    assert eviction_time({OUT: 50.0}, [{"key": "maintenance", "operator": "Exists", "tolerationSeconds": -5}]) == 50.0, "zero or less: at once"
    both = {OUT: 50.0, Taint(NOT_READY, "", "NoExecute"): 100.0}
    defaults = with_default_tolerations([{"key": "maintenance", "operator": "Exists"}], 300)
    assert eviction_time(both, defaults) == 400.0, "tolerated for ever on one taint, 300 s from the other's appearance"
    assert eviction_time(both, with_default_tolerations([], 300)) == 50.0, "one untolerated taint is enough"


def test_default_tolerations_are_added_unless_the_pod_has_its_own():
    added = with_default_tolerations([], 300)
    assert added == [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                     {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    own = [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]
    assert with_default_tolerations(own, 300) == [*own, added[1]]
    assert with_default_tolerations([{"operator": "Exists"}], 300) == [{"operator": "Exists"}], "tolerating everything already"
    assert with_default_tolerations(added, 300) == added, "applied twice changes nothing"
