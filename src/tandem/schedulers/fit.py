"""Whether a pod fits a node, as kube-scheduler's filters decide it: shared by every stand-in.

A node fits when it is Ready, schedulable, matches the pod's whole `nodeSelector` and its
required node affinity, carries no NoSchedule/NoExecute taint the pod does not tolerate,
and has room for the pod's requests (every resource its `allocatable` lists). A pod that
fits nowhere gets kube-scheduler's message: `0/N nodes are available: <count> <reason>, ...`
(reasons as its NodeAffinity, NodeUnschedulable, TaintToleration and NodeResourcesFit
filters word them, sorted). First fit, by node name: no scoring.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Sequence

from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.quantity import parse_quantity

Amounts = dict[str, int]  # resource name -> milli-units

NODE_AFFINITY = "didn't match Pod's node affinity/selector"
NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED = "node(s) had untolerated taint"


def pod_requests(pod: Mapping[str, Any]) -> Amounts:
    """The pod's requests (its containers' summed), plus one `pods` slot."""
    out: Amounts = defaultdict(int)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            try:
                out[name] += parse_quantity(value)
            except ValueError:
                continue
    out["pods"] += 1000
    return dict(out)


def add(total: Amounts, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def holds_capacity(pod: Mapping[str, Any]) -> bool:
    """A pod bound to a node holds its requests there until it finishes."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def used_by(pods: Sequence[Mapping[str, Any]]) -> dict[str, Amounts]:
    """What the bound, unfinished pods hold, per node."""
    used: dict[str, Amounts] = defaultdict(dict)
    for pod in pods:
        if holds_capacity(pod):
            add(used[pod["spec"]["nodeName"]], pod_requests(pod))
    return used


class NodeIndex:
    """The nodes by name, and by host name (the selector tandem writes), for one pass."""

    def __init__(self, nodes: Sequence[Mapping[str, Any]]):
        self.ordered = sorted(nodes, key=lambda n: n["metadata"]["name"])
        self.by_host: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for node in self.ordered:
            host = (node["metadata"].get("labels") or {}).get(HOSTNAME_LABEL)
            if host is not None:
                self.by_host[host].append(node)


def first_fit(pod: Mapping[str, Any], nodes: NodeIndex, used: Mapping[str, Amounts], wanted: Amounts) -> tuple[str | None, str]:
    """The first node by name the pod may go to, or None and kube-scheduler's message why not."""
    node, reasons = fit(pod, nodes, used, wanted)
    return node, "" if node is not None else unavailable_message(len(nodes.ordered), reasons)


def fit(pod: Mapping[str, Any], nodes: NodeIndex, used: Mapping[str, Amounts], wanted: Amounts) -> tuple[str | None, dict[str, int]]:
    """The first node by name the pod may go to, or None and how many nodes failed it for each reason."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    reasons: dict[str, int] = defaultdict(int)
    candidates = nodes.ordered
    if HOSTNAME_LABEL in selector:  # only nodes of that host name can match: the others are counted as not matching
        candidates = nodes.by_host.get(selector[HOSTNAME_LABEL], [])
        if len(nodes.ordered) > len(candidates):
            reasons[NODE_AFFINITY] += len(nodes.ordered) - len(candidates)
    terms = required_node_terms(pod)
    for node in candidates:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()) or (terms is not None and not any(term_matches(t, labels, name) for t in terms)):
            reasons[NODE_AFFINITY] += 1
        elif not node_ready(node):
            reasons[NOT_READY] += 1
        elif (node.get("spec") or {}).get("unschedulable"):
            reasons[UNSCHEDULABLE] += 1
        elif not tolerated(node, spec.get("tolerations") or []):
            reasons[UNTOLERATED] += 1
        else:
            short = shortage(wanted, used.get(name, {}), (node.get("status") or {}).get("allocatable") or {})
            if short is None:
                return name, {}
            reasons[f"Insufficient {short}"] += 1
    return None, dict(reasons)


def unavailable_message(count: int, reasons: Mapping[str, int], word: str = "available") -> str:
    """kube-scheduler's FitError text: `0/N nodes are available: 1 Insufficient cpu, 2 ...`
    (counts sorted as text, as Volcano sorts them; Volcano says `unavailable`)."""
    detail = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    return f"0/{count} nodes are {word}" + (f": {detail}." if detail else ".")


def shortage(wanted: Mapping[str, int], used: Mapping[str, int], allocatable: Mapping[str, Any]) -> str | None:
    """The first resource (by name) the node lacks for `wanted`, or None when it fits."""
    for name, amount in sorted(wanted.items()):
        if name not in allocatable:
            if amount > 0 and name != "pods":
                return name
            continue
        try:
            capacity = parse_quantity(allocatable[name])
        except ValueError:
            continue
        if used.get(name, 0) + amount > capacity:
            return name
    return None


def node_ready(node: Mapping[str, Any]) -> bool:
    return all(c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready")


def tolerated(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return False
    return True


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' `Toleration.ToleratesTaint`: effect (empty: any), key (empty with
    Exists: any), then Exists or an equal value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return (toleration.get("operator") or "Equal") == "Equal" and bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def required_node_terms(pod: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The pod's required node selector terms (ORed), or None when it states none."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    return list(terms) if terms else None


def term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """A node selector term against a node: its `matchExpressions` on the labels and its
    `matchFields` on `metadata.name`, all must hold. An empty term matches nothing, as in Kubernetes."""
    expressions = [(e, labels) for e in term.get("matchExpressions") or []]
    expressions += [(e, {"metadata.name": name}) for e in term.get("matchFields") or []]
    if not expressions:
        return False
    for expression, values_of in expressions:
        key, operator, values = expression.get("key", ""), expression.get("operator"), expression.get("values") or []
        labels = values_of
        present = key in labels
        if operator == "In":
            ok = present and labels[key] in values
        elif operator == "NotIn":
            ok = not present or labels[key] not in values
        elif operator == "Exists":
            ok = present
        elif operator == "DoesNotExist":
            ok = not present
        elif operator in ("Gt", "Lt"):
            try:
                ok = present and (int(labels[key]) > int(values[0]) if operator == "Gt" else int(labels[key]) < int(values[0]))
            except (ValueError, IndexError):
                ok = False
        else:
            ok = False
        if not ok:
            return False
    return True
