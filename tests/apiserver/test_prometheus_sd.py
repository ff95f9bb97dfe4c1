"""`GET /tandem/prometheus/pods`: what Prometheus' Kubernetes pod role makes of the server's
pods, for `http_sd_configs` (Debian's Prometheus has no `kubernetes_sd_configs`).

The real Prometheus following it is tests/e2e/test_autoscaling_load.py's Prometheus story.
"""

from __future__ import annotations

from typing import Any

from apiserver.helpers import NS, Client, small_cluster
from e2e.processes import wait_for
from tandem.apiserver.prometheus_sd import namespace_of, pod_targets
from tandem.apiserver.server import ApiServer


def pod(name: str, ip: str | None, containers: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "hostIP": "127.20.0.1",
                              "conditions": [{"type": "Ready", "status": "True"}]}
    if ip is not None:
        status["podIP"] = ip
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", **meta},
            "spec": {"nodeName": "n-000", "containers": containers}, "status": status}


def test_a_target_per_declared_port_a_portless_one_per_container_without_and_none_without_an_ip() -> None:
    engine = {"name": "engine", "image": "lmsysorg/sglang:v0.5.4", "ports": [{"name": "http", "containerPort": 8000},
                                                                             {"name": "bootstrap", "containerPort": 8998}]}
    sidecar = {"name": "sidecar", "image": "busybox"}
    init = {"name": "fetch", "image": "busybox", "ports": [{"containerPort": 9000, "protocol": "UDP"}]}
    leader = pod("p-0", "127.10.0.5", [engine, sidecar], labels={"tandem.dev/group": "g", "app.kubernetes.io/name": "x"},
                 annotations={"sglang.ai/bootstrap-port": "8998"},
                 ownerReferences=[{"kind": "InferenceGroup", "name": "g", "controller": True}])
    leader["spec"]["initContainers"] = [init]
    pending = pod("p-1", None, [engine])
    groups = pod_targets([leader, pending])

    assert [g["targets"] for g in groups] == [["127.10.0.5:8000"], ["127.10.0.5:8998"], ["127.10.0.5"], ["127.10.0.5:9000"]]
    http = groups[0]["labels"]
    assert http["__meta_kubernetes_namespace"] == NS and http["__meta_kubernetes_pod_name"] == "p-0"
    assert http["__meta_kubernetes_pod_ready"] == "true" and http["__meta_kubernetes_pod_phase"] == "Running"
    assert http["__meta_kubernetes_pod_node_name"] == "n-000" and http["__meta_kubernetes_pod_host_ip"] == "127.20.0.1"
    assert http["__meta_kubernetes_pod_label_tandem_dev_group"] == "g", "label names sanitised as Prometheus does"
    assert http["__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name"] == "true"
    assert http["__meta_kubernetes_pod_annotation_sglang_ai_bootstrap_port"] == "8998"
    assert (http["__meta_kubernetes_pod_controller_kind"], http["__meta_kubernetes_pod_controller_name"]) == ("InferenceGroup", "g")
    assert (http["__meta_kubernetes_pod_container_port_name"], http["__meta_kubernetes_pod_container_port_number"]) == ("http", "8000")
    assert http["__meta_kubernetes_pod_container_port_protocol"] == "TCP" and http["__meta_kubernetes_pod_container_init"] == "false"
    portless = groups[2]["labels"]
    assert portless["__meta_kubernetes_pod_container_name"] == "sidecar" and "__meta_kubernetes_pod_container_port_name" not in portless
    assert groups[3]["labels"]["__meta_kubernetes_pod_container_init"] == "true"
    assert groups[3]["labels"]["__meta_kubernetes_pod_container_port_protocol"] == "UDP"


def test_a_pod_not_ready_says_so() -> None:
    unready = pod("d-0", "127.10.0.6", [{"name": "e", "ports": [{"containerPort": 8000}]}])
    unready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    (group,) = pod_targets([unready])
    assert group["labels"]["__meta_kubernetes_pod_ready"] == "false"


def test_readiness_is_the_ready_conditions_status_as_pod_go_reads_it() -> None:
    """`unknown` without a Ready condition or with status Unknown (a lost node), never `false`."""
    fresh = pod("d-1", "127.10.0.7", [{"name": "e", "ports": [{"containerPort": 8000}]}])
    fresh["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    lost = pod("d-2", "127.10.0.8", [{"name": "e", "ports": [{"containerPort": 8000}]}])
    lost["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    assert [g["labels"]["__meta_kubernetes_pod_ready"] for g in pod_targets([fresh, lost])] == ["unknown", "unknown"]


def test_an_ipv6_target_is_bracketed_and_an_empty_controller_gives_no_label() -> None:
    engine = {"name": "e", "ports": [{"name": "http", "containerPort": 8000}]}
    v6 = pod("v-0", "::1", [engine, {"name": "sidecar"}], ownerReferences=[{"kind": "", "name": "", "controller": True}])
    groups = pod_targets([v6])
    assert [g["targets"] for g in groups] == [["[::1]:8000"], ["[::1]"]], "as Go's net.JoinHostPort and pod.go write them"
    assert not any(k.startswith("__meta_kubernetes_pod_controller_") for k in groups[0]["labels"])


def test_the_paths_it_answers() -> None:
    assert namespace_of("/tandem/prometheus/pods") == (True, None)
    assert namespace_of("/tandem/prometheus/namespaces/serving/pods") == (True, "serving")
    for other in ("/tandem/prometheus", "/tandem/prometheus/namespaces//pods", "/tandem/prometheus/namespaces/a/b/pods", "/tandem/engines"):
        assert namespace_of(other) == (False, None), other


def test_the_server_answers_with_its_own_pods_in_the_namespace_asked() -> None:
    with ApiServer(objects=small_cluster()) as server:
        client = Client(server.url)
        for namespace, name in ((NS, "a"), ("other", "b")):
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                    "spec": {"nodeName": "n-000", "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 8000}]}]}}
            assert client.post(f"/api/v1/namespaces/{namespace}/pods", body).code == 201
        everything = wait_for(lambda: (r := client.get("/tandem/prometheus/pods").body) and len(r) == 2 and r, 30, "both pods with an IP")
        assert sorted(g["labels"]["__meta_kubernetes_pod_name"] for g in everything) == ["a", "b"]
        assert all(g["targets"][0].startswith("127.") for g in everything), "every target on loopback"
        ours = client.get(f"/tandem/prometheus/namespaces/{NS}/pods")
        assert ours.code == 200 and [g["labels"]["__meta_kubernetes_pod_name"] for g in ours.body] == ["a"]
        assert client.get("/tandem/prometheus/namespaces/nobody/pods").body == []
