"""Each group's metrics source in the operator's autoscaler loop: its `spec.autoscaling.metrics`
over the flags. Two groups read from two sources in the same passes (one scraped, one
asked of a Prometheus server), a third that asks for Prometheus with no server anywhere is
told what to set, and sources are built once per distinct configuration, not per pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from prometheus_client import CollectorRegistry

from support.metrics_fakes import FakePrometheus, VllmExposition
from tandem.api.resources import InferenceGroup
from tandem.autoscaling.metrics_source import NoSource, PodsSource, PrometheusSource, SourceDefaults
from tandem.cluster.memory import MemoryStore
from tandem.cluster.ports import Reader
from tandem.operator.autoscaler_loop import AutoscalerLoop
from tandem.operator.autoscaler_metrics import AutoscalerMetrics
from tandem.operator.group_sources import Built, GroupSources, build_source

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"
NS = "serving"
T0 = 1_764_000_000.0


def autoscaled(name: str, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    group = yaml.safe_load(EXAMPLE.read_text())
    group["metadata"]["name"] = name
    group["spec"]["autoscaling"]["stabilization"] = {"scaleUpSeconds": 0, "scaleDownSeconds": 0}
    if metrics is not None:
        group["spec"]["autoscaling"]["metrics"] = metrics
    return group


def engine_pod(group: str, name: str, role: str, port: int, kv_role: str | None = None) -> dict[str, Any]:
    """A Ready vLLM replica leader of `group` on 127.0.0.1:`port` (a disaggregated engine with `kv_role`)."""
    args = ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})] if kv_role else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"tandem.dev/group": group, "tandem.dev/role": role, "tandem.dev/pod-index": "0"}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve", "m"], "args": args,
                                     "ports": [{"name": "metrics", "containerPort": port}]}]},
            "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}}


def replicas(store: MemoryStore, name: str) -> list[int]:
    return [r["replicas"] for r in store.get("InferenceGroup", NS, name)["spec"]["roles"]]


def active(store: MemoryStore, name: str) -> dict[str, Any]:
    return next(c for c in store.get("InferenceGroup", NS, name)["status"]["conditions"] if c["type"] == "ScalingActive")


def counting(built: list[Built]) -> Callable[[Built, Callable[[], Reader]], Any]:
    def build(config: Built, snapshot: Callable[[], Reader]) -> Any:
        built.append(config)
        return build_source(config, snapshot)

    return build


@pytest.fixture
def prometheus():
    fake = FakePrometheus()
    yield fake
    fake.close()


def test_two_groups_read_from_two_sources_in_the_same_passes_and_a_third_is_told_what_to_set(prometheus) -> None:
    store = MemoryStore()
    store.create(autoscaled("scraped"))  # the operator's default: the pods' own /metrics
    store.create(autoscaled("queried", {"source": "prometheus", "prometheus": {"url": prometheus.url}}))
    store.create(autoscaled("lost", {"source": "prometheus"}))  # no URL in the group, none given to the operator
    engines = {"s-p-0": VllmExposition(), "s-d-0": VllmExposition()}
    try:
        store.create(engine_pod("scraped", "s-p-0", "prefill", engines["s-p-0"].server.server_address[1]))
        store.create(engine_pod("scraped", "s-d-0", "decode", engines["s-d-0"].server.server_address[1]))
        for name, role, kv_role in (("p-0", "prefill", "kv_producer"), ("d-0", "decode", "kv_consumer"), ("d-1", "decode", "kv_consumer")):
            store.create(engine_pod("queried", name, role, 1, kv_role))  # port 1: never scraped, Prometheus answers for them
        built: list[Built] = []
        sources = GroupSources(SourceDefaults("pods", None, 60.0), store.snapshot, build=counting(built))
        loop = AutoscalerLoop(store, lambda: T0, None, lambda now: True, AutoscalerMetrics(CollectorRegistry()), sources=sources)

        first = loop.tick(T0)
        assert first is not None
        assert {d.name: d.outcome for d in first.decided} == {"scraped": "MissingSignal", "queried": "unchanged", "lost": "NoMetricsSource"}
        engines["s-d-0"].generated = 15 * 12_000  # 12,000 decode tokens/s at the scraped group
        second = loop.tick(T0 + 15)
        assert second is not None and second.changes == [("serving/scraped", {"decode": 4, "prefill": 8})]
        assert replicas(store, "scraped") == [8, 4] and replicas(store, "queried") == [2, 1], "100 tokens/s from Prometheus: one decode is enough"
        assert active(store, "queried")["reason"] == "ValidSignals" and active(store, "scraped")["reason"] == "ValidSignals"
        lost = active(store, "lost")
        assert (lost["status"], lost["reason"]) == ("False", "NoMetricsSource")
        assert "spec.autoscaling.metrics.prometheus.url" in lost["message"] and "--prometheus-url" in lost["message"]
        assert prometheus.queries and all('tandem_dev_group="queried"' in q for q in prometheus.queries), "Prometheus is asked for its group only"
        assert sorted(built, key=repr) == [PodsSource(60.0), PrometheusSource(prometheus.url, 60.0)], "one source per configuration, kept across passes"

        group = copy.deepcopy(store.get("InferenceGroup", NS, "queried"))
        del group["spec"]["autoscaling"]["metrics"]  # back to the operator's default: the same configuration as "scraped"
        store.update(group)
        loop.tick(T0 + 30)
        assert len(built) == 2 and sources.built == 1, "no new source for a configuration in use; the Prometheus one let go"
    finally:
        for exposition in engines.values():
            exposition.close()


def typed(name: str, metrics: dict[str, Any] | None = None) -> InferenceGroup:
    return InferenceGroup.model_validate(autoscaled(name, metrics))


def test_a_source_is_built_once_per_configuration_and_let_go_when_no_group_uses_it() -> None:
    built: list[Built] = []
    made: list[object] = []

    class Source:
        def __init__(self) -> None:
            self.forgotten: list[tuple[str, str]] = []
            made.append(self)

        def __call__(self, namespace: str, name: str, now: float) -> None:
            return None

        def forget(self, namespace: str, name: str) -> None:
            self.forgotten.append((namespace, name))

    def build(config: Built, snapshot: Callable[[], Reader]) -> Source:
        built.append(config)
        return Source()

    sources = GroupSources(SourceDefaults("pods"), MemoryStore().snapshot, build=build)
    tgi = {"names": {"waiting": "tgi_queue_size"}}
    a, b = sources(typed("a", tgi)), sources(typed("b", tgi))
    assert a is b and sources(typed("a", tgi)) is a, "groups configured alike share one source, pass after pass"
    plain = sources(typed("c"))
    assert plain is not a and len(built) == 2
    sources(typed("a"))  # a now reads as c does: its history leaves the TGI source, which b still uses
    assert made[0].forgotten == [(NS, "a")] and sources.built == 2
    sources.forget(NS, "b")  # b deleted: nobody uses the TGI source any more
    assert sources.built == 1 and made[0].forgotten == [(NS, "a"), (NS, "b")]
    assert sources(typed("b", tgi)) is not a and len(built) == 3, "built again when needed again"
    none = GroupSources(SourceDefaults("none"), MemoryStore().snapshot, build=build)
    assert isinstance(none(typed("d")), NoSource) and none(typed("e", {"source": "pods"})) is not None and len(built) == 4
