"""One pass of every stand-in whose kinds the world serves, in a fixed order, sharing the nodes.

`schedule` is what both worlds call: the pods bound so far hold their requests, each
scheduler then places its gangs against what the ones before it took. `kube_scheduler_binds`
says which pods the worlds' kube-scheduler stand-in (first fit, pod by pod) may take.
"""

from __future__ import annotations

from tandem.backends.delegated_kinds import DELEGATED_BACKENDS
from tandem.schedulers import kai, koordinator, kueue, volcano, workload_api
from tandem.schedulers.fit import NodeIndex, add, first_fit, pod_requests, used_by
from tandem.schedulers.gang import Pod, pod_key
from tandem.schedulers.shared import DEFAULT_SCHEDULER, Bind, Decision, World, in_order, pod_conditions, scheduler_of, waiting

# The kind whose being served makes a backend's scheduler run (its gang kind).
RUNS_ON = {"volcano": "PodGroup", "kai": "PodGroup", "koordinator": "PodGroup", "kueue": "Workload", "workload-api": "PodGroup"}


def schedule(world: World) -> Decision:
    """What the served schedulers do to `world` in one pass."""
    nodes = NodeIndex(world.nodes)
    used = used_by(world.pods)
    decision = Decision()
    for backend in DELEGATED_BACKENDS:
        if backend not in world.gangs:
            continue
        objects = world.gangs[backend]
        if backend == "volcano":
            decision += volcano.decide(objects, world.pods, nodes, used, world.now)
        elif backend == "kai":
            decision += kai.decide(objects, world.pods, nodes, used, world.now)
        elif backend == "koordinator":
            decision += koordinator.decide(objects, world.pods, nodes, used, world.now)
        elif backend == "kueue":
            decision += kueue.decide(objects, world.pods, nodes, used, world.now, world.local_queues)
        elif backend == "workload-api":
            pod_groups = [o for o in objects if o.get("kind") == "PodGroup"]
            composites = [o for o in objects if o.get("kind") == "CompositePodGroup"]
            decision += workload_api.decide(pod_groups, composites, world.pods, nodes, used, world.now)
    return decision


def kube_scheduler_binds(pod: Pod, served: frozenset[str] | set[str]) -> bool:
    """Whether kube-scheduler's plain first fit takes `pod`: its scheduler is the default one
    (as kube-scheduler only takes pods naming it), and it is not in a Workload API gang
    while that API is served (those are placed whole by `workload_api`). Gated pods (Kueue's
    admission gate, tandem's) are left for when their gates are gone."""
    if scheduler_of(pod) != DEFAULT_SCHEDULER:
        return False
    return not ("workload-api" in served and workload_api.group_of(pod))


def first_fit_pass(world: World, served: frozenset[str] | set[str]) -> Decision:
    """kube-scheduler's stand-in over `world`: each waiting pod it takes (`kube_scheduler_binds`)
    bound to the first node that fits, in pod order, or PodScheduled False with the reason."""
    nodes = NodeIndex(world.nodes)
    used = used_by(world.pods)
    binds, waits = [], []
    for pod in in_order(p for p in world.pods if waiting(p) and kube_scheduler_binds(p, served)):
        wanted = pod_requests(pod)
        node, why = first_fit(pod, nodes, used, wanted)
        if node is None:
            waits.append((pod, "Unschedulable", why))
            continue
        add(used.setdefault(node, {}), wanted)
        binds.append(Bind(*pod_key(pod), node))
    return Decision(binds=tuple(binds), conditions=pod_conditions(waits))
