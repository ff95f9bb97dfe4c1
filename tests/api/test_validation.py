"""The rules of tandem's resources, one at a time, and the defaults the code applies."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from tandem.api.loading import load_texts
from tandem.api.naming import MAX_POD_NAME, pod_name
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.api.validation import check_group, check_topology, duplicate_names
from tandem.errors import InputError, Problem

POD: dict[str, Any] = {"spec": {"containers": [{"name": "engine", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}

TOPOLOGY = ClusterTopology.model_validate(
    {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "ClusterTopology",
        "metadata": {"name": "default"},
        "spec": {
            "levels": [
                {"name": "block", "nodeLabel": "network.example.com/block"},
                {"name": "rack", "nodeLabel": "network.example.com/rack"},
                {"name": "host", "nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    }
)


def make_group(spec: dict[str, Any] | None = None, name: str = "llm", **roles: dict[str, Any]) -> dict[str, Any]:
    """A group manifest; each keyword is a role name with its extra fields."""
    roles = roles or {"prefill": {"replicas": 4}, "decode": {"replicas": 2}}
    return {
        "apiVersion": "tandem.dev/v1alpha1",
        "kind": "InferenceGroup",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {
            "roles": [{"name": role, "template": copy.deepcopy(POD), **fields} for role, fields in roles.items()],
            **(spec or {}),
        },
    }


def problems(manifest: dict[str, Any], topology: ClusterTopology | None = TOPOLOGY) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in check_group(InferenceGroup.model_validate(manifest), topology)]


def paths(manifest: dict[str, Any], topology: ClusterTopology | None = TOPOLOGY) -> list[str]:
    return [path for path, _ in problems(manifest, topology)]


def field_error(manifest: dict[str, Any]) -> str:
    """The one-line error that loading gives for a manifest (field-local rules)."""
    import json

    with pytest.raises(InputError) as caught:
        load_texts([("g.json", json.dumps(manifest))])
    return str(caught.value)


# ----------------------------------------------------------------------------- defaults


def test_defaults_of_a_minimal_group() -> None:
    group = InferenceGroup.model_validate(
        {
            "apiVersion": "tandem.dev/v1alpha1",
            "kind": "InferenceGroup",
            "metadata": {"name": "llm"},
            "spec": {"roles": [{"name": "prefill", "template": POD}]},
        }
    )
    assert group.metadata.namespace == "default"
    spec = group.spec
    assert spec.topology_name == "default"
    assert spec.replicas == 1
    assert spec.priority == 0
    assert spec.topology.pack.required is None and spec.topology.pack.preferred is None
    assert spec.affinity == []
    role = spec.roles[0]
    assert role.replicas == 1
    assert role.min_replicas is None and role.minimum == 1
    assert role.pods_per_replica == 1
    assert role.worker_template is None
    assert role.recovery == "RecreateReplica"
    assert role.topology.pack.required is None
    rollout = spec.coordination.rollout
    assert rollout.steps is None
    assert rollout.progression == "OrderScheduled"
    assert rollout.step_timeout_seconds == 600
    assert spec.coordination.scaling.max_skew == 1
    assert spec.coordination.scaling.progression == "OrderScheduled"
    update = spec.coordination.rolling_update
    assert (update.max_surge, update.max_unavailable, update.max_skew) == (1, 0, 1)
    assert spec.scheduler.backend == "native"
    assert spec.scheduler.gang_timeout_seconds == 300
    assert group.status is None


@pytest.mark.parametrize(("replicas", "minimum"), [(0, 0), (1, 1), (2, 1), (8, 1)])
def test_min_replicas_defaults_to_one_complete_replica(replicas: int, minimum: int) -> None:
    """minReplicas defaults to min(1, replicas): none for a role scaled to zero."""
    group = InferenceGroup.model_validate(make_group(prefill={"replicas": replicas, "podsPerReplica": 4}))
    assert group.spec.roles[0].minimum == minimum


def test_explicit_min_replicas_wins() -> None:
    group = InferenceGroup.model_validate(make_group(prefill={"replicas": 4, "minReplicas": 0}, decode={"replicas": 2, "minReplicas": 2}))
    assert [role.minimum for role in group.spec.roles] == [0, 2]


def test_affinity_mode_defaults_to_preferred() -> None:
    group = InferenceGroup.model_validate(make_group({"affinity": [{"from": "prefill", "to": "decode", "level": "rack"}]}))
    assert group.spec.affinity[0].mode == "Preferred"
    assert group.spec.affinity[0].from_ == "prefill"


def test_worker_template_is_used_for_pods_after_the_leader() -> None:
    worker = {"spec": {"containers": [{"name": "worker"}]}}
    group = InferenceGroup.model_validate(make_group(decode={"replicas": 1, "podsPerReplica": 3, "workerTemplate": worker}))
    role = group.spec.roles[0]
    assert role.pod_template(0).spec.containers[0].name == "engine"
    assert role.pod_template(1).spec.containers[0].name == "worker"
    assert role.pod_template(2).spec.containers[0].name == "worker"
    plain = InferenceGroup.model_validate(make_group(decode={"podsPerReplica": 2})).spec.roles[0]
    assert plain.pod_template(1).spec.containers[0].name == "engine"


def test_camel_case_on_the_wire() -> None:
    group = InferenceGroup.model_validate(make_group(prefill={"replicas": 3, "minReplicas": 2, "podsPerReplica": 2}))
    dumped = group.model_dump(by_alias=True, exclude_none=True)
    role = dumped["spec"]["roles"][0]
    assert (role["minReplicas"], role["podsPerReplica"]) == (2, 2)
    assert dumped["spec"]["scheduler"] == {"backend": "native", "gangTimeoutSeconds": 300}
    assert dumped["spec"]["affinity"] == []


# ----------------------------------------------------------------------------- roles


def test_valid_group_has_no_problems() -> None:
    spec = {
        "topology": {"pack": {"required": "block", "preferred": "rack"}},
        "affinity": [{"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}],
        "coordination": {"rollout": {"steps": {"prefill": 2, "decode": 1}}, "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
    }
    manifest = make_group(
        spec,
        prefill={"replicas": 4, "minReplicas": 4, "topology": {"pack": {"required": "host"}}},
        decode={"replicas": 2, "podsPerReplica": 2, "topology": {"pack": {"required": "rack", "preferred": "host"}}},
    )
    assert problems(manifest) == []


def test_duplicate_role_names() -> None:
    manifest = make_group()
    manifest["spec"]["roles"].append(copy.deepcopy(manifest["spec"]["roles"][0]))
    assert problems(manifest) == [("spec.roles[2].name", "duplicate role name 'prefill' (also spec.roles[0])")]


@pytest.mark.parametrize(("replicas", "minimum", "ok"), [(4, 4, True), (4, 5, False), (0, 0, True), (0, 1, False), (3, 0, True)])
def test_min_replicas_at_most_replicas(replicas: int, minimum: int, ok: bool) -> None:
    found = problems(make_group(prefill={"replicas": 1}, decode={"replicas": replicas, "minReplicas": minimum}))
    assert found == ([] if ok else [("spec.roles[1].minReplicas", f"must be <= replicas ({replicas})")])


def test_min_replicas_counts_replicas_not_pods() -> None:
    """minReplicas may not exceed replicas even when replicas × podsPerReplica would allow it."""
    found = problems(make_group(decode={"replicas": 2, "minReplicas": 3, "podsPerReplica": 4}))
    assert found == [("spec.roles[0].minReplicas", "must be <= replicas (2)")]


def test_worker_template_needs_several_pods() -> None:
    worker = {"spec": {"containers": [{"name": "w"}]}}
    assert paths(make_group(decode={"podsPerReplica": 1, "workerTemplate": worker})) == ["spec.roles[0].workerTemplate"]
    assert paths(make_group(decode={"podsPerReplica": 2, "workerTemplate": worker})) == []


def longest_pod_name(group: str, units: int, role: str, replicas: int, pods: int) -> str:
    return pod_name(group, units - 1, role, replicas - 1, pods - 1)


def test_pod_names() -> None:
    assert pod_name("llama-70b", 0, "prefill", 3, 0) == "llama-70b-0-prefill-3-0"
    assert MAX_POD_NAME == 63


@pytest.mark.parametrize(("extra", "ok"), [(0, True), (1, False)])
def test_generated_pod_names_fit_63_characters(extra: int, ok: bool) -> None:
    """The longest name, of the last pod of the last replica of the last unit, decides."""
    # "<group>-9-prefill-11-3" has len(group) + 15 characters for 10 units of 12 replicas of 4 pods.
    group_name = "g" * (MAX_POD_NAME - 15 + extra)
    manifest = make_group({"replicas": 10}, name=group_name, prefill={"replicas": 12, "podsPerReplica": 4})
    assert len(longest_pod_name(group_name, 10, "prefill", 12, 4)) == MAX_POD_NAME + extra
    found = problems(manifest)
    if ok:
        assert found == []
    else:
        assert found == [
            (
                "spec.roles[0].name",
                f"generated pod name '{group_name}-9-prefill-11-3' is 64 characters; at most 63 are allowed "
                "(shorten metadata.name or the role name)",
            )
        ]


def test_pod_name_length_grows_with_the_unit_count() -> None:
    name = "g" * 48  # 48 + len("-9-prefill-0-0") = 62
    assert paths(make_group({"replicas": 10}, name=name, prefill={"replicas": 1})) == []
    assert paths(make_group({"replicas": 11}, name=name, prefill={"replicas": 1})) == []  # "-10-": 63
    assert paths(make_group({"replicas": 101}, name=name, prefill={"replicas": 1})) == ["spec.roles[0].name"]


# ----------------------------------------------------------------------------- affinity


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"from": "router", "to": "decode", "level": "rack"}, [("spec.affinity[0].from", "names no role of this group: 'router' (roles: decode, prefill)")]),
        ({"from": "prefill", "to": "router", "level": "rack"}, [("spec.affinity[0].to", "names no role of this group: 'router' (roles: decode, prefill)")]),
        ({"from": "decode", "to": "decode", "level": "rack"}, [("spec.affinity[0].to", "must differ from 'from' ('decode')")]),
        ({"from": "prefill", "to": "decode", "level": "row"}, [("spec.affinity[0].level", "unknown level 'row' (levels of ClusterTopology 'default': block, rack, host)")]),
        ({"from": "decode", "to": "prefill", "level": "host", "mode": "Required"}, []),
    ],
)
def test_affinity_rules(rule: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert problems(make_group({"affinity": [rule]})) == expected


def test_required_affinity_to_a_role_with_no_replicas() -> None:
    rule = {"from": "prefill", "to": "decode", "level": "rack", "mode": "Required"}
    assert problems(make_group({"affinity": [rule]}, prefill={"replicas": 4}, decode={"replicas": 0})) == [
        (
            "spec.affinity[0].to",
            "Required affinity puts every prefill replica near a decode replica, but role 'decode' has replicas: 0 "
            "(its prefill replicas could never be placed)",
        )
    ]
    # Preferred is only a wish, and with no prefill replica either there is nothing to be near.
    assert problems(make_group({"affinity": [rule | {"mode": "Preferred"}]}, prefill={"replicas": 4}, decode={"replicas": 0})) == []
    assert problems(make_group({"affinity": [rule]}, prefill={"replicas": 0}, decode={"replicas": 0})) == []


@pytest.mark.parametrize("skew", [0, "0%"])
def test_scaling_max_skew_zero_is_refused(skew: int | str) -> None:
    assert problems(make_group({"coordination": {"scaling": {"maxSkew": skew}}})) == [
        (
            "spec.coordination.scaling.maxSkew",
            "must be at least 1 (or a percentage above 0%): with 0 no role may move ahead of another, so scaling could never start",
        )
    ]
    assert problems(make_group({"coordination": {"scaling": {"maxSkew": "1%"}}})) == []


def test_exclusive_level() -> None:
    assert problems(make_group({"topology": {"exclusive": "rack", "pack": {"required": "rack"}}})) == []
    assert problems(make_group({"topology": {"exclusive": "row"}})) == [
        ("spec.topology.exclusive", "unknown level 'row' (levels of ClusterTopology 'default': block, rack, host)")
    ]
    assert problems(make_group({"topology": {"exclusive": "row"}}), topology=None) == []  # no topology: not checked
    with pytest.raises(ValidationError, match="exclusive"):  # a unit-level field only
        InferenceGroup.model_validate(make_group(prefill={"replicas": 1, "topology": {"exclusive": "rack"}}))


@pytest.mark.parametrize(
    ("pack", "exclusive"),
    [
        ({"required": "rack"}, "rack"),  # the common case: one rack per unit, its own
        ({"required": "rack"}, "block"),  # the unit's block is its own too
        ({"required": "block"}, "rack"),  # the racks the unit uses are its own
        ({"preferred": "rack"}, "host"),
        ({}, "block"),  # exclusive alone does not pack: every block the unit touches is its own
    ],
)
def test_exclusive_may_be_broader_equal_or_narrower_than_the_pack(pack: dict[str, str], exclusive: str) -> None:
    spec = {"topology": {"pack": pack, "exclusive": exclusive}}
    assert problems(make_group(spec)) == []
    group = InferenceGroup.model_validate(make_group(spec))
    assert group.spec.topology.exclusive == exclusive and group.spec.topology.pack.model_dump(exclude_none=True) == pack
    assert InferenceGroup.model_validate(make_group()).spec.topology.exclusive is None


def test_exclusive_field_paths() -> None:
    assert field_error(make_group(prefill={"replicas": 1, "topology": {"exclusive": "rack"}})) == (
        "g.json: spec.roles[0].topology.exclusive: unknown field"
    )
    assert field_error(make_group(decode={"replicas": 1, "topology": {"pack": {"required": "host"}, "exclusive": "host"}})) == (
        "g.json: spec.roles[0].topology.exclusive: unknown field"
    )
    assert field_error(make_group({"topology": {"exclusive": "Rack_1"}})).startswith("g.json: spec.topology.exclusive: ")
    assert field_error(make_group({"topology": {"exclusive": 3}})).startswith("g.json: spec.topology.exclusive: ")


def test_validate_exits_2_on_exclusive_mistakes(run_cli, tmp_path) -> None:
    import json

    topology = tmp_path / "topology.json"
    topology.write_text(TOPOLOGY.model_dump_json(by_alias=True, exclude_none=True), encoding="utf-8")
    unknown, on_role, fine = tmp_path / "unknown.json", tmp_path / "role.json", tmp_path / "fine.json"
    unknown.write_text(json.dumps(make_group({"topology": {"exclusive": "row"}})), encoding="utf-8")
    on_role.write_text(json.dumps(make_group(prefill={"replicas": 1, "topology": {"exclusive": "rack"}})), encoding="utf-8")
    fine.write_text(json.dumps(make_group({"topology": {"pack": {"required": "block"}, "exclusive": "rack"}})), encoding="utf-8")

    result = run_cli("validate", topology, unknown)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {unknown}: spec.topology.exclusive: unknown level 'row' (levels of ClusterTopology 'default': block, rack, host)"
    ]
    result = run_cli("validate", topology, on_role)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {on_role}: spec.roles[0].topology.exclusive: unknown field"]
    result = run_cli("validate", topology, fine)
    assert result.exit_code == 0, result.stderr


def test_duplicate_affinity_pair() -> None:
    rules = [
        {"from": "prefill", "to": "decode", "level": "rack"},
        {"from": "decode", "to": "prefill", "level": "rack"},  # the other direction is another rule
        {"from": "prefill", "to": "decode", "level": "host", "mode": "Required"},
    ]
    assert problems(make_group({"affinity": rules})) == [("spec.affinity[2]", "duplicate affinity prefill->decode (also spec.affinity[0])")]


# ----------------------------------------------------------------------------- coordination


def test_rollout_steps_name_roles() -> None:
    spec = {"coordination": {"rollout": {"steps": {"prefill": 2, "router": 1, "decode": 1}}}}
    assert problems(make_group(spec)) == [
        ("spec.coordination.rollout.steps.router", "names no role of this group (roles: prefill, decode)")
    ]


def test_rollout_step_with_an_odd_name_is_quoted_in_the_path() -> None:
    spec = {"coordination": {"rollout": {"steps": {"pre.fill": 1}}}}
    assert paths(make_group(spec)) == ['spec.coordination.rollout.steps["pre.fill"]']


@pytest.mark.parametrize(
    ("surge", "unavailable", "ok"),
    [(0, 0, False), ("0%", 0, False), (0, "0%", False), ("0%", "0%", False), (1, 0, True), (0, 1, True), ("25%", 0, True), (0, "10%", True)],
)
def test_rolling_update_must_be_able_to_start(surge: object, unavailable: object, ok: bool) -> None:
    spec = {"coordination": {"rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}
    expected = [] if ok else [("spec.coordination.rollingUpdate.maxUnavailable", "must not be 0 when maxSurge is 0 (the update could never start)")]
    assert problems(make_group(spec)) == expected


@pytest.mark.parametrize("value", [0, 1, 7, "0%", "25%", "100%"])
def test_int_or_percent_accepts(value: object) -> None:
    group = InferenceGroup.model_validate(make_group({"coordination": {"scaling": {"maxSkew": value}}}))
    assert group.spec.coordination.scaling.max_skew == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("150%", "must be an integer or a percentage from 0% to 100%, not '150%'"),
        ("25", "must be an integer or a percentage from 0% to 100%, not '25'"),
        ("-5%", "must be an integer or a percentage from 0% to 100%"),
        (-1, "must not be negative, got -1"),
        (True, 'must be an integer or a percentage such as "25%"'),
        (1.5, 'must be an integer or a percentage such as "25%"'),
        (None, 'must be an integer or a percentage such as "25%", got null'),
    ],
)
def test_int_or_percent_rejects(value: object, message: str) -> None:
    error = field_error(make_group({"coordination": {"scaling": {"maxSkew": value}}}))
    assert error.startswith(f"g.json: spec.coordination.scaling.maxSkew: {message}")


# ----------------------------------------------------------------------------- against the topology


@pytest.mark.parametrize(
    ("unit_pack", "role_pack", "expected"),
    [
        # unknown levels, wherever they are
        ({"required": "zone"}, {}, [("spec.topology.pack.required", "unknown level 'zone'")]),
        ({"preferred": "zone"}, {}, [("spec.topology.pack.preferred", "unknown level 'zone'")]),
        ({}, {"required": "gpu"}, [("spec.roles[0].topology.pack.required", "unknown level 'gpu'")]),
        ({}, {"preferred": "gpu"}, [("spec.roles[0].topology.pack.preferred", "unknown level 'gpu'")]),
        # preferred must be equal to or narrower than required
        ({"required": "rack", "preferred": "block"}, {}, [("spec.topology.pack.preferred", "'block' is broader than required 'rack'")]),
        ({}, {"required": "host", "preferred": "rack"}, [("spec.roles[0].topology.pack.preferred", "'rack' is broader than required 'host'")]),
        ({"required": "rack", "preferred": "rack"}, {"required": "host", "preferred": "host"}, []),
        # a replica must fit inside its unit
        ({"required": "rack"}, {"required": "block"}, [("spec.roles[0].topology.pack.required", "'block' is broader than the unit's required pack 'rack'")]),
        ({"required": "rack"}, {"preferred": "block"}, [("spec.roles[0].topology.pack.preferred", "'block' is broader than the unit's required pack 'rack'")]),
        ({"required": "rack"}, {"required": "rack"}, []),
        ({"required": "rack"}, {"required": "host"}, []),
        # no unit requirement: a role may pack at any level
        ({"preferred": "host"}, {"required": "block"}, []),
        ({}, {"required": "block"}, []),
    ],
)
def test_pack_levels(unit_pack: dict[str, str], role_pack: dict[str, str], expected: list[tuple[str, str]]) -> None:
    manifest = make_group({"topology": {"pack": unit_pack}}, prefill={"topology": {"pack": role_pack}})
    found = problems(manifest)
    assert [path for path, _ in found] == [path for path, _ in expected]
    for (_, message), (_, start) in zip(found, expected):
        assert message.startswith(start), message


def test_without_the_topology_level_names_are_not_checked() -> None:
    manifest = make_group(
        {"topology": {"pack": {"required": "zone"}}, "affinity": [{"from": "prefill", "to": "decode", "level": "row"}]},
        prefill={"topology": {"pack": {"required": "gpu"}}},
        decode={},
    )
    assert problems(manifest, topology=None) == []
    assert len(problems(manifest)) == 3


def test_a_broken_unit_pack_does_not_cascade() -> None:
    """An unknown unit level is reported once, not again for every role measured against it."""
    manifest = make_group({"topology": {"pack": {"required": "zone"}}}, prefill={"topology": {"pack": {"required": "block"}}})
    assert paths(manifest) == ["spec.topology.pack.required"]


# ----------------------------------------------------------------------------- ClusterTopology


def topology(levels: list[dict[str, Any]]) -> ClusterTopology:
    return ClusterTopology.model_validate(
        {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "t"}, "spec": {"levels": levels}}
    )


def test_topology_duplicate_names_and_labels() -> None:
    found = check_topology(
        topology(
            [
                {"name": "block", "nodeLabel": "a"},
                {"name": "rack", "nodeLabel": "b"},
                {"name": "block", "nodeLabel": "c"},
                {"name": "host", "nodeLabel": "b"},
            ]
        )
    )
    assert found == [
        Problem("spec.levels[2].name", "duplicate 'block' (also spec.levels[0])"),
        Problem("spec.levels[3].nodeLabel", "duplicate 'b' (also spec.levels[1])"),
    ]


def test_level_name_cluster_is_reserved() -> None:
    """"cluster" names the root domain in plans and views; a level of that name would be confused with it."""
    found = check_topology(topology([{"name": "cluster", "nodeLabel": "c"}, {"name": "host", "nodeLabel": "h"}]))
    assert [p.path for p in found] == ["spec.levels[0].name"]
    assert "reserved" in found[0].message


def test_a_hostname_level_must_be_the_narrowest() -> None:
    """A host names one node, so a host level above a rack is inverted; last, it is the usual node level."""
    host, rack = {"name": "host", "nodeLabel": "kubernetes.io/hostname"}, {"name": "rack", "nodeLabel": "r"}
    found = check_topology(topology([{"name": "block", "nodeLabel": "b"}, host, rack]))
    assert found == [
        Problem(
            "spec.levels[1].nodeLabel",
            "kubernetes.io/hostname names a single node, so only the narrowest (last) level may use it; "
            "level 'host' would be broader than 'rack'",
        )
    ]
    assert check_topology(topology([rack, host])) == []
    assert check_topology(topology([host])) == []


def test_topology_helpers() -> None:
    assert TOPOLOGY.level_names() == ["block", "rack", "host"]
    assert TOPOLOGY.depth("block") == 0 and TOPOLOGY.depth("host") == 2
    assert check_topology(TOPOLOGY) == []


@pytest.mark.parametrize(
    "label", ["kubernetes.io/hostname", "network.example.com/rack", "rack", "topology.kubernetes.io/zone", "a_b.c-d", "x" * 63]
)
def test_label_keys_accepted(label: str) -> None:
    topology([{"name": "rack", "nodeLabel": label}])


@pytest.mark.parametrize("label", ["", "a b", "/rack", "Example.com/rack", "-rack", "rack-", "x" * 64, "a/b/c"])
def test_label_keys_rejected(label: str) -> None:
    with pytest.raises(ValidationError, match="is not a valid Kubernetes label key|too_short|at least"):
        topology([{"name": "rack", "nodeLabel": label}])


def test_level_count_and_bandwidth_bounds() -> None:
    topology([{"name": f"l{i}", "nodeLabel": f"l{i}"} for i in range(16)])
    with pytest.raises(ValidationError):
        topology([{"name": f"l{i}", "nodeLabel": f"l{i}"} for i in range(17)])
    assert topology([{"name": "rack", "nodeLabel": "r", "linkBandwidthGbps": 0.5}]).spec.levels[0].link_bandwidth_gbps == 0.5
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            topology([{"name": "rack", "nodeLabel": "r", "linkBandwidthGbps": bad}])


# ----------------------------------------------------------------------------- field-local rules


@pytest.mark.parametrize("name", ["a", "llama-70b", "x" * 63, "0-prefill", "9"])
def test_dns_labels_accepted(name: str) -> None:
    InferenceGroup.model_validate(make_group(name=name))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("x" * 64, "must be at most 63 characters, got 64"),
        ("Llama", "'Llama' is not a DNS-1123 label"),
        ("llama_70b", "'llama_70b' is not a DNS-1123 label"),
        ("llama.70b", "'llama.70b' is not a DNS-1123 label"),
        ("-llama", "'-llama' is not a DNS-1123 label"),
        ("llama-", "'llama-' is not a DNS-1123 label"),
        ("", "'' is not a DNS-1123 label"),
    ],
)
def test_dns_labels_rejected(name: str, message: str) -> None:
    assert field_error(make_group(name=name)).startswith(f"g.json: metadata.name: {message}")


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ({"replicas": -1}, "spec.replicas", "must be greater than or equal to 0, got -1"),
        ({"replicas": 2**31}, "spec.replicas", "must be less than or equal to 2147483647, got 2147483648"),
        ({"replicas": "3"}, "spec.replicas", "must be a valid integer, got '3'"),
        ({"replicas": 2.0}, "spec.replicas", "must be a valid integer, got 2.0"),
        ({"priority": 2**31}, "spec.priority", "must be less than or equal to 2147483647"),
        ({"priority": -(2**31) - 1}, "spec.priority", "must be greater than or equal to -2147483648"),
        ({"scheduler": {"gangTimeoutSeconds": 0}}, "spec.scheduler.gangTimeoutSeconds", "must be greater than or equal to 1, got 0"),
        ({"coordination": {"rollout": {"stepTimeoutSeconds": 0}}}, "spec.coordination.rollout.stepTimeoutSeconds", "must be greater than or equal to 1"),
        ({"scheduler": {"backend": "Volcano"}}, "spec.scheduler.backend", "must be 'native', 'volcano', 'koordinator', 'kai', 'kueue' or 'workload-api', got 'Volcano'"),
        ({"topologyName": "Default"}, "spec.topologyName", "'Default' is not a DNS-1123 label"),
        ({"roles": [{"name": "d", "podsPerReplica": 2, "recovery": "ReplaceMissing", "template": POD}]}, "spec.roles[0].recovery",
         "must be 'RecreateReplica' or 'ReplaceMissingPod', got 'ReplaceMissing'"),
        ({"roles": [{"name": "p", "template": POD}] * 33}, "spec.roles", "must have at most 32 items, got 33"),
    ],
)
def test_field_rules(spec: dict[str, Any], path: str, message: str) -> None:
    manifest = make_group()
    manifest["spec"].update(spec)
    assert field_error(manifest).startswith(f"g.json: {path}: {message}")


@pytest.mark.parametrize("priority", [-(2**31), -5, 0, 1000, 2**31 - 1])
def test_priority_is_any_int32(priority: int) -> None:
    assert InferenceGroup.model_validate(make_group({"priority": priority})).spec.priority == priority


@pytest.mark.parametrize("backend", ["native", "volcano", "koordinator", "kai", "kueue", "workload-api"])
def test_backends(backend: str) -> None:
    assert InferenceGroup.model_validate(make_group({"scheduler": {"backend": backend}})).spec.scheduler.backend == backend


def test_unknown_fields_rejected_on_tandem_resources_but_not_on_pod_templates() -> None:
    manifest = make_group()
    manifest["spec"]["roles"][0]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8000}]
    manifest["spec"]["roles"][0]["template"]["spec"]["affinity"] = {"nodeAffinity": {}}
    manifest["metadata"]["uid"] = "1234"  # server metadata is ignored
    InferenceGroup.model_validate(manifest)
    manifest["spec"]["roles"][0]["replica"] = 2
    assert field_error(manifest) == "g.json: spec.roles[0].replica: unknown field"


def test_snake_case_names_are_not_wire_names_for_unknown_fields() -> None:
    manifest = make_group()
    manifest["spec"]["gangTimeout"] = 5
    assert field_error(manifest) == "g.json: spec.gangTimeout: unknown field"


# ----------------------------------------------------------------------------- errors


def test_input_error_is_one_line_and_keeps_every_problem() -> None:
    error = InputError([Problem("spec.replicas", "bad", "a.yaml"), Problem("", "worse", "b.yaml"), Problem("x", "worst")])
    assert str(error) == "a.yaml: spec.replicas: bad (and 2 more problems)"
    assert [str(p) for p in error.problems] == ["a.yaml: spec.replicas: bad", "b.yaml: worse", "x: worst"]
    assert str(InputError(Problem("", "alone"))) == "alone"
    with pytest.raises(ValueError):
        InputError([])


def test_loading_checks_groups_against_their_topology() -> None:
    import json

    group = make_group({"topology": {"pack": {"required": "zone"}}})
    topo = TOPOLOGY.model_dump(by_alias=True, exclude_none=True)
    with pytest.raises(InputError) as caught:
        load_texts([("t.json", json.dumps(topo)), ("g.json", json.dumps(group))])
    assert str(caught.value).startswith("g.json: spec.topology.pack.required: unknown level 'zone'")
    # and without the topology, loading accepts it (plan will require the topology)
    assert load_texts([("g.json", json.dumps(group))]).groups[0].spec.topology.pack.required == "zone"


def test_duplicate_names_helper() -> None:
    assert duplicate_names(["a", "b", "a", "c", "b", "a"]) == ["a", "b"]
    assert duplicate_names([]) == []
