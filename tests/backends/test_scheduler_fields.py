"""What a group says about its scheduler (`spec.scheduler.queue`, `qosClass`) reaches the
objects each backend renders, wins over `tandem render --queue`, and validates against the
upstream CRDs; what Koordinator cannot honour (DRA claims, MNNVL) is refused at its path."""

from __future__ import annotations

import pytest

from support.builders import cluster, group, role
from tandem.backends.base import BackendOptions
from tandem.backends.registry import get_backend

from backends.schemas import SCHEMAS, SKIP_REASON, assert_valid
from backends.variants import load, typed

needs_schemas = pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)


def _group(backend: str, **scheduler: str) -> dict:
    g = group("llama", [role("prefill", 2, 2, gpus=8), role("decode", 1, 1, gpus=8)], required="rack")
    g["spec"]["scheduler"] = {"backend": backend, **scheduler}
    return g


def _render(raw: dict, options: BackendOptions | None = None) -> list[dict]:
    inputs = load([*cluster("rack=2,host=4"), raw])
    backend = get_backend(raw["spec"]["scheduler"]["backend"], options)
    g = typed(raw)
    topology = inputs.topologies["default"]
    assert backend.validate(g, topology) == []
    return backend.render(g, topology, inputs.nodes, raw)


def _queues(backend: str, objects: list[dict]) -> set[str]:
    """Every place the backend names the queue."""
    found = set()
    for obj in objects:
        labels = obj["metadata"].get("labels", {})
        if backend == "volcano" and obj["kind"] == "PodGroup":
            found.add(obj["spec"]["queue"])
        if backend == "kai":
            if obj["kind"] == "PodGroup":
                found.add(obj["spec"]["queue"])
            if obj["kind"] in ("PodGroup", "Pod"):
                found.add(labels["kai.scheduler/queue"])
        if backend == "kueue":
            if obj["kind"] == "Workload":
                found.add(obj["spec"]["queueName"])
            if obj["kind"] == "Pod":
                found.add(labels["kueue.x-k8s.io/queue-name"])
    return found


@needs_schemas
@pytest.mark.parametrize("backend", ["volcano", "kai", "kueue"])
def test_the_groups_queue_wins_over_the_cli_option_and_validates(backend: str) -> None:
    objects = _render(_group(backend, queue="team-a.inference"), BackendOptions(queue="from-cli"))
    assert_valid(objects)
    assert _queues(backend, objects) == {"team-a.inference"}
    without = _render(_group(backend), BackendOptions(queue="from-cli"))
    assert _queues(backend, without) == {"from-cli"}
    assert _queues(backend, _render(_group(backend))) == {"default"}


@needs_schemas
def test_koordinator_pods_carry_the_groups_qos_class() -> None:
    objects = _render(_group("koordinator", qosClass="LSR"))
    assert_valid(objects)
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods and {p["metadata"]["labels"]["koordinator.sh/qosClass"] for p in pods} == {"LSR"}
    plain = [o for o in _render(_group("koordinator")) if o["kind"] == "Pod"]
    assert all("koordinator.sh/qosClass" not in p["metadata"]["labels"] for p in plain)


def _koordinator_problems(change) -> list[str]:
    raw = _group("koordinator")
    raw["spec"]["roles"][1]["podsPerReplica"] = 2
    raw["spec"]["roles"][1]["workerTemplate"] = {"spec": {"containers": [{"name": "w", "image": "x"}]}}
    change(raw["spec"]["roles"])
    inputs = load([*cluster("rack=2,host=4"), raw])
    return [str(p) for p in get_backend("koordinator").validate(typed(raw), inputs.topologies["default"])]


CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "gpu-claim"}]


def test_koordinator_refuses_dra_claims_at_their_path() -> None:
    def claims(roles):
        roles[0]["template"]["spec"]["resourceClaims"] = CLAIMS
        roles[1]["workerTemplate"]["spec"]["resourceClaims"] = CLAIMS

    problems = _koordinator_problems(claims)
    assert [p.split(": ")[0] for p in problems] == [
        "spec.roles[0].template.spec.resourceClaims",
        "spec.roles[1].workerTemplate.spec.resourceClaims",
    ]
    assert all("DRA" in p and "GREP-537" in p for p in problems)
    raw = _group("volcano")
    raw["spec"]["roles"][0]["template"]["spec"]["resourceClaims"] = CLAIMS
    inputs = load([*cluster("rack=2,host=4"), raw])
    assert get_backend("volcano").validate(typed(raw), inputs.topologies["default"]) == [], "only koordinator refuses them"


MNNVL = [("grove.io/auto-mnnvl", "enabled", True), ("grove.io/mnnvl-group", "nvl72", True),
         ("grove.io/auto-mnnvl", "disabled", False), ("grove.io/mnnvl-group", "none", False)]


def test_koordinator_refuses_the_mnnvl_annotation_at_its_path_but_not_its_opt_out() -> None:
    for annotation, value, refused in MNNVL:
        problems = _koordinator_problems(
            lambda roles: roles[0]["template"].setdefault("metadata", {}).setdefault("annotations", {}).update({annotation: value})
        )
        expected = [f'spec.roles[0].template.metadata.annotations["{annotation}"]'] if refused else []
        assert [p.split(": ")[0] for p in problems] == expected, (annotation, value)
