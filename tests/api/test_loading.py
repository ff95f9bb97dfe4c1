"""Loading what users actually hand tandem: kubectl output, multi-document YAML, JSON.

The Node and Pod texts below are shaped like `kubectl get nodes -o yaml` and
`kubectl get pods -A -o yaml` print them, with the metadata, managedFields and status
fields tandem does not read and must ignore.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tandem.api.kube import Node, Pod
from tandem.api.loading import load_texts
from tandem.errors import InputError
from tandem.topology import ClusterSnapshot

GI = 2**30

KUBECTL_NODES = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      alpha.kubernetes.io/provided-node-ip: 127.0.12.34
      node.alpha.kubernetes.io/ttl: "0"
      volumes.kubernetes.io/controller-managed-attach-detach: "true"
    creationTimestamp: "2025-03-04T09:12:44Z"
    labels:
      beta.kubernetes.io/arch: amd64
      beta.kubernetes.io/instance-type: p5.48xlarge
      beta.kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: gpu-node-0
      kubernetes.io/os: linux
      network.example.com/block: block-a
      network.example.com/rack: rack-a1
      node.kubernetes.io/instance-type: p5.48xlarge
      nvidia.com/gpu.count: "8"
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      topology.kubernetes.io/region: us-east-2
      topology.kubernetes.io/zone: us-east-2a
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:annotations:
            .: {}
            f:node.alpha.kubernetes.io/ttl: {}
          f:labels:
            .: {}
            f:kubernetes.io/hostname: {}
        f:status:
          f:conditions:
            k:{"type":"Ready"}:
              .: {}
              f:lastHeartbeatTime: {}
      manager: kubelet
      operation: Update
      subresource: status
      time: "2025-05-01T10:00:00Z"
    name: gpu-node-0
    resourceVersion: "918273645"
    uid: 5d0c2f0e-8f1a-4c3e-9f51-0b8d7f2a6c11
  spec:
    podCIDR: 127.244.3.0/24
    podCIDRs:
    - 127.244.3.0/24
    providerID: aws:///us-east-2a/i-0123456789abcdef0
    taints:
    - effect: NoSchedule
      key: nvidia.com/gpu
      value: present
  status:
    addresses:
    - address: 127.0.12.34
      type: InternalIP
    - address: gpu-node-0
      type: Hostname
    allocatable:
      cpu: 191450m
      ephemeral-storage: "27046276Ki"
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2097152000Ki
      nvidia.com/gpu: "8"
      pods: "110"
      vpc.amazonaws.com/efa: "32"
    capacity:
      cpu: "192"
      ephemeral-storage: 29348504Ki
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2097664000Ki
      nvidia.com/gpu: "8"
      pods: "110"
      vpc.amazonaws.com/efa: "32"
    conditions:
    - lastHeartbeatTime: "2025-05-01T10:00:00Z"
      lastTransitionTime: "2025-03-04T09:12:44Z"
      message: kubelet has sufficient memory available
      reason: KubeletHasSufficientMemory
      status: "False"
      type: MemoryPressure
    - lastHeartbeatTime: "2025-05-01T10:00:00Z"
      lastTransitionTime: "2025-03-04T09:12:44Z"
      message: kubelet has no disk pressure
      reason: KubeletHasNoDiskPressure
      status: "False"
      type: DiskPressure
    - lastHeartbeatTime: "2025-05-01T10:00:00Z"
      lastTransitionTime: "2025-03-04T09:12:44Z"
      message: kubelet has sufficient PID available
      reason: KubeletHasSufficientPID
      status: "False"
      type: PIDPressure
    - lastHeartbeatTime: "2025-05-01T10:00:00Z"
      lastTransitionTime: "2025-03-04T09:13:20Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
    daemonEndpoints:
      kubeletEndpoint:
        Port: 10250
    images:
    - names:
      - vllm/vllm-openai@sha256:0f6e1a2b3c4d5e6f
      - vllm/vllm-openai:v0.11.0
      sizeBytes: 10737418240
    - names:
      - registry.k8s.io/pause:3.10
      sizeBytes: 320368
    nodeInfo:
      architecture: amd64
      bootID: 4b8f0a8e-2a7c-4d5e-8f9a-1b2c3d4e5f60
      containerRuntimeVersion: containerd://1.7.27
      kernelVersion: 6.1.132-147.221.amzn2023.x86_64
      kubeProxyVersion: v1.32.3-eks-4096722
      kubeletVersion: v1.32.3-eks-4096722
      machineID: ec2a1b2c3d4e5f60718293a4b5c6d7e8
      operatingSystem: linux
      osImage: Amazon Linux 2023.7.20250414
      systemUUID: ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8
- apiVersion: v1
  kind: Node
  metadata:
    creationTimestamp: "2025-03-04T09:12:51Z"
    labels:
      kubernetes.io/hostname: gpu-node-1
      network.example.com/block: block-a
      network.example.com/rack: rack-a2
      node.kubernetes.io/instance-type: p5.48xlarge
    name: gpu-node-1
    resourceVersion: "918273650"
    uid: 6e1d3f1f-9a2b-4d4f-a062-1c9e8a3b7d22
  spec:
    providerID: aws:///us-east-2a/i-0fedcba9876543210
    unschedulable: true
    taints:
    - effect: NoSchedule
      key: node.kubernetes.io/unschedulable
      timeAdded: "2025-04-30T22:01:05Z"
  status:
    allocatable:
      cpu: 191450m
      memory: 2097152000Ki
      nvidia.com/gpu: "8"
    conditions:
    - {lastHeartbeatTime: "2025-05-01T10:00:00Z", status: "False", type: MemoryPressure, reason: KubeletHasSufficientMemory}
    - {lastHeartbeatTime: "2025-05-01T10:00:00Z", status: "True", type: Ready, reason: KubeletReady}
    nodeInfo: {architecture: amd64, kubeletVersion: v1.32.3-eks-4096722, operatingSystem: linux}
- apiVersion: v1
  kind: Node
  metadata:
    labels:
      kubernetes.io/hostname: gpu-node-2
      network.example.com/block: block-a
      network.example.com/rack: rack-a2
    name: gpu-node-2
  spec: {}
  status:
    allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8", pods: "64"}
    conditions:
    - {status: "False", type: MemoryPressure}
    - {status: Unknown, type: Ready, reason: NodeStatusUnknown, message: Kubelet stopped posting node status.}
kind: List
metadata:
  resourceVersion: ""
"""

KUBECTL_PODS = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/restartedAt: "2025-04-29T08:00:00Z"
    creationTimestamp: "2025-04-29T08:00:03Z"
    generateName: llama-70b-prefill-7d9c6b5f4-
    labels:
      app: llama-70b
      pod-template-hash: 7d9c6b5f4
    name: llama-70b-prefill-7d9c6b5f4-x2k8p
    namespace: serving
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: llama-70b-prefill-7d9c6b5f4
      uid: 0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9
    resourceVersion: "918270001"
    uid: 1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901
  spec:
    containers:
    - args: [--model, meta-llama/Llama-3.1-70B-Instruct, --tensor-parallel-size, "8"]
      env:
      - {name: VLLM_PORT, value: "8000"}
      image: vllm/vllm-openai:v0.11.0
      imagePullPolicy: IfNotPresent
      name: engine
      ports:
      - {containerPort: 8000, name: http, protocol: TCP}
      resources:
        limits: {memory: 600Gi, nvidia.com/gpu: "8"}
        requests: {cpu: "32", memory: 512Gi, nvidia.com/gpu: "8"}
      terminationMessagePath: /dev/termination-log
      volumeMounts:
      - {mountPath: /dev/shm, name: dshm}
    - image: envoyproxy/envoy:v1.33.0
      name: sidecar
      resources:
        limits: {cpu: 500m, memory: 1Gi}
    dnsPolicy: ClusterFirst
    enableServiceLinks: true
    initContainers:
    - image: busybox:1.36
      name: fetch-weights
      resources:
        requests: {cpu: "40", memory: 8Gi}
    nodeName: gpu-node-0
    overhead: {cpu: 250m, memory: 120Mi}
    preemptionPolicy: PreemptLowerPriority
    priority: 0
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations:
    - {effect: NoSchedule, key: nvidia.com/gpu, operator: Exists}
    - {effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}
    volumes:
    - emptyDir: {medium: Memory, sizeLimit: 64Gi}
      name: dshm
  status:
    conditions:
    - {lastProbeTime: null, lastTransitionTime: "2025-04-29T08:00:03Z", status: "True", type: PodScheduled}
    - {lastProbeTime: null, lastTransitionTime: "2025-04-29T08:04:10Z", status: "True", type: Ready}
    containerStatuses:
    - containerID: containerd://aa11bb22
      image: docker.io/vllm/vllm-openai:v0.11.0
      imageID: docker.io/vllm/vllm-openai@sha256:0f6e1a2b3c4d5e6f
      lastState: {}
      name: engine
      ready: true
      restartCount: 0
      started: true
      state:
        running: {startedAt: "2025-04-29T08:01:02Z"}
    hostIP: 127.0.12.34
    phase: Running
    podIP: 127.244.3.17
    podIPs:
    - ip: 127.244.3.17
    qosClass: Burstable
    startTime: "2025-04-29T08:00:03Z"
- apiVersion: v1
  kind: Pod
  metadata:
    name: warmup-28901234-abcde
    namespace: batch
    ownerReferences:
    - {apiVersion: batch/v1, kind: Job, name: warmup-28901234, uid: 2c3d4e5f-6071-8293-a4b5-c6d7e8f90123}
  spec:
    containers:
    - name: warmup
      image: busybox:1.36
      resources: {requests: {cpu: "16", nvidia.com/gpu: "8"}}
    nodeName: gpu-node-0
    restartPolicy: Never
  status:
    phase: Succeeded
    containerStatuses:
    - name: warmup
      state: {terminated: {exitCode: 0, reason: Completed}}
- apiVersion: v1
  kind: Pod
  metadata: {name: crashed-eval, namespace: batch}
  spec:
    containers:
    - {name: eval, image: busybox:1.36, resources: {requests: {cpu: "8", nvidia.com/gpu: "4"}}}
    nodeName: gpu-node-0
    restartPolicy: Never
  status: {phase: Failed, reason: Error}
- apiVersion: v1
  kind: Pod
  metadata: {name: pending-decode, namespace: serving}
  spec:
    containers:
    - {name: engine, image: vllm/vllm-openai:v0.11.0, resources: {requests: {nvidia.com/gpu: "8"}}}
  status:
    phase: Pending
    conditions:
    - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/3 nodes are available"}
- apiVersion: v1
  kind: Pod
  metadata: {name: node-exporter-7xk2q, namespace: monitoring}
  spec:
    containers:
    - {name: exporter, image: prom/node-exporter:v1.9.0, resources: {requests: {cpu: 100m, memory: 180Mi}}}
    nodeName: gpu-node-1
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: ghost, namespace: default}
  spec:
    containers:
    - {name: c, image: busybox, resources: {requests: {cpu: "1"}}}
    nodeName: gpu-node-99
  status: {phase: Running}
kind: List
metadata:
  resourceVersion: ""
"""

TOPOLOGY = """\
apiVersion: tandem.dev/v1alpha1
kind: ClusterTopology
metadata: {name: default}
spec:
  levels:
    - {name: block, nodeLabel: network.example.com/block, linkBandwidthGbps: 200}
    - {name: rack, nodeLabel: network.example.com/rack, linkBandwidthGbps: 400}
    - {name: host, nodeLabel: kubernetes.io/hostname}
"""

GROUP = """\
apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {name: llama-70b, namespace: serving}
spec:
  roles:
    - name: prefill
      replicas: 2
      template:
        metadata: {labels: {app: llama}}
        spec:
          containers:
            - name: engine
              image: vllm/vllm-openai:v0.11.0
              args: [--tensor-parallel-size, "8"]
              ports: [{containerPort: 8000}]
              env: [{name: HF_HOME, value: /cache}]
              resources: {requests: {nvidia.com/gpu: "8"}}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          volumes: [{name: cache, emptyDir: {}}]
"""


def snapshot_of(*texts: str) -> tuple[ClusterSnapshot, list[str]]:
    inputs = load_texts([(f"file-{i}.yaml", text) for i, text in enumerate(texts)])
    return ClusterSnapshot.build(inputs.nodes, inputs.pods)


def amount(snapshot: ClusterSnapshot, array: str, node: str, resource: str) -> int:
    return int(getattr(snapshot, array)[snapshot.node_index[node], snapshot.resource_index[resource]])


# ----------------------------------------------------------------------------- kubectl output


def test_kubectl_get_nodes_yaml_loads_and_ignores_the_rest() -> None:
    inputs = load_texts([("nodes.yaml", KUBECTL_NODES)])
    assert [node.metadata.name for node in inputs.nodes] == ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
    node = inputs.nodes[0]
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert node.metadata.labels["kubernetes.io/hostname"] == "gpu-node-0"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert [c.type for c in node.status.conditions] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert node.ready()
    # milli-units, as parsed
    assert node.status.allocatable["cpu"] == 191_450
    assert node.status.allocatable["memory"] == 2_097_152_000 * 1024 * 1000
    assert node.status.allocatable["vpc.amazonaws.com/efa"] == 32_000
    # nothing kubectl adds is kept
    dumped = node.model_dump(by_alias=True)
    assert "managedFields" not in dumped["metadata"] and "nodeInfo" not in dumped["status"]
    assert inputs.pods == [] and inputs.groups == [] and inputs.topologies == {}


def test_snapshot_of_kubectl_nodes() -> None:
    snapshot, warnings = snapshot_of(KUBECTL_NODES)
    assert warnings == []
    assert snapshot.node_names == ("gpu-node-0", "gpu-node-1", "gpu-node-2")
    # CPU stays in millicores; every other resource in whole units.
    assert amount(snapshot, "allocatable", "gpu-node-0", "cpu") == 191_450
    assert amount(snapshot, "allocatable", "gpu-node-0", "memory") == 2_097_152_000 * 1024
    assert amount(snapshot, "allocatable", "gpu-node-0", "nvidia.com/gpu") == 8
    assert amount(snapshot, "allocatable", "gpu-node-0", "hugepages-1Gi") == 0
    assert amount(snapshot, "allocatable", "gpu-node-0", "pods") == 110
    assert amount(snapshot, "allocatable", "gpu-node-2", "pods") == 64
    # gpu-node-1 does not state allocatable pods: kubelet's default of 110 applies.
    assert amount(snapshot, "allocatable", "gpu-node-1", "pods") == 110
    # A resource a node does not offer is zero there.
    assert amount(snapshot, "allocatable", "gpu-node-1", "vpc.amazonaws.com/efa") == 0
    assert snapshot.schedulable.tolist() == [True, False, False]
    assert snapshot.problems == {1: "cordoned (spec.unschedulable)", 2: "not Ready"}


def test_node_taints_and_tolerations() -> None:
    snapshot, _ = snapshot_of(KUBECTL_NODES)
    inputs = load_texts([("group.yaml", GROUP)])
    template = inputs.groups[0].spec.roles[0].template.spec
    # gpu-node-0's NoSchedule taint: tolerated by the group's pods, not by a bare pod.
    assert snapshot.eligible({}, template.tolerations).tolist() == [True, False, False]
    assert snapshot.eligible({}, []).tolist() == [False, False, False]
    assert snapshot.eligible({"node.kubernetes.io/instance-type": "p5.48xlarge"}, template.tolerations).tolist() == [True, False, False]
    assert snapshot.eligible({"topology.kubernetes.io/zone": "us-west-1a"}, template.tolerations).tolist() == [False, False, False]


def test_kubectl_get_pods_yaml_counts_bound_running_pods_only() -> None:
    inputs = load_texts([("nodes.yaml", KUBECTL_NODES), ("pods.yaml", KUBECTL_PODS)])
    assert len(inputs.pods) == 6
    phases = {pod.metadata.name: (pod.status.phase, pod.holds_capacity()) for pod in inputs.pods}
    assert phases == {
        "llama-70b-prefill-7d9c6b5f4-x2k8p": ("Running", True),
        "warmup-28901234-abcde": ("Succeeded", False),
        "crashed-eval": ("Failed", False),
        "pending-decode": ("Pending", False),
        "node-exporter-7xk2q": ("Running", True),
        "ghost": ("Running", True),
    }
    snapshot, warnings = ClusterSnapshot.build(inputs.nodes, inputs.pods)
    # The ghost pod is bound to a node that is not in the files: a warning, not an error.
    assert warnings == [
        "pod default/ghost is bound to node 'gpu-node-99', which is not among the nodes given; ignored"
    ]
    # gpu-node-0 holds only the Running prefill pod (Succeeded and Failed pods hold nothing):
    #   cpu    = max(32 + 0.5 (limit-only sidecar), 40 (init container)) + 0.25 overhead
    #   memory = max(512Gi + 1Gi, 8Gi) + 120Mi overhead
    #   gpu    = 8, pods = 1
    assert amount(snapshot, "used", "gpu-node-0", "cpu") == 40_250
    assert amount(snapshot, "used", "gpu-node-0", "memory") == 513 * GI + 120 * 2**20
    assert amount(snapshot, "used", "gpu-node-0", "nvidia.com/gpu") == 8
    assert amount(snapshot, "used", "gpu-node-0", "pods") == 1
    assert amount(snapshot, "free", "gpu-node-0", "nvidia.com/gpu") == 0
    assert amount(snapshot, "free", "gpu-node-0", "pods") == 109
    assert amount(snapshot, "used", "gpu-node-1", "cpu") == 100
    assert amount(snapshot, "used", "gpu-node-1", "memory") == 180 * 2**20
    assert amount(snapshot, "used", "gpu-node-2", "pods") == 0


def test_pod_requests_follow_kube_scheduler() -> None:
    pod = load_texts([("pods.yaml", KUBECTL_PODS)]).pods[0]
    requests = pod.spec.requests()
    # a request missing on a container defaults to its limit (sidecar cpu, memory)
    assert requests["cpu"] == 40_250
    assert requests["memory"] == (513 * GI + 120 * 2**20) * 1000
    # engine states both: the request wins over the larger limit
    assert pod.spec.containers[0].resources.effective_requests()["memory"] == 512 * GI * 1000


def test_pod_namespace_defaults_to_default() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
    pod = load_texts([("pod.yaml", text)]).pods[0]
    assert pod.metadata.namespace == "default"
    assert not pod.holds_capacity()


# ----------------------------------------------------------------------------- typed lists, JSON


def _items_without_type(text: str) -> list[dict]:
    items = yaml.safe_load(text)["items"]
    for item in items:
        del item["apiVersion"], item["kind"]
    return items


def test_node_list_and_pod_list_without_per_item_kind() -> None:
    nodes = {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": _items_without_type(KUBECTL_NODES)}
    pods = {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": _items_without_type(KUBECTL_PODS)}
    inputs = load_texts([("nodes.yaml", yaml.safe_dump(nodes)), ("pods.json", json.dumps(pods))])
    assert [n.metadata.name for n in inputs.nodes] == ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
    assert all(isinstance(n, Node) for n in inputs.nodes)
    assert len(inputs.pods) == 6 and all(isinstance(p, Pod) for p in inputs.pods)


def test_errors_inside_a_list_name_the_item() -> None:
    items = _items_without_type(KUBECTL_NODES)
    del items[2]["status"]["allocatable"]
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": items})
    with pytest.raises(InputError) as caught:
        load_texts([("nodes.yaml", text)])
    assert str(caught.value) == "nodes.yaml: items[2].status.allocatable: required field is missing"


def test_json_single_object_and_list() -> None:
    node = yaml.safe_load(KUBECTL_NODES)["items"][0]
    single = json.dumps(node, indent=4)
    as_list = json.dumps(yaml.safe_load(KUBECTL_NODES), indent="\t")  # tab-indented JSON is still JSON
    one = load_texts([("node.json", single)])
    many = load_texts([("nodes.json", as_list)])
    assert [n.metadata.name for n in one.nodes] == ["gpu-node-0"]
    assert one.nodes[0] == many.nodes[0]
    assert len(many.nodes) == 3


def test_json_and_yaml_give_the_same_objects() -> None:
    from_yaml = load_texts([("a.yaml", KUBECTL_NODES), ("b.yaml", KUBECTL_PODS), ("c.yaml", TOPOLOGY), ("d.yaml", GROUP)])
    from_json = load_texts(
        [(f"{name}.json", json.dumps(yaml.safe_load(text))) for name, text in zip("abcd", (KUBECTL_NODES, KUBECTL_PODS, TOPOLOGY, GROUP))]
    )
    assert from_yaml.nodes == from_json.nodes
    assert from_yaml.pods == from_json.pods
    assert from_yaml.topologies == from_json.topologies
    assert from_yaml.groups == from_json.groups


def test_json_with_a_byte_order_mark() -> None:
    text = "\ufeff" + json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": 4}}})
    assert load_texts([("n.json", text)]).nodes[0].status.allocatable["cpu"] == 4000


def test_yaml_flow_mapping_that_is_not_json_still_loads() -> None:
    text = "{apiVersion: v1, kind: Node, metadata: {name: a}, status: {allocatable: {cpu: 4}}}"
    assert load_texts([("n.yaml", text)]).nodes[0].metadata.name == "a"


def test_duplicate_keys_are_rejected_in_json_too() -> None:
    with pytest.raises(InputError, match=r"n\.json: not valid JSON: duplicate key 'kind'"):
        load_texts([("n.json", '{"apiVersion": "v1", "kind": "Node", "kind": "Pod"}')])


# ----------------------------------------------------------------------------- multi-document YAML


def test_multi_document_yaml_with_every_kind() -> None:
    nodes = yaml.safe_load(KUBECTL_NODES)["items"]
    documents = [TOPOLOGY, yaml.safe_dump(nodes[0]), "", yaml.safe_dump(nodes[2]), GROUP, KUBECTL_PODS]
    text = "---\n" + "---\n".join(documents)
    inputs = load_texts([("all.yaml", text)])
    assert [n.metadata.name for n in inputs.nodes] == ["gpu-node-0", "gpu-node-2"]
    assert list(inputs.topologies) == ["default"]
    assert [g.metadata.name for g in inputs.groups] == ["llama-70b"]
    assert len(inputs.pods) == 6


def test_document_numbers_count_empty_documents() -> None:
    """An error names the document as a person counts them in the file."""
    good = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 1}}\n"
    bad = "apiVersion: v1\nkind: Node\nmetadata: {name: b}\nstatus: {}\n"
    with pytest.raises(InputError) as caught:
        load_texts([("all.yaml", good + "---\n---\n" + bad)])
    assert str(caught.value) == "all.yaml (document 3): status.allocatable: required field is missing"


def test_kubectl_shaped_inference_group_loads() -> None:
    """`kubectl get inferencegroup -o yaml` output: server metadata and status are accepted."""
    text = GROUP.replace(
        "metadata: {name: llama-70b, namespace: serving}",
        "metadata:\n  name: llama-70b\n  namespace: serving\n  uid: 7f8e9d0c\n  resourceVersion: '42'\n"
        "  generation: 3\n  creationTimestamp: '2025-05-01T10:00:00Z'\n  managedFields: [{manager: kubectl}]\n"
        "  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}",
    ) + "status:\n  observedGeneration: 3\n  conditions: [{type: Scheduled, status: 'True'}]\n"
    group = load_texts([("g.yaml", text)]).groups[0]
    assert group.metadata.generation == 3
    assert group.status == {"observedGeneration": 3, "conditions": [{"type": "Scheduled", "status": "True"}]}
    # pod template fields tandem does not read (ports, env, args, volumes) are ignored
    assert group.spec.roles[0].template.spec.containers[0].resources.requests == {"nvidia.com/gpu": 8000}


def test_objects_spread_over_files_and_duplicates_across_files() -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 1}}\n"
    with pytest.raises(InputError) as caught:
        load_texts([("one.yaml", node), ("two.yaml", node)])
    assert str(caught.value) == "two.yaml: metadata.name: duplicate Node 'a' (also in one.yaml)"
    # the same name in two namespaces is two pods
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{containers: [{{name: c}}]}}\n"
    inputs = load_texts([("a.yaml", pod.format(ns="a")), ("b.yaml", pod.format(ns="b"))])
    assert len(inputs.pods) == 2


def test_problems_from_every_file_are_collected() -> None:
    with pytest.raises(InputError) as caught:
        load_texts([("a.yaml", ""), ("b.yaml", "kind: Node\n"), ("c.yaml", KUBECTL_NODES)])
    assert [str(p) for p in caught.value.problems] == [
        "a.yaml: no documents: the file is empty (or holds only whitespace and comments)",
        "b.yaml: apiVersion: required field is missing or not a string",
    ]
    assert str(caught.value).endswith("(and 1 more problem)")


def test_node_without_conditions_is_ready() -> None:
    """Hand-written node files often have no conditions; they count as Ready."""
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: 1}}\n"
    snapshot, _ = snapshot_of(text)
    assert snapshot.schedulable.tolist() == [True]


def test_typed_list_items_take_the_lists_api_version() -> None:
    """Items of `<Kind>List` get the list's apiVersion (core v1 when it states none) and `<Kind>`."""
    nodes = "kind: NodeList\nitems: [{metadata: {name: a}, status: {allocatable: {cpu: 1}}}]\n"
    groups = (
        "apiVersion: tandem.dev/v1alpha1\nkind: InferenceGroupList\n"
        "items: [{metadata: {name: g}, spec: {roles: [{name: r, template: {spec: {containers: [{name: c}]}}}]}}]\n"
    )
    inputs = load_texts([("n.yaml", nodes), ("g.yaml", groups)])
    assert [n.metadata.name for n in inputs.nodes] == ["a"]
    assert [g.metadata.name for g in inputs.groups] == ["g"]
    with pytest.raises(InputError, match=r"items\[0\]\.kind: unsupported v1/ConfigMap"):
        load_texts([("cm.yaml", "apiVersion: v1\nkind: ConfigMapList\nitems: [{metadata: {name: x}}]\n")])


# ----------------------------------------------------------------------------- large dumps
#
# A large `kubectl` List is read item by item (`whole_below` characters and up; 0 forces it
# here): the same objects, and the same errors, as parsing the text whole. Only what lies
# inside the subtrees of Nodes and Pods that no model reads goes unchecked.

WHOLE, ITEMS = 10**12, 0  # whole_below: parse whole / item by item


def _aks_dump(nodes: int) -> str:
    """`kubectl get nodes -o yaml` of the bench's AKS-shaped nodes (50 images, managed fields, ...)."""
    import importlib.util
    from pathlib import Path

    # by file, not by putting bench/ on sys.path: its modules' names (faults, loading) would
    # shadow the tests' own for the rest of the session
    spec = importlib.util.spec_from_file_location("tandem_bench_loading", Path(__file__).resolve().parents[2] / "bench" / "loading.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    aks_node = bench.aks_node  # the bench's AKS-shaped node

    return "apiVersion: v1\nitems:\n" + "".join(yaml.safe_dump([aks_node(i)], sort_keys=True, width=10**6) for i in range(nodes)) + "kind: List\n"


def _outcome(sources: list[tuple[str, str]], whole_below: int, piece: int | None = None) -> object:
    """Everything loaded, or every problem as printed; texts given in pieces of `piece` characters."""
    from tandem.api.loading import load_sources

    def reader(text: str):
        return lambda: [text[at : at + piece] for at in range(0, len(text), piece)] if piece else [text]

    try:
        inputs = load_sources([(name, reader(text)) for name, text in sources], whole_below=whole_below)
    except InputError as exc:
        return [str(problem) for problem in exc.problems]
    return inputs.nodes, inputs.pods, inputs.topologies, inputs.groups, inputs.manifests


def _same_both_ways(*sources: tuple[str, str]) -> object:
    whole = _outcome(list(sources), WHOLE)
    assert _outcome(list(sources), ITEMS) == whole
    return whole


def test_the_c_loader_refuses_duplicate_keys_with_their_line() -> None:
    from tandem.api.loading import _Loader

    if yaml.__with_libyaml__:
        assert issubclass(_Loader, yaml.CSafeLoader)
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus:\n  allocatable:\n    cpu: 1\n    memory: 1Gi\n    cpu: 2\n"
    with pytest.raises(InputError) as caught:
        load_texts([("n.yaml", text)])
    assert str(caught.value) == "n.yaml: not valid YAML or JSON: duplicate key 'cpu' (first at line 6) at line 8, column 5"


@pytest.mark.parametrize("piece", [None, 1, 7, 4096])
def test_a_list_read_item_by_item_gives_the_same_objects(piece: int | None) -> None:
    groups = yaml.safe_dump({"apiVersion": "v1", "items": [yaml.safe_load(GROUP)], "kind": "List"})
    texts = [("nodes.yaml", KUBECTL_NODES), ("pods.yaml", KUBECTL_PODS), ("topology.yaml", TOPOLOGY), ("groups.yaml", groups)]
    as_json = [(name.replace(".yaml", ".json"), json.dumps(yaml.safe_load(text), indent=4)) for name, text in texts]
    whole = _outcome(texts, WHOLE)
    assert isinstance(whole, tuple) and len(whole[0]) == 3 and len(whole[1]) == 6 and len(whole[4]) == 1  # one manifest
    assert _outcome(texts, ITEMS, piece) == whole
    assert _outcome(as_json, ITEMS, piece) == _outcome(as_json, WHOLE) == whole


def test_aks_nodes_read_item_by_item_are_the_nodes_read_whole() -> None:
    text = _aks_dump(30)
    nodes = _same_both_ways(("nodes.yaml", text))[0]
    assert len(nodes) == 30 and len(nodes[0].metadata.labels) == 31
    as_json = json.dumps(yaml.safe_load(text), indent=4)
    assert _outcome([("nodes.json", as_json)], ITEMS, 1 << 16)[0] == nodes


def test_unread_subtrees_are_cut_before_parsing() -> None:
    from tandem.api import dumps, loading

    shape = dumps.layout(0)
    first = next(iter(dumps.YamlItems(iter([_aks_dump(1).split("items:\n", 1)[1]]), shape)))
    assert dumps.type_of(first, shape) == ("v1", "Node")
    cut = dumps.trimmed(first, shape, loading._PROJECTIONS[("v1", "Node")])
    item = yaml.safe_load(cut)[0]
    assert item["metadata"]["managedFields"] is None and item["status"]["images"] is None and item["status"]["nodeInfo"] is None
    assert len(item["metadata"]["labels"]) == 31 and item["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert len(cut) < len(first) / 3


def _kubectl_nodes_with(old: str, new: str) -> str:
    assert KUBECTL_NODES.count(old) >= 1, old
    return KUBECTL_NODES.replace(old, new, 1)


SAME_ERRORS = [
    # problems of the objects: found item by item
    ("missing-field", _kubectl_nodes_with("    allocatable: {cpu: \"96\", memory: 1Ti, nvidia.com/gpu: \"8\", pods: \"64\"}\n", "")),
    ("bad-quantity", _kubectl_nodes_with("cpu: 191450m", "cpu: lots")),
    ("label-not-a-string", _kubectl_nodes_with("      beta.kubernetes.io/os: linux\n", "      beta.kubernetes.io/os:\n        a: b\n")),
    ("unknown-kind", _kubectl_nodes_with("  kind: Node\n  metadata:\n    creationTimestamp", "  kind: Nod\n  metadata:\n    creationTimestamp")),
    ("item-not-a-mapping", _kubectl_nodes_with("kind: List\n", "- just a string\nkind: List\n")),
    ("duplicate-node", _kubectl_nodes_with("    name: gpu-node-2\n", "    name: gpu-node-1\n")),
    ("status-only-unread", _kubectl_nodes_with("  status:\n    allocatable: {cpu", "  status:\n    images:\n    - names: [x]\n  statu:\n    allocatable: {cpu")),
    # problems of the text: the item-by-item path hands the file to the whole parse, which names the line
    ("duplicate-label", _kubectl_nodes_with("      beta.kubernetes.io/os: linux\n", "      beta.kubernetes.io/os: linux\n      kubernetes.io/arch: arm64\n")),
    ("syntax-error", _kubectl_nodes_with("      network.example.com/rack: rack-a2\n", "      network.example.com/rack: [rack-a2\n")),
    ("tab", _kubectl_nodes_with("      kubernetes.io/os: linux\n", "\tkubernetes.io/os: linux\n")),
    ("nested-too-deeply", _kubectl_nodes_with("      pods: \"110\"\n", "      pods: " + "[" * 120 + "]" * 120 + "\n")),
    ("duplicate-top-level-key", KUBECTL_NODES + "kind: List\n"),
    ("not-a-list", KUBECTL_NODES.replace("kind: List\n", "kind: Node\n")),
    ("no-kind", KUBECTL_NODES.replace("kind: List\n", "")),
    ("second-document", KUBECTL_NODES + "---\napiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {}\n"),
    ("alias-across-items", _kubectl_nodes_with("    - {status: \"False\", type: MemoryPressure}", "    - *nowhere")),
]


@pytest.mark.parametrize("text", [pytest.param(text, id=name) for name, text in SAME_ERRORS])
def test_errors_are_the_same_item_by_item(text: str) -> None:
    problems = _same_both_ways(("nodes.yaml", text))
    assert isinstance(problems, list) and problems
    assert all(line.startswith("nodes.yaml") for line in problems)


def test_errors_name_the_item_and_the_line() -> None:
    assert _same_both_ways(("nodes.yaml", SAME_ERRORS[0][1])) == ["nodes.yaml: items[2].status.allocatable: required field is missing"]
    syntax = dict(SAME_ERRORS)["syntax-error"]
    line = syntax.splitlines().index("      network.example.com/rack: [rack-a2") + 1
    [problem] = _same_both_ways(("nodes.yaml", syntax))
    assert problem.startswith("nodes.yaml: not valid YAML or JSON: ") and f"at line {line + 1}," in problem


def test_syntax_errors_deep_in_a_large_dump_name_their_line() -> None:
    text = _aks_dump(20)
    lines = text.splitlines()
    broken = max(i for i, line in enumerate(lines) if line.startswith("      kubernetes.io/os:"))
    lines[broken] += ": x"
    [problem] = _same_both_ways(("nodes.yaml", "\n".join(lines) + "\n"))
    column = len(lines[broken]) - 2
    assert problem == f"nodes.yaml: not valid YAML or JSON: mapping values are not allowed in this context at line {broken + 1}, column {column}"


def test_duplicate_keys_in_what_is_read_are_refused_in_a_large_dump() -> None:
    text = _aks_dump(20)
    at = text.index("    allocatable:\n", len(text) // 2) + len("    allocatable:\n")
    line = text[:at].count("\n") + 1
    [problem] = _same_both_ways(("nodes.yaml", text[:at] + "      cpu: '1'\n" + text[at:]))
    assert "duplicate key 'cpu'" in problem and f"at line {line + 1}," in problem


def test_what_no_model_reads_goes_unchecked_item_by_item() -> None:
    """The price of reading a 50,000-node dump in seconds: a repeated key inside
    `status.images` or `managedFields` is not looked at (it is refused below WHOLE_BELOW)."""
    text = _kubectl_nodes_with("      sizeBytes: 320368\n", "      sizeBytes: 320368\n      sizeBytes: 1\n")
    assert "duplicate key 'sizeBytes'" in _outcome([("nodes.yaml", text)], WHOLE)[0]
    assert _outcome([("nodes.yaml", text)], ITEMS) == _outcome([("nodes.yaml", KUBECTL_NODES)], WHOLE)


IRREGULAR = [
    ("items-indented", "apiVersion: v1\nitems:\n" + "".join("  " + line + "\n" for line in KUBECTL_NODES.split("items:\n", 1)[1].split("kind: List")[0].splitlines()) + "kind: List\n"),
    ("comments", KUBECTL_NODES.replace("\n- apiVersion: v1\n", "\n# a node\n\n- apiVersion: v1\n").replace("items:\n# a node\n\n", "items:\n")),
    ("crlf", KUBECTL_NODES.replace("\n", "\r\n")),
    ("byte-order-mark", "\ufeff" + KUBECTL_NODES),
    ("flow-style", yaml.safe_dump(yaml.safe_load(KUBECTL_NODES), default_flow_style=True, width=10**6)),
    ("multi-document", "---\n" + yaml.safe_dump(yaml.safe_load(KUBECTL_NODES)["items"][0]) + "---\n" + KUBECTL_PODS),
    ("typed-list", yaml.safe_dump({"apiVersion": "v1", "items": [{k: v for k, v in item.items() if k != "kind"} for item in yaml.safe_load(KUBECTL_NODES)["items"]], "kind": "NodeList"})),
    ("anchors", KUBECTL_NODES.replace("    labels:\n      kubernetes.io/hostname: gpu-node-2", "    labels: &labels\n      kubernetes.io/hostname: gpu-node-2")
     .replace("    name: gpu-node-2\n", "    name: gpu-node-2\n    annotations: *labels\n")),
]


@pytest.mark.parametrize("text", [pytest.param(text, id=name) for name, text in IRREGULAR])
def test_other_shapes_give_what_the_whole_parse_gives(text: str) -> None:
    loaded = _same_both_ways(("nodes.yaml", text))
    assert isinstance(loaded, tuple) and len(loaded[0]) >= 1, loaded


_LIST = yaml.safe_load(KUBECTL_NODES)
_UNTYPED = [{key: value for key, value in item.items() if key not in ("apiVersion", "kind")} for item in _LIST["items"]]
_KUBECTL_JSON = json.dumps(_LIST, indent=4)

JSON_CASES = [
    ("kubectl", _KUBECTL_JSON),
    ("duplicate-key", _KUBECTL_JSON.replace('"kind": "Node",', '"kind": "Node", "kind": "Node",', 1)),
    ("cut-short", _KUBECTL_JSON[: len(_KUBECTL_JSON) // 2]),
    ("trailing-garbage", _KUBECTL_JSON + "]"),
    ("trailing-comma", _KUBECTL_JSON.rstrip()[:-1] + ",}"),
    ("items-not-a-list", json.dumps({**_LIST, "items": {"a": 1}})),
    ("no-items", json.dumps({**_LIST, "items": []})),
    ("missing-field", _KUBECTL_JSON.replace('"allocatable"', '"allocatable_"', 1)),
    ("typed-list-kind-first", json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": _UNTYPED}, indent=4)),
    ("typed-list-kind-last", json.dumps({"apiVersion": "v1", "items": _UNTYPED, "kind": "NodeList"}, indent=4)),
    ("not-a-list", json.dumps({**_LIST, "kind": "Node"})),
    ("array", json.dumps([_LIST])),
]


@pytest.mark.parametrize("text", [pytest.param(text, id=name) for name, text in JSON_CASES])
def test_json_item_by_item_is_json_read_whole(text: str) -> None:
    whole = _outcome([("nodes.json", text)], WHOLE)
    for piece in (None, 3, 64):
        assert _outcome([("nodes.json", text)], ITEMS, piece) == whole


@pytest.mark.parametrize(
    ("text", "item_by_item"),
    [
        pytest.param(KUBECTL_NODES, True, id="kubectl-yaml"),
        pytest.param(dict(IRREGULAR)["items-indented"], True, id="items-indented"),
        pytest.param(dict(IRREGULAR)["comments"], True, id="comments"),
        pytest.param(dict(IRREGULAR)["anchors"], True, id="anchors-within-an-item"),
        pytest.param(dict(SAME_ERRORS)["missing-field"], True, id="problems-of-objects"),
        pytest.param(dict(IRREGULAR)["typed-list"], False, id="typed-list-kind-last"),
        pytest.param(dict(IRREGULAR)["multi-document"], False, id="multi-document"),
        pytest.param(dict(SAME_ERRORS)["syntax-error"], False, id="syntax-error"),
        pytest.param(_KUBECTL_JSON, True, id="kubectl-json"),
        pytest.param(dict(JSON_CASES)["typed-list-kind-first"], True, id="json-typed-list-kind-first"),
        pytest.param(dict(JSON_CASES)["duplicate-key"], False, id="json-duplicate-key"),
    ],
)
def test_which_inputs_are_read_item_by_item(monkeypatch: pytest.MonkeyPatch, text: str, item_by_item: bool) -> None:
    from tandem.api import loading

    whole: list[str] = []
    parse_whole = loading._whole_entries
    monkeypatch.setattr(loading, "_whole_entries", lambda source, text: whole.append(source) or parse_whole(source, text))
    _outcome([("nodes", text)], ITEMS, 4096)
    assert (not whole) == item_by_item


def test_yaml_anchors_a_person_writes_are_read_and_shared_templates_stay_equal() -> None:
    """Anchors for a shared template (as people write them by hand) are fine; only a
    document that aliases expand far beyond its size is refused."""
    from tandem.api.loading import load_documents

    text = """
apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {name: shared, namespace: serving}
spec:
  replicas: 1
  roles:
    - name: prefill
      replicas: 2
      template: &engine
        spec:
          containers: [{name: engine, image: vllm, resources: {requests: {nvidia.com/gpu: "1"}}}]
    - name: decode
      replicas: 2
      template: *engine
"""
    [group] = load_documents("shared.yaml", text)
    roles = group["spec"]["roles"]
    assert roles[0]["template"] == roles[1]["template"]
