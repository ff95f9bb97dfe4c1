"""Small worlds for the scheduler stand-ins: nodes with GPUs, pods as each backend writes them."""

from __future__ import annotations

import json
from typing import Any

from tandem.backends import kai, koordinator, kueue, volcano
from tandem.schedulers.kueue import ADMISSION_GATE
from tandem.schedulers.run import first_fit_pass, schedule
from tandem.schedulers.shared import Decision, World

NS = "team"


def node(name: str, gpus: int = 8, *, ready: bool = True, taint: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, gpus: int = 4, *, scheduler: str | None = None, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, gates: list[str] | None = None, spec: dict[str, Any] | None = None,
        created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "engine", "image": "vllm", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}
    if scheduler:
        body["schedulerName"] = scheduler
    if gates:
        body["schedulingGates"] = [{"name": g} for g in gates]
    body.update(spec or {})
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "creationTimestamp": created, "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": "Pending"}}


def volcano_group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": volcano.API_VERSION, "kind": "PodGroup", "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member, **spec}}


def volcano_pod(name: str, group: str, gpus: int = 4, task: str = "decode", **kw: Any) -> dict[str, Any]:
    return pod(name, gpus, scheduler="volcano", annotations={volcano.GROUP_ANNOTATION: group, volcano.TASK_ANNOTATION: task}, **kw)


def kai_group(name: str, min_member: int, subgroups: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if subgroups is not None:
        spec["subGroups"] = subgroups
    return {"apiVersion": kai.API_VERSION, "kind": "PodGroup", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def kai_pod(name: str, group: str, leaf: str, gpus: int = 4) -> dict[str, Any]:
    return pod(name, gpus, scheduler="kai-scheduler", labels={kai.SUBGROUP_LABEL: leaf}, annotations={kai.GROUP_ANNOTATION: group})


def koord_group(name: str, min_member: int, members: list[str] | None = None) -> dict[str, Any]:
    annotations = {koordinator.GROUPS_ANNOTATION: json.dumps([f"{NS}/{m}" for m in members])} if members else {}
    return {"apiVersion": koordinator.API_VERSION, "kind": "PodGroup", "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {"minMember": min_member}}


def koord_pod(name: str, group: str, gpus: int = 4) -> dict[str, Any]:
    return pod(name, gpus, scheduler="koord-scheduler", labels={koordinator.POD_GROUP_LABEL: group})


def workload(name: str, counts: dict[str, int], queue: str = "default", priority: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": queue, "podSets": [{"name": ps, "count": n, "template": {"spec": {"containers": []}}} for ps, n in counts.items()]}
    if priority:
        spec["priority"] = priority
    return {"apiVersion": kueue.API_VERSION, "kind": "Workload", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def kueue_pod(name: str, workload_name: str, podset: str = "decode", gpus: int = 4, queue: str = "default") -> dict[str, Any]:
    return pod(name, gpus, labels={kueue.QUEUE_LABEL: queue, kueue.GROUP_LABEL: workload_name}, annotations={kueue.ROLE_HASH_ANNOTATION: podset},
               gates=[ADMISSION_GATE])


def pod_group(name: str, min_count: int | None, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS, "generation": 1}, "spec": spec}


def composite(name: str, min_groups: int, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minGroupCount": min_groups}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def wa_pod(name: str, group: str, gpus: int = 4) -> dict[str, Any]:
    return pod(name, gpus, spec={"schedulingGroup": {"podGroupName": group}})


class Store:
    """Objects by (kind, name), changed as a world applies a Decision (no API server)."""

    def __init__(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]], gangs: dict[str, list[dict[str, Any]]]):
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.nodes = nodes
        self.gangs = {b: {o["metadata"]["name"]: o for o in objs} for b, objs in gangs.items()}

    def world(self, now: float = 100.0) -> World:
        return World(list(self.pods.values()), self.nodes, {b: list(objs.values()) for b, objs in self.gangs.items()}, now)

    def apply(self, decision: Decision) -> None:
        for ungate in decision.ungates:
            spec = self.pods[ungate.name]["spec"]
            spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or [] if g["name"] != ungate.gate]
            if not spec["schedulingGates"]:
                del spec["schedulingGates"]
        for bind in decision.binds:
            assert not self.pods[bind.name]["spec"].get("nodeName"), f"{bind.name} bound twice"
            self.pods[bind.name]["spec"]["nodeName"] = bind.node
        for write in decision.statuses:
            obj = dict(write.object)
            for objs in self.gangs.values():
                if objs.get(obj["metadata"]["name"], {}).get("kind") == obj["kind"]:
                    objs[obj["metadata"]["name"]] = obj
        for condition in decision.conditions:
            status = self.pods[condition.name].setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"] + [
                {"type": "PodScheduled", "status": "False", "reason": condition.reason, "message": condition.message}
            ]

    def run(self, now: float = 100.0) -> Decision:
        """One pass of the stand-ins, then kube-scheduler's first fit (Kueue's pods once ungated)."""
        decision = schedule(self.world(now))
        self.apply(decision)
        follow = first_fit_pass(self.world(now), set(self.gangs))
        self.apply(follow)
        return decision + follow

    def bound(self) -> dict[str, str]:
        return {name: p["spec"]["nodeName"] for name, p in sorted(self.pods.items()) if p["spec"].get("nodeName")}

    def scheduled(self, name: str) -> tuple[str, str] | None:
        for c in (self.pods[name].get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled":
                return c["reason"], c["message"]
        return None

