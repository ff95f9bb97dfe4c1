"""The local API server answers delegated groups: kube-scheduler's stand-in takes only its own
pods, and each scheduler whose gang CRD is installed places its gangs whole and writes their status."""

from __future__ import annotations

import pytest
import yaml

from apiserver.helpers import NS, Client, Clock, pod, small_cluster
from backends.schemas import SCHEMAS, SKIP_REASON
from tandem.apiserver.kinds import Resource
from tandem.apiserver.kubelets import Kubelet
from tandem.apiserver.server import ApiServer
from tandem.backends import kueue, volcano
from tandem.schedulers.kueue import ADMISSION_GATE

PODS = f"/api/v1/namespaces/{NS}/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
needs_schemas = pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)


@pytest.fixture
def world():
    clock = Clock()
    with ApiServer(objects=small_cluster(racks=1, hosts=2, gpus=8), kubelet=False, clock=clock) as server:
        kubelet = Kubelet(server.state, bind_latency=1.0, monotonic=clock)

        def step() -> float | None:
            with server.state.lock:
                return kubelet.step()

        yield Client(server.url), clock, step, server.state


def _install(client: Client, path: str) -> None:
    reply = client.post(CRDS, yaml.safe_load((SCHEMAS / path).read_text(encoding="utf-8")))
    assert reply.code == 201, reply.body


def _bound(client: Client, *names: str) -> dict[str, str | None]:
    return {name: client.get(f"{PODS}/{name}").body["spec"].get("nodeName") for name in names}


def test_kube_schedulers_stand_in_binds_only_pods_naming_the_default_scheduler(world):
    client, clock, step, _ = world
    for name, scheduler in (("mine", None), ("named", "default-scheduler"), ("volcanos", "volcano"), ("kais", "kai-scheduler")):
        body = pod(name, gpus=4)
        if scheduler:
            body["spec"]["schedulerName"] = scheduler
        client.post(PODS, body)
    step()
    clock.now += 1.0
    step()
    bound = _bound(client, "mine", "named", "volcanos", "kais")
    assert bound["mine"] and bound["named"] and bound["volcanos"] is None and bound["kais"] is None
    conditions = client.get(f"{PODS}/volcanos").body.get("status", {}).get("conditions") or []
    assert not [c for c in conditions if c["type"] == "PodScheduled"], "no scheduler serves it here: nobody says anything"


@needs_schemas
def test_volcano_places_a_pod_group_whole_once_its_crd_is_installed(world):
    client, clock, step, _ = world
    _install(client, "volcano/scheduling.volcano.sh_podgroups.yaml")
    groups = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"
    assert client.post(groups, {"apiVersion": volcano.API_VERSION, "kind": "PodGroup", "metadata": {"name": "g-0"}, "spec": {"minMember": 3}}).code == 201
    for i in range(3):
        body = pod(f"v-{i}", gpus=8)
        body["spec"]["schedulerName"] = "volcano"
        body["metadata"]["annotations"] = {volcano.GROUP_ANNOTATION: "g-0"}
        client.post(PODS, body)
    step()
    assert set(_bound(client, "v-0", "v-1", "v-2").values()) == {None}, "two nodes of 8 GPUs hold two of the three"
    group = client.get(f"{groups}/g-0").body
    assert group["status"]["phase"] == "Inqueue"
    assert group["status"]["conditions"][0]["message"].startswith("1/3 tasks in gang unschedulable: pod group is not ready")
    client.post("/api/v1/nodes", {**small_cluster(racks=1, hosts=3, gpus=8)[3]})
    step()
    assert None not in _bound(client, "v-0", "v-1", "v-2").values()
    assert client.get(f"{groups}/g-0").body["status"]["phase"] == "Running"
    assert client.get(f"{PODS}/v-0").body["status"]["phase"] == "Running", "the kubelet starts what the stand-in bound"


@needs_schemas
def test_kueue_admits_a_workload_lifts_its_gate_and_kube_scheduler_binds_after(world):
    client, clock, step, _ = world
    _install(client, "kueue/kueue.x-k8s.io_workloads.yaml")
    workloads = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
    podset = {"name": "decode", "count": 2, "template": {"spec": {"containers": [{"name": "engine", "image": "vllm"}]}}}
    reply = client.post(workloads, {"apiVersion": kueue.API_VERSION, "kind": "Workload", "metadata": {"name": "g-0"},
                                    "spec": {"queueName": "default", "podSets": [podset]}})
    assert reply.code == 201, reply.body
    for i in range(2):
        body = pod(f"q-{i}", gpus=8)
        body["metadata"]["labels"] = {kueue.QUEUE_LABEL: "default", kueue.GROUP_LABEL: "g-0"}
        body["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
        client.post(PODS, body)
    step()
    admitted = client.get(f"{workloads}/g-0").body
    assert {c["type"]: c["status"] for c in admitted["status"]["conditions"]} == {"QuotaReserved": "True", "Admitted": "True"}
    assert not client.get(f"{PODS}/q-0").body["spec"].get("schedulingGates"), "admitted: Kueue lifted its gate"
    clock.now += 1.0
    step()
    assert None not in _bound(client, "q-0", "q-1").values(), "kube-scheduler's stand-in binds them after its latency"


def test_a_served_workload_api_gang_is_placed_whole_not_pod_by_pod(world):
    client, clock, step, server_state = world
    with server_state.lock:
        server_state.registry.add(Resource("scheduling.k8s.io", "v1alpha3", "podgroups", "PodGroup", True, "podgroup", status=True))
        server_state.store.create({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "g", "namespace": NS},
                                   "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})
    for i in range(3):
        body = pod(f"w-{i}", gpus=8)
        body["spec"]["schedulingGroup"] = {"podGroupName": "g"}
        client.post(PODS, body)
    step()
    clock.now += 1.0
    step()
    assert set(_bound(client, "w-0", "w-1", "w-2").values()) == {None}, "kube-scheduler's first fit would have bound two of three"
    with server_state.lock:
        (group,) = server_state.store.list("PodGroup")
    assert group["status"]["conditions"][0]["type"] == "PodGroupInitiallyScheduled"
