"""A simulated node autoscaler for `tandem apiserver --provisioner`: it answers
ProvisioningRequests (autoscaling.x-k8s.io/v1) as cluster-autoscaler does, by adding nodes.

For trying and testing tandem's provisioning (docs/provisioning.md) without a cloud:

- the ProvisioningRequest CRD is installed at start-up (cluster-autoscaler's own,
  `data/autoscaling.x-k8s.io_provisioningrequests.yaml`, with its provenance);
- a request of class `best-effort-atomic-scale-up.autoscaling.x-k8s.io` is `Accepted` at
  once and, `delay` seconds later, gets nodes for all its pods (first fit, each node a copy
  of the first Ready node by name, as one node group's template) and `Provisioned=True`.
  The new nodes form a new domain at every level of the ClusterTopologies (label
  `provisioned-<n>`, the host level their own name), as the nodes of one scale-up of one
  node group share a zone and a placement group; a pod no empty node could hold, a
  template it cannot find, or a cluster without any node to copy makes it `Failed=True`;
- a request of class `check-capacity.autoscaling.x-k8s.io` gets `Provisioned=True`
  (`CapacityIsFound`) when its pods fit the free room of the nodes there are, else
  `Provisioned=False` (`CapacityIsNotFound`), and is looked at again on every change;
- requests of other classes are left alone (a real autoscaler ignores classes it lacks).

No booking, no expiry, no scale-down: nodes once added stay. Every address stays on this
machine (nodes carry none; the kubelet derives a host IP in 127.20.0.0/16 from the name).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable

import yaml

from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.quantity import parse_quantity
from tandem.api.timestamps import rfc3339
from tandem.apiserver import verbs
from tandem.apiserver.server_state import State
from tandem.apiserver.step_thread import StepThread, Stepped
from tandem.errors import ApiError

KIND = "ProvisioningRequest"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CRD_FILE = "autoscaling.x-k8s.io_provisioningrequests.yaml"
Amounts = dict[str, int]  # resource -> milli-units


def provisioning_crd() -> dict[str, Any]:
    """cluster-autoscaler's ProvisioningRequest CRD, as bundled."""
    text = resources.files("tandem.apiserver").joinpath("data", CRD_FILE).read_text(encoding="utf-8")
    crd: dict[str, Any] = yaml.safe_load(text)
    return crd


def install_crd(state: State) -> None:
    """Serve ProvisioningRequests (once; a CRD already there is left as it is)."""
    with state.lock:
        crd = provisioning_crd()
        if state.registry.owner_of_kind(KIND) is None:
            resource = state.registry.for_kind("CustomResourceDefinition")
            assert resource is not None
            verbs.create(state, resource, None, crd, {})
            state.changed()


@dataclass
class Provisioner(Stepped):
    THREAD_NAME = "tandem-apiserver-provisioner"
    OWN_WRITES_WAKE = True  # accepting a request is what makes it due for nodes
    state: State
    delay: float = 0.0  # seconds from a request's acceptance to its nodes
    monotonic: Callable[[], float] = time.monotonic
    _accepted: dict[str, float] = field(default_factory=dict)  # uid -> when it was accepted
    _domains: int = 0  # new domains made so far (one per request provisioned)
    _thread: StepThread | None = None

    def step(self) -> float | None:
        """Answer what is due (with the lock held); seconds until the next thing is due, or None."""
        if self.state.registry.for_kind(KIND) is None:
            return None
        now = self.monotonic()
        due: list[float] = []
        wrote = False
        for request in sorted(self.state.store.list(KIND), key=lambda r: (r["metadata"].get("creationTimestamp") or "", r["metadata"]["name"])):
            meta, spec = request["metadata"], request.get("spec") or {}
            chosen = spec.get("provisioningClassName")
            if chosen not in (ATOMIC_SCALE_UP, CHECK_CAPACITY) or meta.get("deletionTimestamp") or _settled(request):
                continue
            try:
                if _condition(request, "Accepted") is None:
                    self._accepted[meta["uid"]] = now
                    wrote |= self._set(request, "Accepted", "True", "Accepted", "the simulated provisioner will look at it")
                    request = self.state.store.get(KIND, meta["namespace"], meta["name"])
                started = self._accepted.setdefault(meta["uid"], now)
                if now - started < self.delay:
                    due.append(started + self.delay - now)
                    continue
                wrote |= self._answer(request, chosen)
            except ApiError:
                continue  # gone or changed under us: look again next step
        if wrote:
            self.state.changed()
        return min(due) if due else None

    def _answer(self, request: dict[str, Any], chosen: str) -> bool:
        pods, missing = self._pods(request)
        if missing:
            return self._set(request, "Failed", "True", "PodTemplateNotFound", f"PodTemplate {missing} not found in {request['metadata']['namespace']}")
        nodes = [n for n in self.state.store.list("Node") if _ready(n)]
        if chosen == CHECK_CAPACITY:
            room = {n["metadata"]["name"]: _free(n, self.state.store.list("Pod")) for n in sorted(nodes, key=lambda n: n["metadata"]["name"])}
            if _fits(pods, list(room.values())):
                return self._set(request, "Provisioned", "True", "CapacityIsFound", "the pods fit the nodes there are")
            return self._set(request, "Provisioned", "False", "CapacityIsNotFound", "the pods do not fit the free room of the nodes there are")
        if not nodes:
            return self._set(request, "Failed", "True", "NoNodeGroup", "no Ready node to copy as a template")
        model = min(nodes, key=lambda n: n["metadata"]["name"])
        size = _amounts((model.get("status") or {}).get("allocatable") or {})
        bins: list[Amounts] = []
        for pod in pods:
            if not _within(pod, size):
                return self._set(request, "Failed", "True", "CapacityIsNotFound", f"a pod asks for more than a node holds ({_text(pod)})")
            home = next((b for b in bins if _within(pod, _minus(size, b))), None)
            if home is None:
                bins.append({})
                home = bins[-1]
            for name, amount in pod.items():
                home[name] = home.get(name, 0) + amount
        names = self._add_nodes(model, len(bins))
        return self._set(request, "Provisioned", "True", "Provisioned", f"added {len(names)} node{'s' if len(names) != 1 else ''}: {', '.join(names)}")

    def _pods(self, request: dict[str, Any]) -> tuple[list[Amounts], str | None]:
        """Every pod of the request as its requests (largest first), or the template not found."""
        pods: list[Amounts] = []
        for pod_set in (request.get("spec") or {}).get("podSets") or []:
            name = (pod_set.get("podTemplateRef") or {}).get("name", "")
            try:
                template = self.state.store.get("PodTemplate", request["metadata"]["namespace"], name)
            except ApiError:
                return [], name
            wanted = _pod_requests((template.get("template") or {}).get("spec") or {})
            pods += [dict(wanted) for _ in range(int(pod_set.get("count") or 0))]
        return sorted(pods, key=lambda p: sorted(p.items()), reverse=True), None

    def _add_nodes(self, model: dict[str, Any], count: int) -> list[str]:
        self._domains += 1
        domain = f"provisioned-{self._domains}"
        levels = {level.get("nodeLabel") for t in self.state.store.list("ClusterTopology") for level in (t.get("spec") or {}).get("levels") or []}
        taken = {n["metadata"]["name"] for n in self.state.store.list("Node")}
        names: list[str] = []
        serial = 0
        while len(names) < count:
            serial += 1
            name = f"{domain}-{serial}"
            if name in taken:
                continue
            labels = dict(model["metadata"].get("labels") or {})
            for label in levels:
                if isinstance(label, str):
                    labels[label] = name if label == HOSTNAME_LABEL else domain
            labels[HOSTNAME_LABEL] = name
            status = copy.deepcopy(model.get("status") or {})
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {},
                "status": {
                    "allocatable": status.get("allocatable") or {},
                    "capacity": status.get("capacity") or status.get("allocatable") or {},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "added by the simulated provisioner",
                                    "lastTransitionTime": rfc3339(int(self.state.clock()))}],
                    **({"nodeInfo": status["nodeInfo"]} if "nodeInfo" in status else {}),
                },
            }
            self.state.store.create(node)
            names.append(name)
        return names

    def _set(self, request: dict[str, Any], kind: str, status: str, reason: str, message: str) -> bool:
        current = _condition(request, kind)
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (status, reason, message):
            return False
        meta = request["metadata"]
        since = current["lastTransitionTime"] if current is not None and current.get("status") == status else rfc3339(int(self.state.clock()))
        condition = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since,
                     "observedGeneration": meta.get("generation", 1)}
        others = [c for c in (request.get("status") or {}).get("conditions") or [] if c.get("type") != kind]
        self.state.store.patch_status(KIND, meta["namespace"], meta["name"], {"status": {"conditions": [*others, condition]}})
        return True


def _settled(request: dict[str, Any]) -> bool:
    """Answered for good: provisioned (atomic) or failed."""
    chosen = (request.get("spec") or {}).get("provisioningClassName")
    failed = _condition(request, "Failed")
    provisioned = _condition(request, "Provisioned")
    return bool(failed and failed.get("status") == "True") or bool(
        chosen == ATOMIC_SCALE_UP and provisioned and provisioned.get("status") == "True"
    )


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _ready(node: dict[str, Any]) -> bool:
    return not (node.get("spec") or {}).get("unschedulable") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or []
    )


def _amounts(values: dict[str, Any]) -> Amounts:
    out: Amounts = {}
    for name, value in values.items():
        try:
            out[name] = parse_quantity(value)
        except ValueError:
            continue
    return out


def _pod_requests(spec: dict[str, Any]) -> Amounts:
    out: Amounts = {"pods": 1000}
    for container in spec.get("containers") or []:
        for name, amount in _amounts((container.get("resources") or {}).get("requests") or {}).items():
            out[name] = out.get(name, 0) + amount
    return out


def _free(node: dict[str, Any], pods: list[dict[str, Any]]) -> Amounts:
    room = _amounts((node.get("status") or {}).get("allocatable") or {})
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") == node["metadata"]["name"] and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            room = _minus(room, _pod_requests(pod.get("spec") or {}))
    return room


def _minus(room: Amounts, used: Amounts) -> Amounts:
    return {name: amount - used.get(name, 0) for name, amount in room.items()}


def _within(pod: Amounts, room: Amounts) -> bool:
    """Every resource the pod asks for is one the node has, with room for it."""
    return all(amount <= room.get(name, -1) for name, amount in pod.items() if amount > 0)


def _fits(pods: list[Amounts], rooms: list[Amounts]) -> bool:
    rooms = [dict(r) for r in rooms]
    for pod in pods:
        home = next((r for r in rooms if _within(pod, r)), None)
        if home is None:
            return False
        for name, amount in pod.items():
            home[name] = home.get(name, 0) - amount
    return True


def _text(pod: Amounts) -> str:
    return ", ".join(f"{name}={amount / 1000:g}" for name, amount in sorted(pod.items()) if name != "pods")
