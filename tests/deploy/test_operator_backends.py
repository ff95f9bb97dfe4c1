"""The operator's delegated backends are opt-in, one kustomize component each
(deploy/components/operator-<backend>): a backend's gang kinds are granted only when its
component is in the install, with exactly the verbs the operator uses on them (informers and
merge patches: list, watch, create, patch, delete, without patch for the kinds the scheduler
keeps immutable; no get, no update, no status: the scheduler writes that), plus what any delegated backend needs across the cluster (the CRDs,
read; PriorityClasses, created when missing). The kinds come from the code's own list,
`tandem.backends.delegated_kinds`, so a kind added there and not granted here fails."""

from __future__ import annotations

import pytest
import yaml

from support.deploy import REPO, TARGETS, Grant, component_rules, grants, needs_kubectl, render, with_components
from tandem.backends.delegated_kinds import DELEGATED_BACKENDS, DELEGATED_KINDS, PRIORITY_CLASS, DelegatedKind
from tandem.backends.delegated_kinds import IMMUTABLE_KEYS
from tandem.operator.scope import CLUSTER_WIDE_READS

COMPONENTS = REPO / "deploy" / "components"


def gang_verbs(kind: DelegatedKind) -> set[str]:
    """Informers read; a kind the scheduler lets change is merge-patched, one it keeps
    immutable (`IMMUTABLE_KEYS`) is replaced, never patched."""
    return {"list", "watch", "create", "delete"} | (set() if kind.key in IMMUTABLE_KEYS else {"patch"})


def gang_grants(backend: str, namespace: str = "") -> set[Grant]:
    """The backend's namespaced gang kinds, granted across the cluster ("") or in one namespace."""
    return {(namespace, kind.group, kind.plural, verb) for kind in DELEGATED_KINDS[backend] for verb in gang_verbs(kind)}


# Once any backend is enabled: the PriorityClass a group's spec.priority names. (Whether a
# backend is live, its CRDs established, every operator reads: the base grants the CRDs.)
CLUSTER_GRANTS: set[Grant] = {("", PRIORITY_CLASS.group, PRIORITY_CLASS.plural, v) for v in ("list", "watch", "create")}
EVERY_BACKEND_GRANT = {(g, r) for b in DELEGATED_BACKENDS for _, g, r, _ in gang_grants(b) | CLUSTER_GRANTS}


def operator(objects: list[dict]) -> set[Grant]:
    return grants(objects, "tandem-operator")


def backends_flags(objects: list[dict]) -> list[str]:
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "tandem-operator"]
    return [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--backends")]


WITH_OPERATOR = [t for t in TARGETS if t not in ("deploy/overlays/local", "deploy/overlays/topology-only", "deploy/overlays/topology-only-cert-manager")]


@needs_kubectl
@pytest.mark.parametrize("backend", DELEGATED_BACKENDS)
def test_a_backends_kinds_are_granted_only_with_its_component(tmp_path, backend):
    """Without the component no install grants its kinds (nor any backend's, nor the CRD read
    and PriorityClasses); with it, exactly those are added to deploy/'s grants, and the flag."""
    for target in WITH_OPERATOR:
        objects = render(target)
        assert not {(g, r) for _, g, r, _ in operator(objects)} & EVERY_BACKEND_GRANT, target
        assert backends_flags(objects) == [], target
    alone = operator(render("deploy"))
    objects = with_components(tmp_path, ".", [f"operator-{backend}"])
    assert operator(objects) - alone == gang_grants(backend) | CLUSTER_GRANTS
    assert alone <= operator(objects), "nothing of the base is taken away"
    assert backends_flags(objects) == [f"--backends={backend}"]


@pytest.mark.parametrize("backend", DELEGATED_BACKENDS)
def test_a_backends_component_has_no_wildcard_no_secret_and_every_rule_says_why(backend):
    directory = COMPONENTS / f"operator-{backend}"
    rules = component_rules(directory)
    assert rules
    patches = yaml.safe_load((directory / "kustomization.yaml").read_text())["patches"]
    for rule in rules:
        assert not [x for field in ("apiGroups", "resources", "verbs") for x in rule[field] if "*" in x], rule
        assert "secrets" not in rule["resources"]
        assert "get" not in rule["verbs"] and "update" not in rule["verbs"], "informers read; merge patches write"
        assert not [r for r in rule["resources"] if "/" in r], "no subresource: the scheduler writes the status"
    for text in ((directory / "rbac.yaml").read_text(), *(p["patch"] for p in patches)):
        for line in text.splitlines():
            if line.strip().startswith("verbs:"):
                assert "#" in line, f"a rule without the code path that needs it: {line.strip()}"


# The installs a user builds: deploy/ or an overlay as a resource, one or more backends' components.
INSTALLS = [(".", ["volcano", "kai"]), (".", ["kueue", "workload-api"]), (".", list(DELEGATED_BACKENDS)),
            ("overlays/operator-only", ["koordinator"]), ("overlays/cert-manager", ["volcano"]),
            ("overlays/namespaced", ["kueue"]), ("overlays/namespaced", ["volcano", "workload-api"])]


@needs_kubectl
@pytest.mark.parametrize(("base", "backends"), INSTALLS, ids=[f"{'deploy' if b == '.' else b.rpartition('/')[2]}+{'+'.join(bs)}" for b, bs in INSTALLS])
def test_components_together_render_valid_objects_grant_the_union_and_the_cli_takes_the_flags(tmp_path, base, backends, run_cli):
    from backends.schemas import schema_problems

    alone = operator(render(f"deploy/{base}"))
    objects = with_components(tmp_path, base, [f"operator-{b}" for b in backends])
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"):
            assert not schema_problems(obj), (obj["kind"], obj["metadata"]["name"], schema_problems(obj)[:3])
    namespace = "serving" if base == "overlays/namespaced" else ""
    wanted = CLUSTER_GRANTS.union(*(gang_grants(b, namespace) for b in backends))
    assert operator(objects) - alone == wanted
    assert backends_flags(objects) == [f"--backends={b}" for b in backends]
    for role in (o for o in objects if o["kind"] in ("Role", "ClusterRole")):
        keys = [yaml.safe_dump(rule, sort_keys=True) for rule in role["rules"]]
        assert len(keys) == len(set(keys)), f"{role['metadata']['name']}: a rule twice"
    # The rendered arguments are what `tandem operator` takes: it gets as far as connecting.
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "tandem-operator"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    result = run_cli(*args, "--kubeconfig", tmp_path / "absent", "--metrics-port", "0", "--health-port", "0")
    assert result.exit_code == 2 and result.stderr.startswith("error: --kubeconfig: cannot connect"), result.stderr


@needs_kubectl
def test_namespaced_the_gang_kinds_are_granted_where_the_operator_watches_them(tmp_path):
    """overlays/namespaced keeps its split: the operator's own ClusterRole still only reads;
    a gang kind is read where `tandem operator --namespace` watches it (the groups' namespace,
    unless `scope.CLUSTER_WIDE_READS` names it) and written in the groups' namespace only; the
    cluster-scoped kinds (CRDs, PriorityClasses) are the backends' own ClusterRoles'."""
    objects = with_components(tmp_path, "overlays/namespaced", [f"operator-{b}" for b in DELEGATED_BACKENDS])
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    assert {v for rule in roles[("ClusterRole", "tandem-operator")]["rules"] for v in rule["verbs"]} == {"list", "watch"}
    granted = operator(objects)
    for kind in (k for kinds in DELEGATED_KINDS.values() for k in kinds):
        reads = {"list", "watch"}
        read_in = "" if kind.key in CLUSTER_WIDE_READS else "serving"
        assert {(s, v) for s, g, r, v in granted if (g, r) == (kind.group, kind.plural)} == {(read_in, v) for v in reads} | {
            ("serving", v) for v in gang_verbs(kind) - reads}, kind.key
    assert {(g, r) for s, g, r, _ in granted if s == ""} >= {(g, r) for _, g, r, _ in CLUSTER_GRANTS}
    for backend in DELEGATED_BACKENDS:
        assert ("ClusterRole", f"tandem-operator-{backend}") in roles
