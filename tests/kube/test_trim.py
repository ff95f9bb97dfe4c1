"""Trimming keeps what tandem reads: the placement models read a trimmed Pod or Node as they
read the whole one, and the controller's pod helpers see the same phase and node."""

from __future__ import annotations

import copy

from tandem.api.kube import Node, Pod
from tandem.cluster.pods import assigned_node, pod_failed, pod_ready
from tandem.kube.trim import LAST_APPLIED, trim_crd, trim_node, trim_object, trim_pod, trimmer

FAT_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "llama-0-prefill-0-0",
        "namespace": "serving",
        "uid": "u-1",
        "resourceVersion": "77",
        "generation": 1,
        "creationTimestamp": "2025-11-24T16:53:37Z",
        "labels": {"tandem.dev/group": "llama", "tandem.dev/unit": "0"},
        "annotations": {"tandem.dev/admitted": "true", LAST_APPLIED: "{...}"},
        "ownerReferences": [{"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "llama", "uid": "g-1"}],
        "finalizers": ["x"],
        "managedFields": [{"manager": "tandem", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {
        "nodeSelector": {"kubernetes.io/hostname": "n-3"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priority": 10,
        "hostname": "llama-0-prefill-0-0",
        "subdomain": "llama",
        "overhead": {"cpu": "250m"},
        "initContainers": [{"name": "fetch", "image": "busybox", "command": ["sh"], "resources": {"requests": {"cpu": "4"}}}],
        "containers": [
            {
                "name": "engine",
                "image": "vllm",
                "env": [{"name": "TANDEM_ROLE", "value": "prefill"}],
                "volumeMounts": [{"name": "peers", "mountPath": "/etc/tandem"}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "16"}, "requests": {"cpu": "8"}},
            }
        ],
        "volumes": [{"name": "peers", "configMap": {"name": "llama-0-peers"}}],
    },
    "status": {
        "phase": "Running",
        "podIP": "127.10.0.7",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "engine", "ready": True, "restartCount": 0, "image": "vllm"}],
    },
}


def test_a_trimmed_pod_reads_the_same_to_placement_and_the_controller():
    before = copy.deepcopy(FAT_POD)
    trimmed = trim_pod(FAT_POD)
    assert FAT_POD == before, "the server's object is not changed"
    whole, small = Pod.model_validate(FAT_POD), Pod.model_validate(trimmed)
    assert (small.spec, small.status, small.metadata.labels) == (whole.spec, whole.status, whole.metadata.labels)
    assert small.spec.requests() == {"nvidia.com/gpu": 8000, "cpu": 8250}, "milli-units: limits default requests, plus overhead"
    assert (pod_ready(trimmed), pod_failed(trimmed), assigned_node(trimmed)) == (True, False, "n-3")
    assert trimmed["status"] == {"phase": "Running", "podIP": "127.10.0.7", "conditions": [{"type": "Ready", "status": "True"}]}
    meta = trimmed["metadata"]
    assert "managedFields" not in meta and meta["annotations"] == {"tandem.dev/admitted": "true"}
    assert meta["ownerReferences"] == FAT_POD["metadata"]["ownerReferences"] and meta["finalizers"] == ["x"]
    engine = trimmed["spec"]["containers"][0]
    assert engine == {"name": "engine", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "16"}, "requests": {"cpu": "8"}}}
    assert "volumes" not in trimmed["spec"] and trimmed["spec"]["initContainers"] == [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "4"}}}
    ]
    assert (trimmed["spec"]["hostname"], trimmed["spec"]["subdomain"], trimmed["spec"]["priority"]) == ("llama-0-prefill-0-0", "llama", 10)


def test_a_pod_without_status_stays_without_one():
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    assert trim_pod(pod) == {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}


def test_a_trimmed_node_reads_the_same_and_loses_its_image_list():
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n-3", "labels": {"network.example.com/rack": "r1"}, "managedFields": [{}]},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}],
                   "images": [{"names": ["vllm"], "sizeBytes": 1}]},
    }
    trimmed = trim_node(node)
    assert Node.model_validate(trimmed) == Node.model_validate(node)
    assert "images" not in trimmed["status"] and "managedFields" not in trimmed["metadata"] and "images" in node["status"]


def test_other_kinds_keep_everything_but_managed_fields():
    group = {"kind": "InferenceGroup", "metadata": {"name": "g", "managedFields": [{}], "annotations": {LAST_APPLIED: "x", "a": "b"}},
             "spec": {"replicas": 2}, "status": {"observedGeneration": 1}}
    assert trim_object(group) == {"kind": "InferenceGroup", "metadata": {"name": "g", "annotations": {"a": "b"}},
                                  "spec": {"replicas": 2}, "status": {"observedGeneration": 1}}


def test_a_crd_keeps_which_kind_it_serves_and_loses_its_schemas():
    """The CRD watch only needs to know a kind is (or is no longer) served: schemas, often
    hundreds of kilobytes each, stay out of the cache."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.volcano.sh", "resourceVersion": "9", "managedFields": [{}]},
        "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced", "names": {"kind": "PodGroup", "plural": "podgroups"},
                 "conversion": {"strategy": "None"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}},
                               "subresources": {"status": {}}}]},
        "status": {"conditions": [{"type": "Established", "status": "True"}], "storedVersions": ["v1beta1"]},
    }
    assert trimmer("CustomResourceDefinition") is trim_crd
    assert trim_crd(crd) == {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.volcano.sh", "resourceVersion": "9"},
        "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced", "names": {"kind": "PodGroup", "plural": "podgroups"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": True}]},
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }
    assert "schema" in crd["spec"]["versions"][0], "the server's object is not changed"


def test_a_groups_pod_keeps_its_named_ports_for_the_peers_file_and_other_pods_none():
    ports = [{"name": "http", "containerPort": 30000, "protocol": "TCP"}, {"containerPort": 9400}, {"name": "bootstrap", "containerPort": 8998}]
    pod = {"metadata": {"name": "p", "labels": {"tandem.dev/group": "llama"}}, "spec": {"containers": [{"name": "e", "ports": ports}]}}
    assert trim_pod(pod)["spec"]["containers"][0]["ports"] == [{"name": "http", "containerPort": 30000}, {"name": "bootstrap", "containerPort": 8998}]
    other = {"metadata": {"name": "exporter", "labels": {"app": "node-exporter"}}, "spec": {"containers": [{"name": "e", "ports": ports}]}}
    assert "ports" not in trim_pod(other)["spec"]["containers"][0], "a cluster's other pods are most of its pods: their ports are not kept"


def test_an_hpa_or_scaledobject_keeps_only_what_it_scales_and_reads_the_same_to_the_rule():
    from tandem.cluster.unit_autoscalers import targeted_group

    ref = {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "name": "llama"}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "units", "namespace": "serving", "resourceVersion": "9", "managedFields": [{"manager": "kubectl"}]},
           "spec": {"scaleTargetRef": ref, "minReplicas": 1, "maxReplicas": 4, "metrics": [{"type": "Resource"}], "behavior": {}},
           "status": {"currentReplicas": 2, "conditions": [{"type": "AbleToScale"}]}}
    scaled = {**hpa, "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "spec": {"scaleTargetRef": ref, "triggers": [{"type": "kafka"}]}}
    for obj in (hpa, scaled):
        trimmed = trimmer(obj["kind"])(obj)
        assert trimmed == {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                           "metadata": {"name": "units", "namespace": "serving", "resourceVersion": "9"}, "spec": {"scaleTargetRef": ref}}
        assert targeted_group(trimmed) == targeted_group(obj) == "llama"


KUBELET_STATUS = {
    "phase": "Running", "podIP": "127.10.0.7", "podIPs": [{"ip": "127.10.0.7"}], "hostIP": "127.20.0.3", "startTime": "2026-11-28T03:43:04Z",
    "conditions": [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-11-28T03:43:04Z"},
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-28T03:43:04Z"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": "2026-11-28T03:43:04Z"},
        {"type": "ContainersReady", "status": "False", "lastTransitionTime": "2026-11-28T03:43:04Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-28T03:43:01Z"},
    ],
}


def test_a_pod_keeps_the_conditions_tandem_reads_and_not_the_kubelets_others():
    pod = {**FAT_POD, "status": KUBELET_STATUS}
    trimmed = trim_pod(pod)
    assert [c["type"] for c in trimmed["status"]["conditions"]] == ["Ready", "PodScheduled"]
    assert trimmed["status"]["conditions"] == [KUBELET_STATUS["conditions"][2], KUBELET_STATUS["conditions"][4]], "kept whole"
    assert trimmed["status"] == {"phase": "Running", "podIP": "127.10.0.7", "hostIP": "127.20.0.3",
                                 "conditions": trimmed["status"]["conditions"]}
    assert not pod_ready(trimmed) and pod_ready({**pod, "status": {**KUBELET_STATUS, "conditions": [{"type": "Ready", "status": "True"}]}})
    assert len(pod["status"]["conditions"]) == 5, "the server's object is not changed"


def test_pods_decoded_apart_share_their_repeated_strings_and_read_the_same():
    """Each pod comes off the wire with its own copy of every string; trimmed, the strings
    most pods repeat (namespace, labels, owner, node, image, quantities, condition words)
    are one object, and the pod reads exactly as before."""
    import json

    wire = json.dumps({**FAT_POD, "status": KUBELET_STATUS})
    first, second = (trim_pod(json.loads(wire)) for _ in range(2))
    assert first == second == trim_pod({**FAT_POD, "status": KUBELET_STATUS})
    same = [
        lambda p: p["metadata"]["namespace"],
        lambda p: p["metadata"]["labels"]["tandem.dev/group"],
        lambda p: p["metadata"]["ownerReferences"][0]["name"],
        lambda p: p["spec"]["nodeSelector"]["kubernetes.io/hostname"],
        lambda p: p["spec"]["containers"][0]["image"],
        lambda p: p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        lambda p: p["status"]["conditions"][0]["reason"],
        lambda p: p["status"]["hostIP"],
    ]
    assert all(read(first) is read(second) for read in same)
    node = json.dumps({"metadata": {"name": "n-3", "labels": {"network.example.com/rack": "r1"}}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    a, b = (trim_node(json.loads(node)) for _ in range(2))
    assert a == b and a["metadata"]["labels"]["network.example.com/rack"] is b["metadata"]["labels"]["network.example.com/rack"]


def test_one_informers_pods_share_their_equal_parts_and_read_as_trimmed_alone():
    """An informer's trim keeps the parts many pods hold equal (tolerations, containers,
    conditions, owner references) once; each pod reads exactly as trimmed on its own, and
    a memo that fills up starts afresh without changing what any pod reads."""
    import json

    from tandem.kube.trim import Shared

    def pod(name, node, image="vllm"):
        body = copy.deepcopy({**FAT_POD, "status": KUBELET_STATUS})
        body["metadata"]["name"] = name
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        body["spec"]["containers"][0]["image"] = image
        return json.loads(json.dumps(body))  # as decoded off the wire: every part its own object

    trim = trimmer("Pod")
    first, second, other = trim(pod("a", "n-1")), trim(pod("b", "n-2")), trim(pod("c", "n-3", image="sglang"))
    assert first == trim_pod(pod("a", "n-1")) and second == trim_pod(pod("b", "n-2"))
    for field in ("tolerations", "containers"):
        assert first["spec"][field] is second["spec"][field]
    assert first["status"]["conditions"] is second["status"]["conditions"]
    assert first["metadata"]["ownerReferences"] is second["metadata"]["ownerReferences"]
    assert other["spec"]["containers"] is not first["spec"]["containers"] and other["spec"]["containers"][0]["image"] == "sglang"
    assert first["spec"]["nodeSelector"] != second["spec"]["nodeSelector"]

    small = Shared(limit=2)
    pods = [pod(f"p{i}", f"n-{i % 3}", image=("vllm", "sglang", "tgi")[i % 3]) for i in range(12)]
    assert [trim_pod(p, small) for p in pods] == [trim_pod(p) for p in pods], "a memo starting afresh changes no pod"
