"""`prepare_pod`: what each scheduler needs on every pod, added without touching the pod given."""

from __future__ import annotations

import copy

from support.builders import group, role
from tandem.api.naming import GATE
from tandem.api.loading import Inputs
from tandem.backends.base import BackendOptions
from tandem.backends.pods import unit_pods
from tandem.backends.registry import get_backend

from backends.variants import typed


def _pods(small_cluster: Inputs):
    raw = group("pd", [role("prefill", 1, 1, gpus=1), role("decode", 2, 1, gpus=1, pods=2, required="host")], required="rack", priority=3)
    raw["spec"]["affinity"] = [{"from": "prefill", "to": "decode", "level": "host", "mode": "Preferred"}]
    grp = typed(raw)
    return grp, unit_pods(grp, 1, raw), small_cluster.topologies["default"]


def test_each_scheduler_gets_its_name_membership_and_priority(small_cluster: Inputs) -> None:
    grp, pods, topology = _pods(small_cluster)
    prefill, decode_worker = pods[0], pods[-1]
    before = copy.deepcopy(pods)

    def prepared(name: str, pod: dict, **options: str) -> dict:
        return get_backend(name, BackendOptions(**options)).prepare_pod(pod, grp, topology)

    native = prepared("native", prefill)
    assert native["spec"]["schedulingGates"] == [{"name": GATE}] and "schedulerName" not in native["spec"]
    assert prepared("native", native)["spec"]["schedulingGates"] == [{"name": GATE}]  # once

    volcano = prepared("volcano", decode_worker)
    assert volcano["spec"]["schedulerName"] == "volcano" and volcano["spec"]["priorityClassName"] == "tandem-priority-3"
    assert volcano["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "pd-1", "volcano.sh/task-spec": "decode"}

    koordinator = prepared("koordinator", decode_worker)
    assert koordinator["spec"]["schedulerName"] == "koord-scheduler"
    assert koordinator["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] == "pd-1-decode"

    kai = prepared("kai", decode_worker, queue="team-a")
    assert kai["spec"]["schedulerName"] == "kai-scheduler"
    assert kai["metadata"]["annotations"] == {"pod-group-name": "pd-1"}
    assert kai["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "decode.1"
    assert kai["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"

    # decode replica 1 is beyond decode's minimum (1): its own pod group, a prebuilt Workload of
    # its two pods, ranked from 0; Kueue's admission gate holds it until Kueue admits that group.
    kueue = prepared("kueue", decode_worker)
    assert "schedulerName" not in kueue["spec"]
    assert kueue["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "pd-1-decode-1"
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == "pd-1-decode-1"
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    annotations = kueue["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == "network.tandem.dev/rack"
    assert "kueue.x-k8s.io/podset-group-name" not in annotations  # one PodSet: nothing to group
    assert annotations["kueue.x-k8s.io/podset-slice-required-topology"] == "kubernetes.io/hostname"
    assert annotations["kueue.x-k8s.io/podset-slice-size"] == "2"
    assert annotations["kueue.x-k8s.io/role-hash"] == "decode"
    assert annotations["kueue.x-k8s.io/pod-group-pod-index-label"] == "tandem.dev/podset-index"
    assert kueue["metadata"]["labels"]["tandem.dev/podset-index"] == "1"
    # The minimums (prefill 0, decode 0) are the base pod group pd-1 of 3 pods: a leader and
    # workers joined by podSetGroupName, numbered as one sequence (the one prefill pod first).
    base = {f"{pod['metadata']['labels']['tandem.dev/role']}-{pod['metadata']['labels']['tandem.dev/replica']}-{pod['metadata']['labels']['tandem.dev/pod-index']}": prepared("kueue", pod) for pod in pods[:3]}
    assert {name: pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for name, pod in base.items()} == dict.fromkeys(base, "pd-1")
    assert {name: pod["metadata"]["labels"]["tandem.dev/podset-index"] for name, pod in base.items()} == {"prefill-0-0": "0", "decode-0-0": "1", "decode-0-1": "2"}
    assert all(pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3" for pod in base.values())
    assert all(pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-group-name"] == "pd-1" for pod in base.values())
    assert prepared("kueue", kueue)["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]  # once

    assert prepared("workload-api", decode_worker)["spec"]["schedulingGroup"] == {"podGroupName": "pd-1-decode-1"}
    assert prepared("workload-api", decode_worker, workload_api_version="v1beta1")["spec"]["schedulingGroup"] == {"podGroupName": "pd-1-decode"}
    assert prepared("workload-api", decode_worker, workload_api_version="v1alpha1")["spec"]["workloadRef"] == {
        "name": "pd",
        "podGroup": "decode",
        "podGroupReplicaKey": "1",
    }
    assert pods == before


def test_preferred_affinity_becomes_inter_pod_affinity_on_the_from_role(small_cluster: Inputs) -> None:
    grp, pods, topology = _pods(small_cluster)
    volcano = get_backend("volcano")
    (term,) = volcano.prepare_pod(pods[0], grp, topology)["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": {"tandem.dev/group": "pd", "tandem.dev/role": "decode", "tandem.dev/unit": "1"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in volcano.prepare_pod(pods[-1], grp, topology)["spec"]["affinity"]["podAffinity"]  # decode is not a 'from' role
    assert "affinity" not in get_backend("kueue").prepare_pod(pods[0], grp, topology)["spec"]


def test_volcano_keeps_a_host_pack_by_required_pod_affinity_among_the_replica(small_cluster: Inputs) -> None:
    """A host is no Volcano tier: each decode replica (2 pods, required host) is held on one host by
    required pod affinity towards the pods of that replica only; prefill (one pod) gets none."""
    grp, pods, topology = _pods(small_cluster)
    volcano = get_backend("volcano")
    for pod in pods:
        prepared = volcano.prepare_pod(pod, grp, topology)
        labels = pod["metadata"]["labels"]
        required = prepared["spec"].get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
        if labels["tandem.dev/role"] == "prefill":
            assert required == []
            continue
        assert required == [
            {
                "labelSelector": {
                    "matchLabels": {
                        "tandem.dev/group": "pd",
                        "tandem.dev/replica": labels["tandem.dev/replica"],
                        "tandem.dev/role": "decode",
                        "tandem.dev/unit": "1",
                    }
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    (podgroup,) = volcano.group_objects(grp, topology)
    (policy,) = podgroup["spec"]["subGroupPolicy"]
    assert policy["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}  # the rack, which holds any host
    assert podgroup["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}  # unit: rack
