"""Invariants over 200 seeded random scenarios with node faults (CI-sized)."""

from __future__ import annotations

import random

import pytest

from support.builders import cluster, group, role
from tandem.cluster.replicas import replicas_of_unit
from tandem.controller.reconcile import reconcile
from tandem.sim.runner import Fault, Scenario, simulate

GANG_TIMEOUT = 60.0
RESYNC = 10.0


def random_scenario(seed: int) -> Scenario:
    rng = random.Random(seed)
    objects = cluster(f"block=1,rack=2,host={rng.choice([3, 4])}")
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    arrivals = []
    for g in range(rng.randint(1, 3)):
        roles = []
        for name in ("prefill", "decode")[: rng.randint(1, 2)]:
            replicas = rng.randint(1, 3)
            roles.append(role(name, replicas, rng.randint(1, replicas), gpus=rng.choice([1, 2, 4, 8]), pods=rng.randint(1, 2)))
        spec = group(f"g{g}", roles, replicas=rng.randint(1, 2), required=rng.choice(["rack", "block", None]))
        spec["spec"]["scheduler"] = {"gangTimeoutSeconds": int(GANG_TIMEOUT)}
        arrivals.append((float(rng.randint(0, 120)), spec))
    faults = [
        Fault(float(rng.randint(100, 400)), (rng.choice(nodes),), recover_after=float(rng.choice([60, 200])))
        for _ in range(rng.randint(0, 2))
    ]
    return Scenario(cluster=objects, arrivals=arrivals, faults=faults, duration_s=700.0, seed=seed, resync_s=RESYNC)


@pytest.mark.parametrize("seed", range(200))
def test_random_scenario_keeps_the_invariants(seed):
    result = simulate(random_scenario(seed))
    # never a node over capacity
    assert all(not s.over_capacity for s in result.samples)
    # never a unit partially placed for longer than its gang timeout (plus one resync to notice)
    since: dict[str, float] = {}
    for sample in result.samples:
        for unit in list(since):
            if unit not in sample.partially_placed:
                del since[unit]
        for unit in sample.partially_placed:
            since.setdefault(unit, sample.at)
            assert sample.at - since[unit] <= GANG_TIMEOUT + RESYNC + 1.0, (unit, since[unit], sample.at)
    store = result.store
    # reconcile is idempotent: a second pass on the same state changes nothing
    reconcile(store, 700.0)
    assert reconcile(store, 700.0).writes == 0
    # status agrees with the pods
    for g in store.list("InferenceGroup"):
        pods = [p for p in store.list("Pod", g["metadata"]["namespace"], {"tandem.dev/group": g["metadata"]["name"]})]
        for entry in g["status"]["roles"]:
            spec_role = next(r for r in g["spec"]["roles"] if r["name"] == entry["name"])
            ready = 0
            for unit in range(g["spec"]["replicas"]):
                members = [p for p in pods if p["metadata"]["labels"]["tandem.dev/unit"] == str(unit) and p["metadata"]["labels"]["tandem.dev/role"] == entry["name"]]
                replicas, _ = replicas_of_unit(members, {entry["name"]: spec_role.get("podsPerReplica", 1)})
                ready += sum(1 for r in replicas if r.phase == "Ready")
            assert entry["readyReplicas"] == ready


@pytest.mark.parametrize("seed", range(0, 200, 10))
def test_a_controller_crash_changes_nothing_but_timing(seed):
    """The controller keeps nothing between passes: down for random windows, the run ends
    in the same state and keeps the capacity invariant throughout."""
    import dataclasses

    calm = random_scenario(seed)
    rng = random.Random(seed)
    windows = sorted((start, start + rng.choice([15.0, 45.0, 90.0])) for start in (rng.uniform(0, 500) for _ in range(3)))
    crashed = dataclasses.replace(calm, controller_down=windows, duration_s=calm.duration_s + 300.0)
    calm = dataclasses.replace(calm, duration_s=calm.duration_s + 300.0)
    first, second = simulate(calm), simulate(crashed)
    assert all(not s.over_capacity for s in second.samples)
    assert first.samples[-1].functional == second.samples[-1].functional

    def shape(result):
        return sorted(
            (p["metadata"]["labels"]["tandem.dev/group"], p["metadata"]["labels"]["tandem.dev/unit"], p["metadata"]["labels"]["tandem.dev/role"])
            for p in result.store.list("Pod")
            if p.get("status", {}).get("phase") != "Failed"
        )

    assert shape(first) == shape(second)
