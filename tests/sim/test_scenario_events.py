"""The scenario's events in words, numbered in time order: what the report marks on its plots."""

from __future__ import annotations

from support.builders import cluster, group, role
from tandem.sim.runner import Change, Fault, Scenario
from tandem.sim.scenario import load_scenario
from tandem.sim.scenario_events import scenario_events


def test_the_demo_s_events_are_its_arrivals_scale_up_rolling_update_and_rack_failure(examples):
    path = examples / "scenarios" / "demo.yaml"
    scenario = load_scenario(str(path), path.read_text(), lambda rel: (str(path.parent / rel), (path.parent / rel).read_text()))
    events = scenario_events(scenario)
    assert [(e.number, e.at) for e in events] == [(1, 0), (2, 60), (3, 120), (4, 300), (5, 900), (6, 1500), (7, 2100), (8, 3000)]
    assert events[4].text == "group serving/llama-70b: scaled from 2 units to 3" and events[4].short == "llama-70b scale-up"
    assert events[5].short == "llama-8b rolling update" and "new template for decode, prefill, router" in events[5].text
    assert events[6].text.startswith("rack rack-5 fails (8 nodes") and events[7].text == "rack rack-5 recovers (after 900 s)"
    assert events[3].text == "group serving/mixtral arrives (14 units)"


def _scenario(**changes) -> Scenario:
    g = group("llama", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8)], replicas=2)
    return Scenario(cluster=cluster("block=1,rack=2,host=2"), arrivals=[(0.0, g)], duration_s=100.0, **changes)


def test_events_after_the_end_are_left_out_and_ties_keep_the_file_s_order():
    scenario = _scenario(
        changes=[Change(50.0, "serving", "llama", {"spec": {"replicas": 1}}), Change(150.0, "serving", "llama", {"spec": {"replicas": 3}})],
        faults=[Fault(50.0, ("n-000",), recover_after=80.0)],
    )
    events = scenario_events(scenario)
    assert [(e.at, e.short) for e in events] == [(0.0, "llama arrives"), (50.0, "llama scale-down"), (50.0, "n-000 fails")]
    assert events[2].text.startswith("host n-000 fails (1 node"), "one node is named by its host domain"


def test_a_fault_on_nodes_of_no_single_domain_names_them_and_outages_are_events():
    scenario = _scenario(faults=[Fault(10.0, ("n-000", "n-002"))], controller_down=[(20.0, 30.0)])
    assert [e.text for e in scenario_events(scenario)][1:] == [
        "nodes n-000, n-002 fails (2 nodes NotReady, their pods lost)",
        "the controller stops (no pass runs)",
        "the controller is back",
    ]


def test_a_change_that_is_neither_a_scale_nor_a_new_template_is_a_spec_change():
    scenario = _scenario(changes=[Change(5.0, "serving", "llama", {"spec": {"priority": 10}})])
    assert scenario_events(scenario)[1].text == "group serving/llama: spec changed"
