"""Placing a gang: its minimum bound together or not at all, the rest as it fits.

Every scheduler stand-in turns its gang objects into `Gang`s (which pods, which minimums)
and hands them to `place` one by one, sharing what the nodes hold. `place` tries every
pending pod of the gang by first fit (`fit.py`) on a trial copy of the nodes' use; when the
pods bound so far plus the trial ones meet every minimum of the gang, the trial is kept
(all its pods bound in one pass), else it is dropped and nothing is bound: the all-or-nothing
allocation Volcano's allocate action does with a statement it commits or discards
(volcano-sh/volcano pkg/scheduler/actions/allocate/allocate.go), KAI with its
allocation statement, Koordinator's coscheduling Permit and kube-scheduler's
GangScheduling plugin (KEP-4671). A gang whose minimums are already met (running) takes its
further pods one by one as they fit.

Not imitated: preemption, reclaim, queues' shares, pod (anti-)affinity and topology
constraints (network tiers, required levels); the pending pods are tried in their order
(creation, then name), with no search over which extras to leave out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tandem.schedulers.fit import Amounts, NodeIndex, fit, pod_requests

Pod = Mapping[str, Any]
PodKey = tuple[str, str]  # namespace, name


def pod_key(pod: Pod) -> PodKey:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


@dataclass(frozen=True)
class Need:
    """At least `minimum` of `members` bound (a task's or a sub-group's minimum)."""

    name: str
    members: frozenset[PodKey]
    minimum: int

    def met(self, bound: set[PodKey]) -> bool:
        return len(self.members & bound) >= self.minimum


@dataclass(frozen=True)
class WholeGroups:
    """At least `minimum` of `groups` bound complete, each needing `size` pods (Volcano's
    subGroupPolicy `minSubGroups`)."""

    name: str
    groups: tuple[frozenset[PodKey], ...]
    size: int
    minimum: int

    def met(self, bound: set[PodKey]) -> bool:
        return sum(1 for group in self.groups if len(group & bound) >= self.size) >= self.minimum


@dataclass(frozen=True)
class AtLeast:
    """At least `minimum` of `children` met: a gang of gangs (the Workload API's
    CompositePodGroup `minGroupCount`); a child with minimum 0 is always met."""

    name: str
    children: tuple["Need | WholeGroups | AtLeast", ...]
    minimum: int

    def met(self, bound: set[PodKey]) -> bool:
        return sum(1 for child in self.children if child.met(bound)) >= self.minimum


@dataclass(frozen=True)
class Gang:
    """One scheduling unit of a scheduler: pods that must start together up to `minimum`."""

    namespace: str
    name: str
    pods: tuple[Pod, ...]  # every live pod of the gang (bound or not), in order
    pending: tuple[Pod, ...]  # those the scheduler may bind now (unbound, not gated), in order
    minimum: int
    needs: tuple[Need | WholeGroups | AtLeast, ...] = ()
    blocked: str = ""  # why the gang cannot be tried at all (a member PodGroup missing, ...)

    @property
    def bound(self) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if (p.get("spec") or {}).get("nodeName"))

    def met(self, bound: set[PodKey]) -> bool:
        return len(bound) >= self.minimum and all(need.met(bound) for need in self.needs)


@dataclass(frozen=True)
class Placement:
    """What `place` decided for one gang."""

    binds: tuple[tuple[Pod, str], ...]  # pod -> node, kept (empty when the gang waits)
    trial: tuple[tuple[Pod, str], ...]  # where pods could have gone, when the trial was dropped
    errors: Mapping[PodKey, Mapping[str, int]] = field(default_factory=dict)  # pods that fit nowhere: reason counts
    ready: bool = False  # the gang's minimums are met once `binds` are done


def place(gang: Gang, nodes: NodeIndex, used: dict[str, Amounts]) -> Placement:
    """Bind `gang`'s pending pods all-or-nothing against `used` (updated in place when kept)."""
    bound = {pod_key(p) for p in gang.bound}
    if gang.blocked:
        return Placement((), (), {}, gang.met(bound))
    trial: dict[str, Amounts] = {}
    allocated: list[tuple[Pod, str]] = []
    errors: dict[PodKey, Mapping[str, int]] = {}
    for pod in gang.pending:
        wanted = pod_requests(pod)
        node, reasons = fit(pod, nodes, _Overlay(used, trial), wanted)
        if node is None:
            errors[pod_key(pod)] = reasons
            continue
        trial[node] = _plus(trial.get(node, used.get(node, {})), wanted)
        allocated.append((pod, node))
        bound.add(pod_key(pod))
    if gang.met(bound):
        used.update(trial)
        return Placement(tuple(allocated), (), errors, True)
    return Placement((), tuple(allocated), errors, False)


def _plus(amounts: Mapping[str, int], more: Mapping[str, int]) -> Amounts:
    out = dict(amounts)
    for name, amount in more.items():
        out[name] = out.get(name, 0) + amount
    return out


class _Overlay(Mapping[str, Amounts]):
    """`used` with a trial's nodes on top, without copying `used`."""

    def __init__(self, base: Mapping[str, Amounts], top: Mapping[str, Amounts]):
        self._base, self._top = base, top

    def __getitem__(self, name: str) -> Amounts:
        return self._top[name] if name in self._top else self._base[name]

    def __iter__(self) -> Any:
        return iter(set(self._base) | set(self._top))

    def __len__(self) -> int:
        return len(set(self._base) | set(self._top))

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._top:
            return self._top[name]
        return self._base.get(name, default)
