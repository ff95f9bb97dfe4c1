"""The `Discovery` port in every world (`conftest.WORLDS`): a kind whose CRD is installed
is served, one whose CRD is not (or no longer) is not, and built-in kinds always are.
What the controller decides from it (a delegated backend is live only while its kinds are
served) rests on every world answering alike."""

from __future__ import annotations

from contract.conftest import install_crd, permissive_crd, remove_crd

VOLCANO = "PodGroup.scheduling.volcano.sh"
KAI = "PodGroup.scheduling.run.ai"
PODGROUP_CRD = permissive_crd("PodGroup", "podgroups", "Namespaced", True, group="scheduling.volcano.sh", version_name="v1beta1")


def podgroup(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "serving"},
            "spec": {"minMember": 2}}


def test_a_kind_is_served_while_its_crd_is_installed_and_built_in_kinds_always(world):
    assert world.served((VOLCANO, KAI, "Pod", "InferenceGroup")) == {"Pod", "InferenceGroup"}
    install_crd(world, PODGROUP_CRD)
    assert world.served((VOLCANO, KAI, "Pod")) == {VOLCANO, "Pod"}, "the other PodGroup's CRD is still missing"
    world.create(podgroup("g-0"))
    assert [o["metadata"]["name"] for o in world.snapshot().list(VOLCANO, "serving")] == ["g-0"]
    remove_crd(world, PODGROUP_CRD)
    assert world.served((VOLCANO, KAI, "Pod")) == {"Pod"}


def test_served_answers_only_for_the_kinds_asked_about(world):
    assert world.served(()) == frozenset()
    assert world.served(iter(["Pod", "Pod"])) == {"Pod"}
