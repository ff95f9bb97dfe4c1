"""Issue 27 in the fault campaign: schedules hand a share of their groups to the delegated
schedulers (their stand-ins place them) and change running groups' backends; the delegated
invariants (tests/support/faults/delegated.py) notice a controller broken on purpose
(monkeypatched for the test only), as test_sensitivity.py does for the others."""

from __future__ import annotations

from collections import Counter

import tandem.controller.decide as decide
from support.faults.campaign import run
from support.faults.delegated import backend_of_group
from support.faults.schedule import HTTP_BACKENDS, MEMORY_BACKENDS, Schedule, generate, world_backends
from tandem.controller.actions import DeleteObject
from tandem.api.naming import ADMITTED, GATE
from tandem.controller.delegation import admission_patch, delegated_pod, gang_writes

SEEDS = range(200)


def invariants(schedule: Schedule) -> set[str]:
    return {v.invariant for v in run(schedule).violations}


def test_a_third_of_the_groups_are_handed_to_the_delegated_schedulers_and_some_change_backend():
    groups = [g for seed in SEEDS for g in generate(seed).groups.values()]
    named = Counter(backend_of_group(g) for g in groups)
    assert set(named) == {"native", *MEMORY_BACKENDS}
    assert 0.2 < 1 - named["native"] / len(groups) < 0.4, named
    changes = [e for seed in SEEDS for e in generate(seed).events if e["type"] == "backend"]
    assert len(changes) > len(SEEDS) // 5 and {e["backend"] for e in changes} == {"native", *MEMORY_BACKENDS}
    over_http = {backend_of_group(g) for seed in range(60) for g in generate(seed, world="http").groups.values()}
    assert over_http - {"native"} == set(world_backends("http")), "over HTTP: the schedulers whose CRDs the server serves (none without ../shared)"
    assert not set(world_backends("http")) - set(HTTP_BACKENDS)


def test_without_delegated_backends_a_seed_gives_the_schedule_it_gave_before():
    """The backends are drawn from a generator of their own: the rest of a schedule is as it was."""
    for seed in range(20):
        plain, mixed = generate(seed, backends=()).to_json(), generate(seed).to_json()
        assert [e for e in mixed["events"] if e["type"] != "backend"] == plain["events"]
        for name, manifest in mixed["groups"].items():
            spec = {**manifest["spec"], "scheduler": {k: v for k, v in manifest["spec"].get("scheduler", {}).items() if k != "backend"}}
            assert spec == {**plain["groups"][name]["spec"], "scheduler": plain["groups"][name]["spec"].get("scheduler", {})}


def test_admitted_pods_left_behind_tandems_gate_break_delegated_pod(monkeypatch):
    def still_gated(pod, backend, group, topology, alone=False):
        out = delegated_pod(pod, backend, group, topology, alone)
        gates = out["spec"].get("schedulingGates") or []
        if (out["metadata"].get("annotations") or {}).get(ADMITTED) == "true" and not any(g["name"] == GATE for g in gates):
            out["spec"]["schedulingGates"] = [*gates, {"name": GATE}]
        return out

    monkeypatch.setattr(decide, "delegated_pod", still_gated)
    monkeypatch.setattr(decide, "admission_patch", lambda pod, delegated: admission_patch(pod, False))
    assert "delegated-pod" in invariants(generate(6))


def test_gang_objects_never_written_break_gang_object(monkeypatch):
    monkeypatch.setattr(decide, "desired_gang_objects", lambda *args: ([], None))
    assert "gang-object" in invariants(generate(6))


def test_a_hand_over_that_keeps_the_old_schedulers_objects_breaks_hand_over(monkeypatch):
    """Seed 7: a KAI group handed to Volcano; the KAI PodGroups are never deleted."""

    def keeping(raw, desired, observed, backend, remaining, bound):
        ahead, behind = gang_writes(raw, desired, observed, backend, remaining, bound)
        return ahead, [w for w in behind if not (isinstance(w, DeleteObject) and "no longer wanted" in w.why and not w.why.startswith(backend))]

    monkeypatch.setattr(decide, "gang_writes", keeping)
    assert "hand-over" in invariants(generate(7))
