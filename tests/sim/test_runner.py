"""The controller in the simulated cluster: arrivals, scaling, a rack failure, recovery."""

from __future__ import annotations

from support.builders import cluster, group, role
from tandem.controller.reconcile import reconcile
from tandem.sim.runner import Change, Fault, Scenario, simulate


def _scenario(seed=0):
    big = group(
        "llama-70b",
        [role("prefill", 4, 1, gpus=8, required="host"), role("decode", 2, 1, gpus=8, pods=2, required="rack")],
        replicas=2,
        required="block",
        preferred="rack",
        affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}],
    )
    small = group("llama-8b", [role("prefill", 2, 1, gpus=2), role("decode", 2, 1, gpus=2)], replicas=2, required="rack")
    objects = cluster("block=2,rack=2,host=8")
    rack0 = [o["metadata"]["name"] for o in objects if o["kind"] == "Node" and o["metadata"]["labels"]["network.tandem.dev/rack"] == "rack-0"]
    return Scenario(
        cluster=objects,
        arrivals=[(0.0, big), (30.0, small)],
        changes=[Change(600.0, "serving", "llama-8b", {"spec": {"roles": [
            {**small["spec"]["roles"][0], "replicas": 4},
            {**small["spec"]["roles"][1], "replicas": 4},
        ]}})],
        faults=[Fault(900.0, tuple(rack0), recover_after=300.0)],
        duration_s=1800.0,
        seed=seed,
    )


def test_groups_become_functional_survive_a_rack_failure_and_never_overcommit():
    result = simulate(_scenario())
    assert all(not s.over_capacity for s in result.samples), "never a node over capacity"
    before_fault = [s for s in result.samples if s.at < 900.0][-1]
    assert before_fault.functional == {"serving/llama-70b": 2, "serving/llama-8b": 2}
    assert any("nodes failed" in line for _, line in result.log)
    final = result.samples[-1]
    assert final.functional == {"serving/llama-70b": 2, "serving/llama-8b": 2}, "recovered"
    assert final.partial_gpus == {"serving/llama-70b": 0, "serving/llama-8b": 0}
    small = result.store.get("InferenceGroup", "serving", "llama-8b")
    assert {r["name"]: r["readyReplicas"] for r in small["status"]["roles"]} == {"prefill": 8, "decode": 8}


def test_the_same_seed_gives_the_same_run_and_a_settled_world_needs_no_writes():
    first, second = simulate(_scenario(seed=3)), simulate(_scenario(seed=3))
    assert first.log == second.log
    assert [(s.at, s.functional, s.partial_gpus) for s in first.samples] == [(s.at, s.functional, s.partial_gpus) for s in second.samples]
    assert reconcile(first.store, 1800.0).writes == 0


def test_a_group_due_after_the_end_has_no_figures_and_breaks_no_summary():
    from tandem.sim.summary import summarize

    scenario = _scenario()
    late = group("late", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)], affinity=[{"from": "prefill", "to": "decode", "level": "rack", "mode": "Preferred"}])
    scenario = Scenario(cluster=scenario.cluster, arrivals=[*scenario.arrivals, (1900.0, late)], duration_s=600.0, seed=0)
    figures = summarize(scenario, simulate(scenario))
    assert sorted(figures["groups"]) == ["serving/llama-70b", "serving/llama-8b"]


def test_delegated_groups_run_in_the_simulator_beside_native_ones_and_survive_a_rack_failure():
    scenario = _scenario()
    volcano = group("on-volcano", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8, pods=2)], replicas=2)
    volcano["spec"]["scheduler"] = {"backend": "volcano"}
    kai = group("on-kai", [role("prefill", 1, 1, gpus=8), role("decode", 1, 1, gpus=8)])
    kai["spec"]["scheduler"] = {"backend": "kai"}
    scenario = Scenario(cluster=scenario.cluster, arrivals=[*scenario.arrivals, (60.0, volcano), (90.0, kai)],
                        faults=scenario.faults, duration_s=1800.0, seed=0)
    result = simulate(scenario)
    assert all(not s.over_capacity for s in result.samples), "tandem's engine and the schedulers' stand-ins never over-commit a node together"
    final = result.samples[-1]
    assert final.functional == {"serving/llama-70b": 2, "serving/llama-8b": 2, "serving/on-volcano": 2, "serving/on-kai": 1}
    pods = result.store.list("Pod", "serving", labels={"tandem.dev/group": "on-volcano"})
    assert pods and {p["spec"]["schedulerName"] for p in pods} == {"volcano"}
    assert result.store.list("PodGroup.scheduling.volcano.sh")
