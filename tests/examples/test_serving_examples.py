"""The serving examples deploy as they are: tandem accepts the groups (CLI and webhook),
Kubernetes' schemas accept the routers' objects, and each piece points at the others:
an engine's role is its role's, its model has a serving profile, and a router selects the
leaders of its group's roles on the port its engines listen on."""

from __future__ import annotations

import copy
import json
import re

import pytest

from support.controller_world import world
from support.serving_examples import REPO, SERVING, Invocation, all_invocations, documents
from tandem.operator.admission import review
from tandem.sim.serving.profiles import MODEL_NAMES

GROUP_FILES = sorted(p for p in SERVING.glob("*.yaml") if any(d["kind"] == "InferenceGroup" for d in documents(p)))
ROUTER_FILES = sorted(p for p in SERVING.glob("*.yaml") if p not in GROUP_FILES)
GROUPS = {d["metadata"]["name"]: d for p in GROUP_FILES for d in documents(p)}
INVOCATIONS = all_invocations()
ENGINES = [f for f in INVOCATIONS if f.engine in ("sglang", "vllm")]
ROUTERS = [f for f in INVOCATIONS if f.engine.endswith("-router")]


def _flags(found: Invocation) -> dict[str, list[str]]:
    """Each flag's values (`--flag=v`, `--flag v`, `--flag v w ...`)."""
    out: dict[str, list[str]] = {}
    current = None
    for word in found.argv:
        if word.startswith("--"):
            current, _, value = word.partition("=")
            out[current] = [value] if value else []
        elif current is not None:
            out[current].append(word)
    return out


def test_there_are_three_groups_and_two_routers() -> None:
    assert [p.name for p in GROUP_FILES] == ["sglang-multinode.yaml", "sglang-pd.yaml", "vllm-pd.yaml"]
    assert [p.name for p in ROUTER_FILES] == ["sglang-pd-router.yaml", "vllm-pd-router.yaml"]


def test_tandem_validate_accepts_the_groups(run_cli) -> None:
    result = run_cli("validate", REPO / "examples" / "cluster.yaml", *GROUP_FILES)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().endswith("3 group(s)")


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_the_webhook_admits_the_groups_without_a_warning(name: str) -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "tandem.dev", "version": "v1alpha1", "kind": "InferenceGroup"},
                        "operation": "CREATE", "object": GROUPS[name], "oldObject": None}}
    verdict = review(json.dumps(body).encode(), world().snapshot())
    assert verdict.allowed, verdict.problems
    assert verdict.warnings == ()


@pytest.mark.parametrize("path", ROUTER_FILES, ids=[p.name for p in ROUTER_FILES])
def test_the_router_objects_pass_kubernetes_schemas(path) -> None:
    from backends.schemas import schema_problems

    docs = {d["kind"]: d for d in documents(path)}
    assert sorted(docs) == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    for doc in docs.values():
        assert schema_problems(doc) == [], doc["kind"]


@pytest.mark.parametrize("path", ROUTER_FILES, ids=[p.name for p in ROUTER_FILES])
def test_the_router_may_watch_pods_and_is_reachable(path) -> None:
    docs = {d["kind"]: d for d in documents(path)}
    account, pod = docs["ServiceAccount"]["metadata"]["name"], docs["Deployment"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == account
    binding = docs["RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": docs["ServiceAccount"]["metadata"]["namespace"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": docs["Role"]["metadata"]["name"]}
    assert any(r["resources"] == ["pods"] and {"list", "watch"} <= set(r["verbs"]) for r in docs["Role"]["rules"])
    assert docs["Service"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    # the group's own headless Service has the group's name: the router's must not take it
    assert docs["Service"]["metadata"]["name"] not in GROUPS


@pytest.mark.parametrize("found", ENGINES, ids=[f.where for f in ENGINES])
def test_each_engine_plays_its_roles_part(found: Invocation) -> None:
    flags = _flags(found)
    role = found.pod["metadata"]["labels"]["tandem.dev/role"]
    if found.engine == "sglang":
        assert flags["--disaggregation-mode"] == [role]
        model = flags["--model-path"][0]
    else:
        config = json.loads(flags["--kv-transfer-config"][0])
        assert config["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
        model = found.argv[0]
    # the engine stand-ins time it by the bundled profile its Hugging Face id names
    base = model.rsplit("/", 1)[-1].lower().replace("-instruct", "")
    assert base in MODEL_NAMES
    port = int(flags["--port"][0])
    assert {p["name"]: p["containerPort"] for p in found.container["ports"]}["http"] == port
    if found.engine == "sglang" and role == "prefill":
        bootstrap = int(flags["--disaggregation-bootstrap-port"][0])
        assert found.pod["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == str(bootstrap)
        assert {p["name"]: p["containerPort"] for p in found.container["ports"]}["bootstrap"] == bootstrap


@pytest.mark.parametrize("found", ROUTERS, ids=[f.where for f in ROUTERS])
def test_each_router_selects_its_groups_leaders_on_their_port(found: Invocation) -> None:
    flags = _flags(found)
    selectors = {role: dict(s.split("=", 1) for s in flags[f"--{role}-selector"]) for role in ("prefill", "decode")}
    group = GROUPS[selectors["prefill"]["tandem.dev/group"]]
    assert flags["--service-discovery-namespace"] == [group["metadata"]["namespace"]]
    ports = set()
    for role, selector in selectors.items():
        assert selector == {"tandem.dev/group": group["metadata"]["name"], "tandem.dev/role": role, "tandem.dev/pod-index": "0"}
        leaders = [f for f in ENGINES if f.pod["metadata"]["labels"].get("tandem.dev/group") == group["metadata"]["name"]
                   and f.pod["metadata"]["labels"]["tandem.dev/role"] == role and f.pod["metadata"]["labels"]["tandem.dev/pod-index"] == "0"]
        assert leaders, role
        ports |= {int(_flags(f)["--port"][0]) for f in leaders}
    assert flags["--service-discovery-port"] == [str(p) for p in ports]


def test_a_router_selecting_a_role_the_group_lacks_is_caught() -> None:
    """The check above is not vacuous: a selector naming a role tandem never labels fails it."""
    found = ROUTERS[0]
    argv = tuple("tandem.dev/role=prefil" if w == "tandem.dev/role=prefill" else w for w in found.argv)
    broken = Invocation(found.where, found.engine, argv, found.pod, found.container)
    with pytest.raises(AssertionError):
        test_each_router_selects_its_groups_leaders_on_their_port(broken)


def test_a_swapped_kv_role_is_caught() -> None:
    found = next(f for f in ENGINES if f.engine == "vllm")
    swap = {"kv_producer": "kv_consumer", "kv_consumer": "kv_producer"}
    argv = tuple(re.sub("kv_producer|kv_consumer", lambda m: swap[m[0]], w) for w in found.argv)
    assert argv != found.argv
    with pytest.raises(AssertionError):
        test_each_engine_plays_its_roles_part(Invocation(found.where, found.engine, argv, copy.deepcopy(found.pod), found.container))


@pytest.mark.parametrize("found", ENGINES, ids=[f.where for f in ENGINES])
def test_tandem_apiserver_runs_a_stand_in_of_each_engine_as_its_flags_say(found: Invocation) -> None:
    from tandem.apiserver.engines.recognition import recognise
    from tandem.sim.serving.profiles import GPU_NAMES

    spec = recognise(found.pod, None, MODEL_NAMES, GPU_NAMES)
    assert spec is not None and spec.engine == found.engine and spec.container == found.container["name"]
    flags = _flags(found)
    assert spec.role == found.pod["metadata"]["labels"]["tandem.dev/role"]
    assert spec.port == int(flags["--port"][0])
    assert spec.tp == int((flags.get("--tp-size") or flags["--tensor-parallel-size"])[0])
    assert spec.profile in ("llama-3.1-8b", "llama-3.1-70b") and spec.gpu == "h100-sxm"
    assert spec.bootstrap_port == (8998 if (found.engine, spec.role) == ("sglang", "prefill") else None)


@pytest.mark.parametrize("found", ROUTERS, ids=[f.where for f in ROUTERS])
def test_a_router_pod_is_not_taken_for_an_engine(found: Invocation) -> None:
    from tandem.apiserver.engines.recognition import recognise
    from tandem.sim.serving.profiles import GPU_NAMES

    assert recognise(found.pod, None, MODEL_NAMES, GPU_NAMES) is None
