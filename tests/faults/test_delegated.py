"""Issue 27 in the fault campaign: schedules hand a share of their groups to the delegated
schedulers (their stand-ins place them) and change running groups' backends; the delegated
invariants (tests/support/faults/delegated.py) notice a controller broken on purpose
(monkeypatched for the test only), as test_sensitivity.py does for the others."""

from __future__ import annotations

from collections import Counter

import tandem.controller.decide as decide
import tandem.controller.delegation as delegation
from support.faults.campaign import run
from support.faults.delegated import backend_of_group
from support.faults.schedule import HTTP_BACKENDS, MEMORY_BACKENDS, Schedule, generate, world_backends
from tandem.controller.actions import CreateObject, DeleteObject
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
        plain, mixed = generate(seed, backends=(), metrics=False).to_json(), generate(seed, metrics=False).to_json()
        assert [e for e in mixed["events"] if e["type"] not in ("backend", "gang-edit", "scheduler-stop")] == plain["events"]
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


def test_schedules_with_a_delegated_group_edit_its_gang_objects_by_hand_and_stop_its_scheduler():
    events = [e for seed in SEEDS for e in generate(seed).events]
    edits = [e for e in events if e["type"] == "gang-edit"]
    stops = [e for e in events if e["type"] == "scheduler-stop"]
    assert {e["edit"] for e in edits} == {"delete", "min-member", "label", "annotation"} and len(edits) > len(SEEDS) // 5
    assert {e["backend"] for e in stops} == set(MEMORY_BACKENDS) and all(e["until"] > e["at"] for e in stops)
    assert not [e for seed in range(40) for e in generate(seed, backends=()).events if e["type"] in ("gang-edit", "scheduler-stop")]


def test_a_gang_object_deleted_by_hand_and_never_made_again_breaks_gang_object_and_gang_restored(monkeypatch):
    """Seed 6: a Workload API group's PodGroup deleted by hand at t=103; a controller that
    makes no gang object it has seen before leaves it gone."""
    seen: set[tuple[str, str]] = set()

    def never_again(raw, desired, observed, backend, remaining, bound):
        observed = list(observed)
        seen.update((o["kind"], o["metadata"]["name"]) for o in observed)
        ahead, behind = gang_writes(raw, desired, observed, backend, remaining, bound)
        return [w for w in ahead if not (isinstance(w, CreateObject) and (w.obj["kind"], w.obj["metadata"]["name"]) in seen)], behind

    monkeypatch.setattr(decide, "gang_writes", never_again)
    assert {"gang-object", "gang-restored"} <= invariants(generate(6))


def test_a_gang_object_compared_by_its_digest_alone_keeps_a_hand_edit_and_breaks_gang_restored(monkeypatch):
    """Seed 35: a Volcano PodGroup's minMember edited by hand, its digest left in place: a
    controller that trusts the digest alone (as before the fix) never puts it back."""

    def digest_alone(have, want):
        digest = (want["metadata"].get("annotations") or {}).get(delegation.RENDERED_ANNOTATION)
        if digest is not None and (have["metadata"].get("annotations") or {}).get(delegation.RENDERED_ANNOTATION) == digest:
            return None
        return patch(have, want)

    patch = delegation._patch
    monkeypatch.setattr(delegation, "_patch", digest_alone)
    assert "gang-restored" in invariants(generate(35))


def test_a_queued_unit_timed_out_while_its_scheduler_is_stopped_breaks_queued_released(monkeypatch):
    """Seed 217: the Workload API's scheduler stopped from t=11 to t=121, a step timeout of
    60 s: a controller whose step clock runs on while its scheduler queues the unit rolls the
    step back and deletes pods that only wait for the scheduler."""
    monkeypatch.setattr(decide, "_queue_time", lambda draft, unit, memory, queued, timeout, now: memory)
    assert "queued-released" in invariants(generate(217))
