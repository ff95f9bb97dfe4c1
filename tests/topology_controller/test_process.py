"""The topology controller's process in-process: its loop batches a burst of changes into
one pass, it serves its probes and metrics under its own names, holds and releases its own
Lease (not the operator's), serves ClusterTopology admission and registers its own
webhook configuration; and it stands alone (imports no group controller)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

from support.controller_world import design_group, world
from support.in_thread import free_port, running
from tandem.topology_controller.process import LEASE_NAME, WEBHOOK_CONFIG, TopologyControllerConfig, run
from tandem.topology_controller.reconcile import TopologySettings
from tandem.topology_controller.runner import TopologyController
from tandem.runtime.schedule import PassSchedule


def until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


class HandClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_node_events_inside_the_batching_window_is_one_pass():
    store = world()
    clock = HandClock()
    controller = TopologyController(store, clock, TopologySettings(), schedule=PassSchedule(debounce=0.2))
    assert controller.tick(0.0) is not None and controller.passes == 1, "the first pass runs at once"
    for step in range(50):  # a rack of nodes joining: fifty events in 0.1 s
        clock.now = 1.0 + step * 0.002
        controller.changed("Node", "ADDED", {})
    for now in (1.05, 1.1, 1.15):
        clock.now = now
        assert controller.tick(now) is None, "still inside the window"
    clock.now = 1.2
    assert controller.tick(1.2) is not None and controller.passes == 2
    clock.now = 1.5
    assert controller.tick(1.5) is None, "one pass for the whole burst"


def test_a_pass_whose_writes_failed_retryably_is_retried_with_back_off_and_counted():
    from support.controller_world import FaultyWriter
    from tandem.errors import ServiceUnavailable
    from tandem.topology_controller.kinds import BACKEND_KINDS

    store = world()
    for kind in BACKEND_KINDS["volcano"]:
        store.register_kind(kind.key, cluster_scoped=True, status=False)
    down = {"on": True}
    cluster = FaultyWriter(store, lambda n, verb: ServiceUnavailable("the API is away") if down["on"] and verb == "create" else None)
    clock = HandClock()
    controller = TopologyController(cluster, clock, TopologySettings(("volcano",)), schedule=PassSchedule(debounce=0.2, retry_base=0.5))
    report = controller.tick(0.0)
    assert report is not None and report.failures and report.retryable
    clock.now = 0.4
    assert controller.tick(0.4) is None, "not before the back-off"
    down["on"] = False
    clock.now = 0.5
    again = controller.tick(0.5)
    assert again is not None and again.failures == 0 and store.list("HyperNode"), "retried without any change to wake it"
    metrics = controller.metrics.exposition().decode()
    assert f"tandem_topology_write_failures_total {float(report.failures)}" in metrics
    created = len(store.list("HyperNode"))
    assert f'tandem_topology_writes_total{{backend="volcano",kind="HyperNode",verb="create"}} {float(created)}' in metrics


def test_a_write_that_keeps_failing_retryably_is_retried_ever_more_slowly():
    """An API that answers 503 to every create is not asked again once a second for ever:
    the gaps between passes double (0.5 s, 1 s, 2 s, ...) as docs/topology-controller.md says."""
    from support.controller_world import FaultyWriter
    from tandem.errors import ServiceUnavailable
    from tandem.topology_controller.kinds import BACKEND_KINDS

    store = world()
    for kind in BACKEND_KINDS["volcano"]:
        store.register_kind(kind.key, cluster_scoped=True, status=False)
    cluster = FaultyWriter(store, lambda n, verb: ServiceUnavailable("the API is away") if verb == "create" else None)
    clock = HandClock()
    controller = TopologyController(cluster, clock, TopologySettings(("volcano",)), schedule=PassSchedule(debounce=0.2, retry_base=0.5))
    ran = []
    for step in range(0, 1600):
        clock.now = step / 100
        report = controller.tick(clock.now)
        if report is not None:
            assert report.retryable
            ran.append(clock.now)
    gaps = [round(b - a, 2) for a, b in zip(ran, ran[1:])]
    assert gaps == [0.5, 1.0, 2.0, 4.0, 8.0], gaps


def test_a_pass_that_raises_is_retried_with_back_off_not_at_once_in_a_hot_loop(monkeypatch):
    """A bug a stored object sets off in every pass is logged and retried after the
    schedule's back-off, not a hundred times a second with a traceback each."""
    clock = HandClock()
    stop = threading.Event()
    attempts = []

    def broken(*_args, **_kwargs):
        attempts.append(clock.now)
        raise KeyError("a field the pass did not expect")

    class HandWake:
        """Waiting moves the hand clock on; ten seconds of it and the loop is stopped."""

        def clear(self):
            pass

        def set(self):
            pass

        def wait(self, timeout):
            clock.now += timeout
            if clock.now >= 10.0:
                stop.set()
            return False

    monkeypatch.setattr("tandem.topology_controller.runner.reconcile", broken)
    controller = TopologyController(world(), clock, schedule=PassSchedule(debounce=0.2, retry_base=0.5))
    controller._wake = HandWake()
    controller.run(stop)
    assert 3 <= len(attempts) <= 6, f"{len(attempts)} attempts in 10 s"


def test_a_pass_after_the_first_lists_no_node_not_even_for_its_metrics():
    """The pass follows nodes through the informers' journal, node by node; the gauge of
    nodes takes the pass's count, rather than listing every node again after each pass
    (a sorted list of 65,536 nodes costs more than the pass it follows)."""
    store = world()

    class Counting:
        def __init__(self):
            self.node_lists = 0

        def __getattr__(self, name):
            return getattr(store, name)

        def snapshot(self):
            reader, outer = store.snapshot(), self

            class Reader:
                def __getattr__(self, name):
                    return getattr(reader, name)

                def list(self, kind, *args, **kwargs):
                    outer.node_lists += kind == "Node"
                    return reader.list(kind, *args, **kwargs)

            return Reader()

    cluster = Counting()
    clock = HandClock()
    controller = TopologyController(cluster, clock, TopologySettings(), schedule=PassSchedule(debounce=0.2))
    assert controller.tick(0.0) is not None
    cluster.node_lists = 0
    [first, *_] = store.list("Node")
    store.delete("Node", None, first["metadata"]["name"])
    controller.changed("Node", "DELETED", first)
    clock.now = 1.0
    assert controller.tick(1.0) is not None
    assert cluster.node_lists == 0
    assert f"tandem_topology_nodes {float(len(store.list('Node')))}" in controller.metrics.exposition().decode()


def test_the_unlabeled_gauge_follows_the_pass_and_a_topology_gone_drops_its_series():
    store = world()
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare", "labels": {}}, "spec": {}, "status": {}})
    controller = TopologyController(store, HandClock(), TopologySettings())
    assert controller.tick(0.0) is not None
    exposition = controller.metrics.exposition().decode()
    unlabeled = store.get("ClusterTopology", None, "default")["status"]["unlabeledNodes"]
    assert unlabeled >= 1 and f'tandem_topology_unlabeled_nodes{{topology="default"}} {float(unlabeled)}' in exposition
    store.patch("ClusterTopology", None, "default", {"metadata": {"finalizers": None}})
    store.delete("ClusterTopology", None, "default")
    controller.changed()
    assert controller.tick(1.0) is not None
    assert "tandem_topology_unlabeled_nodes{" not in controller.metrics.exposition().decode()

def test_the_process_runs_passes_serves_its_metrics_and_releases_its_own_lease(caplog):
    store = world()
    config = TopologyControllerConfig(leader_elect=True, identity="topo", metrics_port=free_port(), health_port=free_port(), bind_host="127.0.0.1")
    with caplog.at_level("INFO", logger="tandem.topology"), running(run, config, store) as status:
        assert until(lambda: (store.list("ClusterTopology")[0].get("status") or {}).get("nodes") == len(store.list("Node")))
        texts = {}
        for path, port in (("/metrics", config.metrics_port), ("/healthz", config.health_port), ("/readyz", config.health_port)):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                texts[path] = response.read().decode()
        lease = store.get("Lease", "tandem-system", LEASE_NAME)
        assert lease["spec"]["holderIdentity"] == "topo"
    assert status == [0]
    metrics = texts["/metrics"]
    for line in ("tandem_topology_leader 1.0", "tandem_topology_topologies 1.0", f"tandem_topology_nodes {float(len(store.list('Node')))}"):
        assert line in metrics, line
    assert "tandem_topology_passes_total" in metrics and "tandem_topology_pass_duration_seconds_bucket" in metrics
    assert "tandem_units" not in metrics, "none of the operator's series"
    assert texts["/healthz"] == "ok\n" and texts["/readyz"] == "ok\n"
    assert "holderIdentity" not in store.get("Lease", "tandem-system", LEASE_NAME)["spec"], "released on the way out"
    assert not [l for l in store.list("Lease", "tandem-system") if l["metadata"]["name"] == "tandem-operator"], "the operator's Lease untouched"


def test_the_process_refuses_deleting_a_used_topology_through_its_own_webhook(tmp_path):
    store = world(design_group())
    port = free_port()
    config = TopologyControllerConfig(metrics_port=0, health_port=0, bind_host="127.0.0.1", webhook_port=port, webhook_cert_dir=str(tmp_path),
                                      manage_webhook_config=True)
    with running(run, config, store):
        assert until(lambda: bool(store.list("ValidatingWebhookConfiguration")))
        [registered] = store.list("ValidatingWebhookConfiguration")
        assert registered["metadata"]["name"] == WEBHOOK_CONFIG != "tandem-operator"
        [webhook] = registered["webhooks"]
        assert webhook["rules"][0]["resources"] == ["clustertopologies"] and "DELETE" in webhook["rules"][0]["operations"]
        context = ssl.create_default_context(cadata=base64.b64decode(webhook["clientConfig"]["caBundle"]).decode())
        topology = store.list("ClusterTopology")[0]
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": {"uid": "u1", "operation": "DELETE", "object": None, "oldObject": topology}}).encode()
        request = urllib.request.Request(webhook["clientConfig"]["url"], data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            answer = json.loads(response.read())["response"]
    assert answer["uid"] == "u1" and answer["allowed"] is False
    group = design_group()["metadata"]
    assert f"{group.get('namespace', 'default')}/{group['name']}" in answer["status"]["message"]


def test_the_topology_controller_imports_no_group_controller_and_the_operator_no_topology_controller():
    code = ("import sys, tandem.topology_controller.process; "
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('tandem.') and m.count('.') >= 1}))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.replace("'", '"'))
    assert not {"controller", "placement", "coordination", "autoscaling", "operator", "sim"} & set(loaded), loaded
    code = "import sys, tandem.operator.process; print(any(m.startswith('tandem.topology_controller') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_a_write_the_client_fails_on_is_logged_with_its_exception_and_retried(caplog):
    """A create the client cannot finish (it raises, not an ApiError) is a retryable failure
    of that write: the pass carries on, the warning carries the traceback, the back-off retries."""
    import logging

    from support.controller_world import FaultyWriter
    from tandem.topology_controller.kinds import BACKEND_KINDS

    store = world()
    for kind in BACKEND_KINDS["volcano"]:
        store.register_kind(kind.key, cluster_scoped=True, status=False)
    cluster = FaultyWriter(store, lambda n, verb: ValueError("Expecting value: line 1 column 1 (char 0)") if verb == "create" else None)
    controller = TopologyController(cluster, HandClock(), TopologySettings(("volcano",)), schedule=PassSchedule(retry_base=0.5))
    with caplog.at_level(logging.WARNING, logger="tandem.topology"):
        report = controller.tick(0.0)
    assert report is not None and report.failures and report.retryable and report.status_patches == 1
    warned = [r for r in caplog.records if "ValueError" in r.getMessage()]
    assert warned and warned[0].exc_info is not None and warned[0].exc_info[0] is ValueError
    assert controller.tick(0.4) is None and controller.tick(0.5) is not None, "retried after the back-off"
