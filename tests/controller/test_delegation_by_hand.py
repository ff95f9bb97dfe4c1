"""A delegated group's gang objects changed by hand (issue 27), as `kubectl edit`, `kubectl
label ...-` or `kubectl annotate ...-` would: the pass puts back what tandem rendered, on
a patchable kind and, for labels and annotations, on one its scheduler keeps immutable.
Each was a defect the fault campaign found (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

from support.builders import group, role
from support.delegated_world import delegated_store
from tandem.api.naming import GROUP_LABEL, UNIT_LABEL
from tandem.backends.delegated_kinds import DELEGATED_KINDS
from tandem.cluster.memory import MemoryStore
from tandem.controller import DelegationSettings, reconcile
from tandem.controller.delegation import RENDERED_ANNOTATION

ALL = DelegationSettings(backends=tuple(DELEGATED_KINDS))
VOLCANO_PG = "PodGroup.scheduling.volcano.sh"
KUEUE_WL = "Workload.kueue.x-k8s.io"


def _group(backend: str) -> dict[str, Any]:
    g = group("llama", [role("prefill", 2, 1, gpus=8), role("decode", 1, 1, gpus=8, pods=2)])
    g["spec"]["scheduler"] = {"backend": backend}
    return g


def _settled(backend: str, key: str) -> tuple[MemoryStore, dict[str, Any]]:
    store = delegated_store(_group(backend))
    reconcile(store, 0.0, delegation=ALL)
    reconcile(store, 1.0, delegation=ALL)
    objects = store.list(key)
    assert objects
    return store, objects[0]


def test_a_min_member_edited_by_hand_with_the_digest_left_is_put_back():
    store, pod_group = _settled("volcano", VOLCANO_PG)
    wanted = pod_group["spec"]["minMember"]
    pod_group["spec"]["minMember"] = wanted + 1  # kubectl edit: the annotation stays as it was
    store.update(pod_group)
    reconcile(store, 2.0, delegation=ALL)
    assert store.get(VOLCANO_PG, "serving", pod_group["metadata"]["name"])["spec"]["minMember"] == wanted


def test_a_gang_object_whose_group_label_was_removed_by_hand_is_still_the_groups_and_labelled_again():
    """Found by the campaign: the object no longer looked like the group's, and each pass
    failed to create it again (409 AlreadyExists), for ever."""
    store, pod_group = _settled("volcano", VOLCANO_PG)
    del pod_group["metadata"]["labels"][GROUP_LABEL]
    store.update(pod_group)
    report = reconcile(store, 2.0, delegation=ALL)
    assert not report.errors, report.errors
    assert store.get(VOLCANO_PG, "serving", pod_group["metadata"]["name"])["metadata"]["labels"][GROUP_LABEL] == "llama"


def test_an_immutable_workload_in_use_gets_its_labels_and_digest_back_and_is_not_replaced():
    """Found by the campaign: a Kueue Workload whose annotation was removed by hand was left
    so (its unit runs: an immutable gang in use is not replaced); metadata can be patched."""
    store, workload = _settled("kueue", KUEUE_WL)
    name, uid = workload["metadata"]["name"], workload["metadata"]["uid"]
    rendered = workload["metadata"]["annotations"][RENDERED_ANNOTATION]
    del workload["metadata"]["annotations"][RENDERED_ANNOTATION]
    del workload["metadata"]["labels"][UNIT_LABEL]
    workload["spec"]["active"] = True  # a field the API server defaults: not tandem's
    store.update(workload)
    reconcile(store, 2.0, delegation=ALL)
    now = store.get(KUEUE_WL, "serving", name)
    assert now["metadata"]["uid"] == uid, "replaced"
    assert now["metadata"]["annotations"][RENDERED_ANNOTATION] == rendered and UNIT_LABEL in now["metadata"]["labels"]
    assert reconcile(store, 3.0, delegation=ALL).writes == 0


def test_a_composite_pod_group_whose_rendering_changed_is_replaced_even_while_its_unit_runs():
    """A Workload API CompositePodGroup gathers PodGroups, never pods: left as made when its
    unit's children changed, it would ask for groups that no longer exist (campaign seed 407)."""
    from tandem.controller.delegation import gang_writes
    from tandem.controller.actions import DeleteObject

    raw = {"metadata": {"name": "g", "namespace": "serving", "uid": "u-1"}}
    owner = [{"kind": "InferenceGroup", "uid": "u-1", "name": "g"}]
    stored = {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
              "metadata": {"name": "g-0-prefill", "namespace": "serving", "uid": "c-1", "labels": {"tandem.dev/unit": "0"}, "ownerReferences": owner},
              "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}}}}
    wanted = {**stored, "metadata": {**stored["metadata"], "uid": None}, "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}}}
    ahead, behind = gang_writes(raw, [wanted], [stored], "workload-api", {"workload-api": {0}}, {0})
    assert ahead == [] and [type(w) for w in behind] == [DeleteObject], "replaced (deleted now, made again next pass), though its unit runs"
    leaf = {**stored, "kind": "PodGroup", "metadata": {**stored["metadata"], "name": "g-0-prefill-0"}}
    leaf_wanted = {**wanted, "kind": "PodGroup", "metadata": {**wanted["metadata"], "name": "g-0-prefill-0"}}
    assert gang_writes(raw, [leaf_wanted], [leaf], "workload-api", {"workload-api": {0}}, {0}) == ([], []), "a PodGroup its pods name is left as made"
