"""deploy/'s two controllers are kustomize components: deploy/ installs both, each overlay
one alone, and a backend's component adds its `--backends` and exactly its kinds' RBAC.
The topology controller's identity is its own and least-privileged: no wildcards, no pods,
no secrets, nothing but what keeps topologies."""

from __future__ import annotations

import pytest
import yaml

from support.deploy import REPO, needs_kubectl, render, with_components
from support.recording import Recording
from tandem.topology_controller.kinds import BACKEND_KINDS

BACKENDS = sorted(BACKEND_KINDS)
TOPOLOGY_RBAC = REPO / "deploy" / "components" / "topology-controller" / "rbac.yaml"


def names(objects: list[dict], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == kind}


@needs_kubectl
@pytest.mark.parametrize(
    ("target", "deployments"),
    [("deploy", {"tandem-operator", "tandem-topology-controller"}), ("deploy/overlays/operator-only", {"tandem-operator"}),
     ("deploy/overlays/topology-only", {"tandem-topology-controller"}), ("deploy/overlays/topology-only-cert-manager", {"tandem-topology-controller"}),
     ("deploy/overlays/namespaced", {"tandem-operator", "tandem-topology-controller"})],
)
def test_each_install_runs_the_controllers_it_names(target, deployments):
    objects = render(target)
    assert names(objects, "Deployment") == deployments
    assert names(objects, "CustomResourceDefinition") == {"clustertopologies.tandem.dev", "inferencegroups.tandem.dev"}
    assert names(objects, "Namespace") >= {"tandem-system"}
    # The operator's webhook where it runs (it reviews ClusterTopologies too); the topology controller's only where it runs alone.
    webhook = "tandem-operator" if "tandem-operator" in deployments else "tandem-topology-controller"
    assert names(objects, "ValidatingWebhookConfiguration") == {webhook}
    assert ("tandem-topology-controller" in names(objects, "ServiceAccount")) == ("tandem-topology-controller" in deployments)
    assert all(o["metadata"].get("namespace") in (None, "tandem-system", "serving") for o in objects)


@needs_kubectl
def test_the_topology_controller_runs_as_a_well_kept_controller_should():
    objects = render("deploy/overlays/topology-only")
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert deployment["spec"]["replicas"] == 2 and container["args"][:2] == ["topology-controller", "--leader-elect"]
    assert not any(a.startswith("--backends") for a in container["args"]), "alone: ClusterTopology status only"
    assert spec["serviceAccountName"] == "tandem-topology-controller"
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "privileged": False,
                                            "capabilities": {"drop": ["ALL"]}}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" and container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert {p["containerPort"] for p in container["ports"]} == {8080, 8081, 9443}, "probes, metrics and, alone, its ClusterTopology webhook"
    assert container["args"][-2:] == ["--webhook-port=9443", "--webhook-cert-dir=/certs"]
    assert spec["priorityClassName"] == "tandem-topology-controller", "its webhook fails closed: its pods are scheduled first"
    assert names(objects, "PodDisruptionBudget") == {"tandem-topology-controller"}
    assert names(objects, "NetworkPolicy") == {"tandem-topology-controller"}
    assert names(objects, "Service") == {"tandem-topology-metrics", "tandem-topology-webhook"}


def _rules(path) -> dict[str, set[tuple[str, str, str]]]:
    out: dict[str, set[tuple[str, str, str]]] = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] in ("Role", "ClusterRole"):
            out[doc["metadata"]["name"]] = {(g, r, v) for rule in doc["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_the_topology_controllers_role_is_least_privilege():
    rules = _rules(TOPOLOGY_RBAC)
    cluster = rules["tandem-topology-controller"]
    assert cluster == {
        ("", "nodes", "list"), ("", "nodes", "watch"),
        ("tandem.dev", "clustertopologies", "list"), ("tandem.dev", "clustertopologies", "watch"), ("tandem.dev", "clustertopologies", "patch"),
        ("tandem.dev", "clustertopologies/status", "patch"),
        ("tandem.dev", "inferencegroups", "list"), ("tandem.dev", "inferencegroups", "watch"),
        ("", "events", "create"), ("", "events", "patch"),
    }
    assert rules["tandem-topology-controller-leader-election"] == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "patch")}


@pytest.mark.parametrize("path", [TOPOLOGY_RBAC] + [REPO / "deploy" / "components" / f"topology-{b}" / "rbac.yaml" for b in BACKENDS],
                         ids=["topology-controller"] + BACKENDS)
def test_no_wildcards_no_pods_no_secrets_and_every_rule_says_why(path):
    text = path.read_text()
    granted = set().union(*_rules(path).values())
    assert not {(g, r) for g, r, _ in granted} & {("", "pods"), ("", "secrets")}
    assert not [p for p in granted if "*" in "".join(p)], "no wildcards"
    for line in text.splitlines():
        if line.strip().startswith("verbs:"):
            assert "#" in line, f"a rule without the reason: {line.strip()}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backends_component_grants_exactly_its_kinds(backend):
    [rules] = _rules(REPO / "deploy" / "components" / f"topology-{backend}" / "rbac.yaml").values()
    kinds = {(k.api_version.rpartition("/")[0], k.plural) for k in BACKEND_KINDS[backend]}
    assert {(g, r) for g, r, _ in rules} == kinds
    for kind in BACKEND_KINDS[backend]:
        verbs = {v for g, r, v in rules if r == kind.plural}
        wanted = {"list", "watch", "patch"} | ({"create", "delete"} if kind.owned else set())
        assert verbs == wanted, (kind.kind, verbs)


@needs_kubectl
@pytest.mark.parametrize("backends", [["volcano"], ["volcano", "kai", "koordinator"], ["kueue"]], ids=["volcano", "three", "kueue"])
def test_backend_components_add_their_flag_and_bind_their_role_and_the_cli_takes_the_flags(tmp_path, backends, run_cli):
    objects = with_components(tmp_path, "overlays/topology-only", [f"topology-{b}" for b in backends])
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--backends")] == [f"--backends={b}" for b in backends]
    for backend in backends:
        binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == f"tandem-topology-{backend}")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tandem-topology-controller", "namespace": "tandem-system"}]
        assert f"tandem-topology-{backend}" in names(objects, "ClusterRole")
    # The rendered arguments are what the CLI takes: it gets as far as connecting.
    result = run_cli(*args, "--kubeconfig", tmp_path / "absent", "--metrics-port", "0", "--health-port", "0")
    assert result.exit_code == 2 and result.stderr.startswith("error: --kubeconfig: cannot connect"), result.stderr


@needs_kubectl
def test_kai_and_kueue_components_together_are_taken_by_the_controller(tmp_path, run_cli):
    objects = with_components(tmp_path, "overlays/topology-only", ["topology-kai", "topology-kueue"])
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--backends")] == ["--backends=kai", "--backends=kueue"]
    result = run_cli(*args, "--kubeconfig", tmp_path / "absent", "--metrics-port", "0", "--health-port", "0")
    assert result.exit_code == 2 and result.stderr.startswith("error: --kubeconfig: cannot connect"), result.stderr


def test_the_topology_controllers_roles_grant_everything_its_pass_and_election_use():
    """A story: topologies kept for three backends, nodes added, relabelled and removed, a level
    changed, a used topology's deletion blocked then let go; every (group, resource, verb) the
    pass and its leader election touch is granted by the controller's roles and its backends'."""
    from support.controller_world import design_group, world
    from tandem.runtime.leader import LeaderElector, LeaseConfig
    from tandem.topology_controller.process import LEASE_NAME
    from tandem.topology_controller.reconcile import TopologySettings, reconcile, watched_kinds

    backends = ("kai", "koordinator", "volcano")
    settings = TopologySettings(backends)
    resources = {"Node": ("", "nodes"), "ClusterTopology": ("tandem.dev", "clustertopologies"), "InferenceGroup": ("tandem.dev", "inferencegroups"),
                 "Event": ("", "events"), "Lease": ("coordination.k8s.io", "leases")}
    resources |= {k.key: (k.api_version.rpartition("/")[0], k.plural) for b in backends for k in BACKEND_KINDS[b]}
    store = world(shape="block=1,rack=2,host=2")
    for backend in backends:
        for kind in BACKEND_KINDS[backend]:
            store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=False)
    cluster = Recording(store, resources)
    now = 0.0

    def passes(count: int = 3) -> None:
        nonlocal now
        for _ in range(count):
            now += 1.0
            reconcile(cluster, now, settings)

    passes()
    [first, *_] = store.list("Node")
    store.patch("Node", None, first["metadata"]["name"], {"metadata": {"labels": {"network.tandem.dev/rack": "rack-new"}}})
    passes()
    store.delete("Node", None, first["metadata"]["name"])
    passes()
    topology = store.get("ClusterTopology", None, "default")
    store.patch("ClusterTopology", None, "default", {"spec": {"levels": topology["spec"]["levels"][1:]}})
    passes()
    store.create(design_group())
    passes()
    store.delete("ClusterTopology", None, "default")  # marked for deletion: the finalizer holds it while the group names it
    passes()
    assert store.list("ClusterTopology"), "held while a group names it"
    store.delete("InferenceGroup", "serving", "llama")
    passes()
    assert store.list("ClusterTopology") == [] and store.list("HyperNode") == [], "let go, and its objects with it"
    elector = LeaderElector(cluster, LeaseConfig(name=LEASE_NAME, identity="a"))
    elector.step(now)
    elector.step(now + 5)
    elector.release(now + 6)
    for kind in watched_kinds(settings):  # the informers list and watch every kind the pass reads
        cluster.note(kind, "list")
        cluster.note(kind, "watch")
    used = cluster.used | _kueue_story()
    granted = set().union(*_rules(TOPOLOGY_RBAC).values())
    for backend in BACKENDS:
        granted |= set().union(*_rules(REPO / "deploy" / "components" / f"topology-{backend}" / "rbac.yaml").values())
    assert not used - granted, f"the code uses permissions the roles lack: {sorted(used - granted)}"
    assert not granted - used, f"the roles grant permissions the code never uses: {sorted(granted - used)}"
    assert ("tandem.dev", "clustertopologies/status", "patch") in used and ("topology.volcano.sh", "hypernodes", "delete") in used


def _kueue_story() -> set[tuple[str, str, str]]:
    """Kueue's Topology kept, then dropped with a level change Kueue refuses, and a
    ResourceFlavor given its topologyName where the ClusterTopology asks."""
    from support.controller_world import world
    from tandem.topology_controller.ownership import FLAVORS_ANNOTATION
    from tandem.topology_controller.reconcile import TopologySettings, reconcile, watched_kinds

    settings = TopologySettings(("kueue",))
    resources = {"Node": ("", "nodes"), "ClusterTopology": ("tandem.dev", "clustertopologies"), "InferenceGroup": ("tandem.dev", "inferencegroups"),
                 "Event": ("", "events")}
    resources |= {k.key: (k.api_version.rpartition("/")[0], k.plural) for k in BACKEND_KINDS["kueue"]}
    store = world(shape="block=1,rack=2,host=2")
    for kind in BACKEND_KINDS["kueue"]:
        store.register_kind(kind.key, cluster_scoped=not kind.namespaced, status=False)
    store.create({"apiVersion": BACKEND_KINDS["kueue"][1].api_version, "kind": "ResourceFlavor", "metadata": {"name": "gpu"},
                  "spec": {"nodeLabels": {"pool": "gpu"}}})
    store.patch("ClusterTopology", None, "default", {"metadata": {"annotations": {FLAVORS_ANNOTATION: "gpu"}}})
    cluster = Recording(store, resources)
    reconcile(cluster, 1.0, settings)
    assert store.get("ResourceFlavor", None, "gpu")["spec"]["topologyName"]
    store.patch("ClusterTopology", None, "default", {"spec": {"levels": store.get("ClusterTopology", None, "default")["spec"]["levels"][1:]}})
    reconcile(cluster, 2.0, settings)
    store.delete("ClusterTopology", None, "default")
    reconcile(cluster, 3.0, settings)
    assert store.list("Topology.kueue.x-k8s.io") == []
    for kind in watched_kinds(settings):
        cluster.note(kind, "list")
        cluster.note(kind, "watch")
    return cluster.used
