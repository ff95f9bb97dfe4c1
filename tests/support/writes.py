"""Random writes to the memory store, for properties of what observes it (the controller's
index, the simulator's sampler): groups, pods, nodes, Services, ConfigMaps and the
topology created, changed and deleted."""

from __future__ import annotations

from hypothesis import strategies as st

from support.builders import bound_pod, group, role
from tandem.api.naming import GROUP_LABEL, REPLICA_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.cluster.memory import MemoryStore

OPS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["group", "scale", "delete-group", "pod", "bind", "fail", "delete-pod", "other-pod", "cordon",
                             "heartbeat", "relabel", "delete-node", "service", "configmap", "topology"]),
            st.integers(0, 30),
        ),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=8,
)


class Writer:
    """Applies one drawn write (`op`, `n`) to the store."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self.made = 0

    def names(self, kind: str, namespace: str | None = None) -> list[str]:
        return [o["metadata"]["name"] for o in self.store.list(kind, namespace)]

    def apply(self, op: str, n: int) -> None:
        store = self.store
        groups = self.names("InferenceGroup")
        nodes = self.names("Node")
        pods = self.names("Pod", "serving")
        self.made += 1
        if op == "group" or (op in ("scale", "delete-group", "pod", "service", "configmap") and not groups):
            store.create(group(f"g{self.made}", [role("prefill", 2, 1, gpus=2), role("decode", 1, 1, gpus=2)]))
        elif op == "scale":
            store.patch("InferenceGroup", "serving", groups[n % len(groups)], {"spec": {"replicas": 1 + n % 3}})
        elif op == "delete-group":
            store.delete("InferenceGroup", "serving", groups[n % len(groups)])
        elif op == "pod":
            owner = groups[n % len(groups)]
            pod = bound_pod(f"{owner}-p{self.made}", nodes[n % len(nodes)] if nodes else "gone", 1 + n % 3)
            pod["metadata"].update(namespace="serving", labels={
                GROUP_LABEL: owner, UNIT_LABEL: str(n % 2), ROLE_LABEL: ("prefill", "decode")[n % 2], REPLICA_LABEL: str(n % 3)})
            if n % 2:
                del pod["spec"]["nodeName"]
            store.create(pod)
        elif op in ("bind", "fail", "delete-pod"):
            if not pods:
                return
            name = pods[n % len(pods)]
            current = store.get("Pod", "serving", name)
            if op == "delete-pod":
                store.delete("Pod", "serving", name)
            elif op == "fail":
                store.patch_status("Pod", "serving", name, {"status": {"phase": "Failed"}})
            elif not current["spec"].get("nodeName") and nodes:
                store.bind("serving", name, nodes[n % len(nodes)])
        elif op == "other-pod" and nodes:
            store.create(bound_pod(f"other-{self.made}", nodes[n % len(nodes)], n % 2))
        elif op in ("cordon", "heartbeat", "relabel", "delete-node") and nodes:
            name = nodes[n % len(nodes)]
            if op == "cordon":
                store.patch("Node", None, name, {"spec": {"unschedulable": bool(n % 2) or None}})
            elif op == "heartbeat":
                store.patch_status("Node", None, name, {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": f"t{self.made}"}]}})
            elif op == "relabel":
                store.patch("Node", None, name, {"metadata": {"labels": {"network.tandem.dev/rack": f"rack-{n % 3}"}}})
            else:
                store.delete("Node", None, name)
        elif op in ("service", "configmap"):
            owner = groups[n % len(groups)]
            kind = "Service" if op == "service" else "ConfigMap"
            store.create({"apiVersion": "v1", "kind": kind, "metadata": {"name": f"{owner}-{kind.lower()}-{self.made}",
                          "namespace": "serving", "labels": {GROUP_LABEL: owner}}})
        elif op == "topology":
            topology = store.get("ClusterTopology", None, "default")
            store.patch("ClusterTopology", None, "default", {"metadata": {"annotations": {"touched": str(self.made)}}})
            assert topology
