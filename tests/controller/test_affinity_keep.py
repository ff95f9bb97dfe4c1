"""A coordination step that deletes replicas takes none a Required affinity leans on while
an equal one can go (the fault campaign's seed 599: a rolling update's drain took the only
decode in a prefill replica's rack, and the engine moves no running replica)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as st

from support.builders import group, role
from support.fuzz import examples
from tandem.api.resources import InferenceGroup
from tandem.controller.affinity_keep import keep_affinities
from tandem.coordination.model import Decision, Delete, Replica

NEW = "new"
RACK_OF = {"n-0": "rack-0", "n-1": "rack-0", "n-2": "rack-1", "n-3": "rack-1"}


def typed(rule: bool = True) -> InferenceGroup:
    affinity = [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}] if rule else None
    raw = group("g", [role("prefill", 2, 1, gpus=2), role("decode", 1, 1, gpus=2)], affinity=affinity)
    return InferenceGroup.model_validate(raw)


def domain_of(node: str, level: str) -> str | None:
    return RACK_OF.get(node) if level == "rack" else None


def pod(node: str | None) -> dict:
    return {"metadata": {"name": "p", "labels": {}}, "spec": {"nodeName": node} if node else {}, "status": {"phase": "Running"}}


def layout(placed: dict[tuple[str, int], tuple[str, str, str | None]]) -> tuple[list[Replica], dict]:
    """(role, index) -> (revision, phase, node)."""
    replicas = [Replica(r, i, rev, phase) for (r, i), (rev, phase, _) in sorted(placed.items())]  # type: ignore[arg-type]
    pods_of = {key: [pod(node)] for key, (_, _, node) in placed.items()}
    return replicas, pods_of


def drain(*deletes: tuple[str, int]) -> Decision:
    return Decision("Progressing", "update: old side down", {}, (), tuple(Delete(r, i, "replaced by the new revision") for r, i in deletes))


def broken(g: InferenceGroup, replicas: list[Replica], pods_of: dict, gone: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """`from` replicas left with no `to` replica in their rack (read here without the module)."""
    racks = {(r.role, r.index): {RACK_OF[p["spec"]["nodeName"]] for p in pods_of[(r.role, r.index)] if p["spec"].get("nodeName")}
             for r in replicas if (r.role, r.index) not in gone and r.phase != "Failed"}
    near = set().union(*(d for (r, _), d in racks.items() if r == "decode"))
    return {k for k, d in racks.items() if k[0] == "prefill" and d and not d & near}


def test_a_drain_keeps_the_decode_a_prefill_replica_leans_on_and_takes_the_other():
    # decode 0 (rack 0) and decode 1 (rack 1) are both old and Ready; the prefill replicas
    # are in rack 1 only. The planner drains decode 1 (the highest index): decode 0 goes instead.
    replicas, pods_of = layout({
        ("prefill", 0): ("old", "Ready", "n-2"), ("prefill", 1): ("old", "Ready", "n-3"),
        ("decode", 0): ("old", "Ready", "n-0"), ("decode", 1): ("older", "Ready", "n-2"),
    })
    decision = keep_affinities(typed(), NEW, drain(("decode", 1)), replicas, pods_of, domain_of)
    assert [(d.role, d.index, d.why) for d in decision.delete] == [("decode", 0, "replaced by the new revision")]


def test_a_delete_stands_when_no_equal_replica_can_go_instead():
    # decode 0 is of the new revision (another side of the update), decode 2 not Ready (another
    # phase): neither may stand in for the old Ready decode 1, which goes.
    replicas, pods_of = layout({
        ("prefill", 0): ("old", "Ready", "n-2"),
        ("decode", 0): (NEW, "Ready", "n-0"), ("decode", 1): ("old", "Ready", "n-2"), ("decode", 2): ("old", "Scheduled", "n-1"),
    })
    decision = drain(("decode", 1))
    assert keep_affinities(typed(), NEW, decision, replicas, pods_of, domain_of) == decision


def test_without_a_required_affinity_the_planners_choice_stands():
    replicas, pods_of = layout({("prefill", 0): ("old", "Ready", "n-2"), ("decode", 0): ("old", "Ready", "n-0"), ("decode", 1): ("old", "Ready", "n-2")})
    decision = drain(("decode", 1))
    assert keep_affinities(typed(rule=False), NEW, decision, replicas, pods_of, domain_of) == decision


PLACED = st.tuples(st.sampled_from(["old", NEW]), st.sampled_from(["Scheduled", "Ready"]), st.sampled_from([None, *RACK_OF]))


@settings(max_examples=examples(100))
@given(
    prefill=st.lists(PLACED, min_size=1, max_size=3),
    decode=st.lists(PLACED, min_size=1, max_size=4),
    picks=st.data(),
)
def test_a_swap_keeps_the_planners_counts_and_never_breaks_more(prefill, decode, picks):
    placed = {("prefill", i): x for i, x in enumerate(prefill)} | {("decode", i): x for i, x in enumerate(decode)}
    replicas, pods_of = layout(placed)
    chosen = picks.draw(st.lists(st.sampled_from(sorted(placed)), unique=True, max_size=len(placed)))
    decision = keep_affinities(typed(), NEW, drain(*chosen), replicas, pods_of, domain_of)
    after = [(d.role, d.index) for d in decision.delete]
    kind = {(r.role, r.index): (r.role, r.phase, r.revision == NEW) for r in replicas}
    assert len(set(after)) == len(after)
    assert Counter(kind[k] for k in after) == Counter(kind[k] for k in chosen), "the same roles, phases and sides go"
    assert broken(typed(), replicas, pods_of, set(after)) <= broken(typed(), replicas, pods_of, set(chosen))
