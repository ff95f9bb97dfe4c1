"""Issue 29's "done when": the operator's autoscaler sizes a real group under real load.

`tandem apiserver --engines` (SGLang stand-ins timed by the serving model, models loading in
5% of their time), `tandem operator`, the SGLang prefill/decode group of
examples/serving/sglang-pd.yaml with a `spec.autoscaling` added (FixedRatio 1:2 on decode
tokens/s, short windows so the story fits in well under a minute), and SGLang's real router
in front, with the example's flags, finding the pods through its own Kubernetes client. The
story, once with the pods' own `/metrics` and once through a real Prometheus that finds the
pods through the API server (`http_sd_configs` on `/tandem/prometheus/.../pods`: Kubernetes'
pod role, which Debian's build lacks):

1. idle at 1 prefill / 1 decode; a load step through the router: the first scale-up is a
   panic (the recommendation is over 200% of the count, so the 4 s scale-up window is
   skipped) straight to 2 / 4, the bounds, and the router serves all six pods;
2. a metrics outage (every stand-in's `/metrics` answering 503, or Prometheus stopped) and
   the load stops: longer than a scale-down would take with live data, the counts hold and
   the group says `ScalingActive=False NoSignals`;
3. the metrics come back: the group scales down to 1 / 1.

Every count the group's spec took, and every `ScaledTo` event, is inside the 1:2 ratio
(prefill = ceil(decode / 2)) and the bounds. Nothing is asserted about how long a step took.
Everything binds and connects on 127.0.0.0/8.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from e2e.processes import KUBECTL, NO_KUBECTL, NO_ROUTER, ApiServer, RouterProcess, start_apiserver, start_operator, start_router, wait_for
from e2e.router_story import GROUP_FILE, documents, router_args
from support.prometheus_server import NO_PROMETHEUS, PROMETHEUS, prometheus_server
from support.router_load import Load
from tandem.cluster.pods import pod_ready
from tandem.topology.generate import generate_cluster

try:
    import sglang_router  # noqa: F401 - only whether it is there
    ROUTER = True
except ImportError:
    ROUTER = False

pytestmark = [pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL), pytest.mark.skipif(not ROUTER, reason=NO_ROUTER)]

SHAPE = [("block", 1), ("rack", 2), ("host", 4)]  # 8 nodes of 8 GPUs: 6 one-GPU pods and their surges
WINDOW_S = 5  # `tandem operator --metrics-window`: rates over the last 5 s (default 60)
INTERVAL_S = 2
SCALE_DOWN_S = 4
BOUNDS = {"prefill": (1, 2), "decode": (1, 4)}
AUTOSCALING = {
    "policy": "FixedRatio",
    "intervalSeconds": INTERVAL_S,
    "metricMaxAgeSeconds": 10,
    "roles": {role: {"minReplicas": low, "maxReplicas": high} for role, (low, high) in BOUNDS.items()},
    "stabilization": {"scaleUpSeconds": 4, "scaleDownSeconds": SCALE_DOWN_S},
    "panic": {"thresholdPercent": 200, "windowSeconds": 4},
    # far below what one stand-in decodes: any load asks for the most decode replicas
    "fixedRatio": {"ratio": {"prefill": 1, "decode": 2}, "decodeTokensPerSecondPerReplica": 10},
}
# Longer than a scale-down takes with live data once the load stops: the window emptied of
# the load's tokens, a decision, the scale-down window, and two intervals more.
OUTAGE_HOLD_S = WINDOW_S + INTERVAL_S + SCALE_DOWN_S + 2 * INTERVAL_S
SCALED = re.compile(r"^prefill=(\d+) decode=(\d+): ")


@dataclass
class Watch:
    """The group's counts every time they change (read 5 times a second)."""

    server: ApiServer
    namespace: str
    name: str
    counts: list[tuple[int, int]] = field(default_factory=list)  # spec.roles
    desired: list[tuple[int, int]] = field(default_factory=list)  # status.autoscaling.desired: each decision's
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "Watch":
        threading.Thread(target=self._follow, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def group(self) -> dict[str, Any]:
        return self.server.get(f"/apis/tandem.dev/v1alpha1/namespaces/{self.namespace}/inferencegroups/{self.name}")

    def pods(self) -> list[dict[str, Any]]:
        found = self.server.get(f"/api/v1/namespaces/{self.namespace}/pods?labelSelector=tandem.dev/group={self.name}")["items"]
        return [p for p in found if not p["metadata"].get("deletionTimestamp")]

    def _follow(self) -> None:
        while not self._stop.wait(0.2):
            try:
                group = self.group()
                roles = {r["name"]: r["replicas"] for r in group["spec"]["roles"]}
                if not self.counts or self.counts[-1] != (roles["prefill"], roles["decode"]):
                    self.counts.append((roles["prefill"], roles["decode"]))
                desired = ((group.get("status") or {}).get("autoscaling") or {}).get("desired")
                if desired and (not self.desired or self.desired[-1] != (desired["prefill"], desired["decode"])):
                    self.desired.append((desired["prefill"], desired["decode"]))
            except OSError:
                continue


def _condition(group: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (group.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _scaled_events(server: ApiServer, namespace: str, name: str) -> list[tuple[str, tuple[int, int]]]:
    """Every autoscaler `ScaledTo` event of the group, oldest first: (message, (prefill,
    decode)). (The reconcile pass's own `ScaledTo`, "1 unit: prefill 2, ... replicas (was
    ...)", says when the status reached the counts: not a decision.)"""
    items = server.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    events = sorted((e for e in items if e.get("reason") == "ScaledTo" and e["involvedObject"]["name"] == name),
                    key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))
    return [(e["message"], (int(m[1]), int(m[2]))) for e in events if (m := SCALED.match(e["message"]))]


def _in_ratio(prefill: int, decode: int) -> bool:
    """FixedRatio 1:2 within the bounds: decode sized, prefill its share of the smallest total."""
    return (BOUNDS["prefill"][0] <= prefill <= BOUNDS["prefill"][1] and BOUNDS["decode"][0] <= decode <= BOUNDS["decode"][1]
            and prefill == -(-decode // 2))


def _serving(watch: Watch, router: RouterProcess, prefill: int, decode: int) -> bool:
    """`prefill` and `decode` pods, all Ready, and the router's workers exactly those."""
    pods = watch.pods()
    roles = [p["metadata"]["labels"]["tandem.dev/role"] for p in pods]
    if (roles.count("prefill"), roles.count("decode")) != (prefill, decode) or not all(pod_ready(p) for p in pods):
        return False
    return router.workers() == {f"http://{p['status']['podIP']}:30000": p["metadata"]["labels"]["tandem.dev/role"] for p in pods}


def _scaling_active(watch: Watch, status: str) -> dict[str, Any] | None:
    condition = _condition(watch.group(), "ScalingActive")
    return condition if condition and condition["status"] == status else None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ApiServer]:
    topology, nodes = generate_cluster(SHAPE, 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--cluster", str(tmp_path / "topology.yaml"),
                             "--engines", "--engine-lifecycle-scale", "0.05")
    try:
        yield server
    finally:
        assert server.stop() == 0


def _story(server: ApiServer, tmp_path: Path, source: list[str], outage: Any, recover: Any) -> None:
    group = documents(GROUP_FILE)[0]
    namespace, name = group["metadata"]["namespace"], group["metadata"]["name"]
    for role in group["spec"]["roles"]:
        role["replicas"] = 1
    group["spec"]["autoscaling"] = AUTOSCALING
    (tmp_path / "group.yaml").write_text(yaml.safe_dump(group))
    operator = start_operator(server, tmp_path, "tandem-0", "--metrics-window", str(WINDOW_S), *source)
    router = load = None
    watch = Watch(server, namespace, name).start()
    try:
        server.kubectl("create", "namespace", namespace)
        server.kubectl("apply", "-f", str(tmp_path / "group.yaml"))
        _, args = router_args()
        router = start_router(tmp_path, args, server)
        wait_for(lambda: _serving(watch, router, 1, 1), 60, "1 prefill and 1 decode Ready and in the router")
        wait_for(lambda: _scaling_active(watch, "True"), 60, "ScalingActive=True: signals from the idle pods", every=0.2)

        # 1. a load step: panic, straight to the bounds, and the router serves every pod
        load = Load(router.url, 4, 128, 64).start()
        wait_for(lambda: _serving(watch, router, 2, 4), 60, "2 prefill and 4 decode Ready and in the router", every=0.2)
        up = _scaled_events(server, namespace, name)
        assert [counts for _, counts in up] == [(2, 4)], f"one scale-up, to the bounds: {up}"
        assert "panic: total 6 >= 200% of 2" in up[0][0], up[0][0]
        wait_for(lambda: _scaling_active(watch, "True"), 30, "every new pod measured", every=0.2)

        # 2. the metrics go away and the load stops: nothing scales down
        outage()
        load.stop()
        condition = wait_for(lambda: _scaling_active(watch, "False"), 30, "ScalingActive=False during the outage", every=0.2)
        assert condition["reason"] == "NoSignals", condition
        held_until = time.monotonic() + OUTAGE_HOLD_S
        while time.monotonic() < held_until:
            roles = {r["name"]: r["replicas"] for r in watch.group()["spec"]["roles"]}
            assert (roles["prefill"], roles["decode"]) == (2, 4), f"scaled during the outage: {roles}"
            condition = _condition(watch.group(), "ScalingActive")
            assert condition is not None and condition["status"] == "False", f"signals during the outage: {condition}"
            time.sleep(0.5)
        assert [counts for _, counts in _scaled_events(server, namespace, name)] == [(2, 4)], "no ScaledTo during the outage"

        # 3. the metrics are back, the load still gone: down to the minimums
        recover()
        wait_for(lambda: _serving(watch, router, 1, 1), 60, "back to 1 prefill and 1 decode, and the router with them", every=0.2)
        events = _scaled_events(server, namespace, name)
        assert events[0][1] == (2, 4) and events[-1][1] == (1, 1), events
        assert all(_in_ratio(*counts) for _, counts in events), f"a decision outside the ratio: {events}"
        assert all(_in_ratio(*counts) for counts in watch.counts), f"a count outside the ratio: {watch.counts}"
        assert all(_in_ratio(*counts) for counts in watch.desired) and (2, 4) in watch.desired, f"a decision outside the ratio: {watch.desired}"
        assert watch.counts[0] == (1, 1) and (2, 4) in watch.counts and watch.counts[-1] == (1, 1), watch.counts
        outcomes = load.outcomes
        assert sum(o.ok for o in outcomes) >= 10, f"the load was served: {[o.error for o in outcomes if not o.ok][:5]}"
    finally:
        watch.stop()
        if load is not None:
            load.stop()
        if router is not None:
            router.stop()
        operator.process.terminate()
        assert operator.process.wait(timeout=20) == 0, operator.log()


def _engines_metrics(server: ApiServer, down: bool) -> None:
    """The stand-ins' fault switch (`PUT /tandem/engines/faults`, docs/apiserver.md)."""
    request = urllib.request.Request(server.url + "/tandem/engines/faults", data=json.dumps({"metricsDown": down}).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.load(answer) == {"metricsDown": down}


def test_a_load_step_scales_up_an_outage_holds_and_the_end_of_load_scales_down(cluster: ApiServer, tmp_path: Path) -> None:
    _story(cluster, tmp_path, [], lambda: _engines_metrics(cluster, True), lambda: _engines_metrics(cluster, False))


@pytest.mark.skipif(PROMETHEUS is None, reason=NO_PROMETHEUS)
def test_the_same_through_a_prometheus_server_stopped_for_the_outage(cluster: ApiServer, tmp_path: Path) -> None:
    """Prometheus finds the pods itself: its http_sd asks the API server for what Kubernetes'
    pod role would give (Debian's build has no Kubernetes discovery), and the shipped job's
    relabel rules keep the leaders' `http` ports."""
    namespace = documents(GROUP_FILE)[0]["metadata"]["namespace"]
    with prometheus_server(tmp_path, discovery=f"{cluster.url}/tandem/prometheus/namespaces/{namespace}/pods") as prometheus:
        _story(cluster, tmp_path, ["--metrics-source", "prometheus", "--prometheus-url", prometheus.url], prometheus.stop, prometheus.restart)
