"""Least privilege, checked both ways: every permission the code uses is granted, and
every permission granted is used. The code's use is recorded, not declared: a story of
rollout, placement, failure, scale-down, autoscaling, events and leader election runs
against a store that notes every (verb, kind); reads are what a pass observes (each kind
listed and watched by the informers) and the Lease the elector reads."""

from __future__ import annotations

import yaml

from support.builders import group, role
from support.controller_world import design_group, kubelet, world
from support.deploy import REPO, component_rules
from support.recording import Recording
from tandem.api.timestamps import rfc3339
from tandem.backends.delegated_kinds import DELEGATED_BACKENDS, DELEGATED_KINDS
from tandem.cluster.unit_autoscalers import UNIT_AUTOSCALER_KINDS
from tandem.controller import PROVISIONING_KINDS, ProvisioningSettings
from tandem.kube.kinds import CRD_KEY
from tandem.controller.observe import OBSERVED_KINDS
from tandem.controller.reconcile import reconcile
from tandem.runtime.leader import LeaderElector, LeaseConfig

OPERATOR_RBAC = REPO / "deploy" / "components" / "operator" / "rbac.yaml"
RESOURCES = {
    "InferenceGroup": ("tandem.dev", "inferencegroups"),
    "ClusterTopology": ("tandem.dev", "clustertopologies"),
    "Pod": ("", "pods"),
    "Node": ("", "nodes"),
    "Service": ("", "services"),
    "ConfigMap": ("", "configmaps"),
    "Event": ("", "events"),
    "Lease": ("coordination.k8s.io", "leases"),
    "PodTemplate": ("", "podtemplates"),
    "ProvisioningRequest": ("autoscaling.x-k8s.io", "provisioningrequests"),
    "HorizontalPodAutoscaler": ("autoscaling", "horizontalpodautoscalers"),
    "ScaledObject": ("keda.sh", "scaledobjects"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
}


def used_permissions():
    from support.autoscaling_story import autoscale_once

    g = design_group(replicas=2)
    g["spec"]["scheduler"] = {"gangTimeoutSeconds": 60}
    store = world(g)
    cluster = Recording(store, RESOURCES)
    now = 0.0
    for _ in range(30):
        reconcile(cluster, now)
        kubelet(store)
        now += 1.0
    store.patch_status("Pod", "serving", "llama-0-prefill-0-0", {"status": {"phase": "Failed"}})
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 1, "topologyName": "missing"}})
    reconcile(cluster, now)  # an invalid group: a condition and an event
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"topologyName": "default"}})
    for _ in range(10):
        now += 1.0
        reconcile(cluster, now)
        kubelet(store)
    for node in store.list("Node"):  # pods created while nothing fits are placed later, by patches
        store.patch("Node", None, node["metadata"]["name"], {"spec": {"unschedulable": True}})
    store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})
    reconcile(cluster, now + 1)
    for node in store.list("Node"):
        store.patch("Node", None, node["metadata"]["name"], {"spec": {"unschedulable": None}})
    reconcile(cluster, now + 2)
    autoscale_once(cluster)
    _provisioning_story(store, cluster, now + 3)
    elector = LeaderElector(cluster, LeaseConfig(identity="a"))
    elector.step(now)
    elector.step(now + 5)
    elector.release(now + 6)
    # every kind a pass reads is listed and watched (with --provisioning too); so are HPAs and
    # ScaledObjects (admission and the autoscaler pass), optional kinds, and with them the CRDs
    for kind in OBSERVED_KINDS + PROVISIONING_KINDS + UNIT_AUTOSCALER_KINDS + (CRD_KEY,):
        cluster.note(kind, "list")
        cluster.note(kind, "watch")
    return cluster.used


def _provisioning_story(store, cluster, now):
    """With --provisioning-class: a unit that cannot fit asks for nodes, its request fails,
    is reported and replaced after the backoff; then the group goes and its request with it."""
    on = ProvisioningSettings(enabled=True, default_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io")
    store.register_kind("ProvisioningRequest", cluster_scoped=False, status=True)
    store.create(group("huge", [role("engine", 1, 1, gpus=64)]))
    reconcile(cluster, now, provisioning=on)
    [request] = store.list("ProvisioningRequest", "serving")
    condition = {"type": "Failed", "status": "True", "reason": "CapacityIsNotFound", "message": "", "lastTransitionTime": rfc3339(now)}
    store.patch_status("ProvisioningRequest", "serving", request["metadata"]["name"], {"status": {"conditions": [condition]}})
    reconcile(cluster, now + 1, provisioning=on)  # reported: an event and the request's annotation
    reconcile(cluster, now + 3600, provisioning=on)  # retried: the request and its templates replaced
    store.patch("InferenceGroup", "serving", "huge", {"spec": {"replicas": 0}})
    reconcile(cluster, now + 3601, provisioning=on)
    assert store.list("ProvisioningRequest", "serving") == [] and store.list("PodTemplate", "serving") == []


def granted_permissions():
    docs = [d for d in yaml.safe_load_all(OPERATOR_RBAC.read_text()) if d]
    out = set()
    for doc in docs:
        for rule in doc.get("rules", []):
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), "no wildcards"
                        out.add((group, resource, verb))
    return out


def test_the_roles_grant_exactly_what_the_code_uses():
    used, granted = used_permissions(), granted_permissions()
    assert not used - granted, f"the code uses permissions the roles lack: {sorted(used - granted)}"
    assert not granted - used, f"the roles grant permissions the code never uses: {sorted(granted - used)}"


def test_no_secrets_and_every_rule_says_why():
    text = OPERATOR_RBAC.read_text()
    assert "secrets" not in text
    for line in text.splitlines():
        if line.strip().startswith("verbs:"):
            assert "#" in line, f"a rule without the code path that needs it: {line.strip()}"


def _rules(path) -> dict[tuple[str, str], set[tuple[str, str, str]]]:
    """(kind, namespace) -> permissions of every Role and ClusterRole in the file."""
    out: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] in ("Role", "ClusterRole"):
            out[(doc["kind"], doc["metadata"].get("namespace", ""))] = {
                (g, r, v) for rule in doc["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_the_namespaced_overlay_grants_the_same_permissions_split_by_scope():
    """The namespaced overlay's read-only ClusterRole and its Role in the groups' namespace add
    up to the base's ClusterRole (what the code uses); every write is in the Role."""
    overlay = REPO / "deploy" / "overlays" / "namespaced"
    cluster = _rules(overlay / "clusterrole.yaml")[("ClusterRole", "")]
    namespaced = _rules(overlay / "role.yaml")[("Role", "serving")]
    base = _rules(OPERATOR_RBAC)[("ClusterRole", "")]
    assert cluster | namespaced == base
    assert {verb for _, _, verb in cluster} == {"list", "watch"}
    assert {(g, r) for g, r, _ in cluster} == {("tandem.dev", "clustertopologies"), ("", "nodes"), ("", "pods"),
                                                ("apiextensions.k8s.io", "customresourcedefinitions")}, "cluster-scoped kinds and capacity"
    for path in (overlay / "clusterrole.yaml", overlay / "role.yaml"):
        for line in path.read_text().splitlines():
            if line.strip().startswith("verbs:"):
                assert "#" in line, f"a rule without the code path that needs it: {line.strip()}"


def delegated_permissions():
    """A story of delegated groups, one per backend, under an operator run with every
    `--backends`: made ready with a priority class, scaled up and down (gang objects patched,
    or replaced where the scheduler keeps them immutable), handed over to another backend, and
    scaled to nothing; every (group, resource, verb) noted."""
    from support.controller_world import kubelet
    from support.delegated_world import delegated_store, toy_scheduler
    from tandem.controller import DelegationSettings

    from tandem.kube.kinds import kind_of

    settings = DelegationSettings(backends=DELEGATED_BACKENDS)
    # KubeCluster watches the enabled backends' kinds as optional, and with them the CRDs (CRD_KEY)
    watched = (*settings.kinds, CRD_KEY)
    resources = RESOURCES | {key: (kind_of(key).api_version.rpartition("/")[0], kind_of(key).plural) for key in watched}
    groups = []
    for index, backend in enumerate(DELEGATED_BACKENDS):
        # minimums equal to the targets: every backend takes them (Kueue admits a unit whole)
        g = group(f"g-{backend}", [role("prefill", 2, 2, gpus=8), role("decode", 1, 1, gpus=8, pods=2)], replicas=2, priority=10 + index)
        g["spec"]["scheduler"] = {"backend": backend}
        groups.append(g)
    store = delegated_store(*groups, shape="block=2,rack=4,host=12")  # room for every group at its largest
    cluster = Recording(store, resources)
    now = 0.0

    def passes(count: int = 200) -> None:
        """Until nothing moves; by then every group is Ready again (placed by its scheduler)."""
        nonlocal now
        for _ in range(count):
            report = reconcile(cluster, now, delegation=settings)
            moved = kubelet(store) + _kueue_admits(store) + toy_scheduler(store)
            now += 1.0
            if not (moved or report.writes or report.errors):
                break
        assert all(store.get("InferenceGroup", "serving", g["metadata"]["name"])["status"]["state"] == "Ready" for g in groups)

    passes()
    for g in groups:
        name = g["metadata"]["name"]
        store.patch("InferenceGroup", "serving", name, {"spec": {"roles": [dict(r, replicas=r["replicas"] + 1, minReplicas=r["replicas"] + 1)
                                                                    for r in store.get("InferenceGroup", "serving", name)["spec"]["roles"]]}})
    passes()
    for g in groups:
        store.patch("InferenceGroup", "serving", g["metadata"]["name"], {"spec": {"replicas": 1}})
    passes()
    backends = list(DELEGATED_BACKENDS)
    for g, backend in zip(groups, backends[1:] + backends[:1]):  # each handed over to the next backend
        store.patch("InferenceGroup", "serving", g["metadata"]["name"], {"spec": {"scheduler": {"backend": backend}}})
    passes()
    for g in groups:
        store.patch("InferenceGroup", "serving", g["metadata"]["name"], {"spec": {"replicas": 0}})
    passes()
    assert not [key for kinds in DELEGATED_KINDS.values() for k in kinds for key in [k.key] if store.list(key)], "every gang object gone with its units"
    # The informers list and watch every kind a pass reads, and, with any backend enabled, the
    # CustomResourceDefinitions that say which of those kinds the API server serves.
    for kind in watched:
        cluster.note(kind, "list")
        cluster.note(kind, "watch")
    return cluster.used


def _kueue_admits(store) -> int:
    """Kueue's pod controller, as far as the story needs: every pod's admission gate lifted;
    the pods changed."""
    from tandem.backends.kueue import ADMISSION_GATE

    lifted = 0
    for pod in store.list("Pod"):
        gates = pod["spec"].get("schedulingGates") or []
        if any(g["name"] == ADMISSION_GATE for g in gates):
            kept = [g for g in gates if g["name"] != ADMISSION_GATE]
            store.patch("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], {"spec": {"schedulingGates": kept or None}})
            lifted += 1
    return lifted


def test_delegated_groups_use_exactly_what_the_backends_components_add():
    """Checked both ways, as the base role is: the operator's roles and every backend's
    component (deploy/components/operator-<backend>) grant all the story uses, and nothing a
    component adds goes unused."""
    used = delegated_permissions()
    base = granted_permissions()
    added = set()
    for backend in DELEGATED_BACKENDS:
        for rule in component_rules(REPO / "deploy" / "components" / f"operator-{backend}"):
            added |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert not added & base, "a component adds only what the base lacks"
    assert not used - (base | added), f"delegated groups use permissions no role grants: {sorted(used - (base | added))}"
    assert not added - used, f"the components grant permissions delegated groups never use: {sorted(added - used)}"
