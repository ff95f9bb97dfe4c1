"""The operator process end to end in-process: connect, elect, serve, loop, stop on request."""

from __future__ import annotations

import threading
import time
import urllib.request

from support.controller_world import design_group, world
from support.in_thread import free_port, running
from tandem.operator.process import OperatorConfig, run


def test_the_process_runs_passes_serves_metrics_and_stops_cleanly(caplog):
    store = world(design_group())
    config = OperatorConfig(leader_elect=True, identity="test", metrics_port=free_port(), health_port=free_port(), bind_host="127.0.0.1")
    with caplog.at_level("INFO", logger="tandem.operator"), running(run, config, store) as status:
        deadline = time.time() + 10
        while not store.list("Pod") and time.time() < deadline:
            time.sleep(0.02)
        ports = [int(r.getMessage().rsplit(" ", 1)[1]) for r in caplog.records if r.getMessage().startswith("serving ")]
        texts = {}
        for port in ports:
            for path in ("/metrics", "/healthz"):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                        texts[path] = response.read().decode()
                except urllib.error.HTTPError:
                    pass
    assert status == [0]
    assert store.list("Pod"), "passes ran and created pods"
    assert "tandem_leader 1.0" in texts["/metrics"] and texts["/healthz"] == "ok\n"
    assert "holderIdentity" not in store.get("Lease", "tandem-system", "tandem-operator")["spec"], "the lease was released"


def test_the_process_serves_admission_and_registers_its_webhook(tmp_path, caplog):
    import base64
    import json
    import ssl

    store = world()
    port = free_port()
    config = OperatorConfig(metrics_port=0, health_port=0, bind_host="127.0.0.1", webhook_port=port, webhook_cert_dir=str(tmp_path), manage_webhook_config=True)
    with running(run, config, store):
        deadline = time.time() + 10
        while not store.list("ValidatingWebhookConfiguration") and time.time() < deadline:
            time.sleep(0.02)
        registered = store.list("ValidatingWebhookConfiguration")[0]["webhooks"][0]
        assert registered["clientConfig"]["url"] == f"https://127.0.0.1:{port}/validate" and registered["failurePolicy"] == "Fail"
        context = ssl.create_default_context(cadata=base64.b64decode(registered["clientConfig"]["caBundle"]).decode())
        bad = design_group()
        bad["spec"]["replicas"] = "two"
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x", "operation": "CREATE", "object": bad}}).encode()
        req = urllib.request.Request(registered["clientConfig"]["url"], data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=context, timeout=10) as response:
            answer = json.loads(response.read())["response"]
        assert answer["allowed"] is False and answer["status"]["message"].startswith("spec.replicas")
    assert {p.name for p in tmp_path.iterdir()} == {"ca.crt", "tls.crt", "tls.key"}, "a fresh pair in an empty directory"


class _Unreachable:
    """A cluster whose creates fail `times` times with `error`, then reach the store."""

    def __init__(self, store, error, times):
        self.store, self.error, self.left, self.attempts = store, error, times, 0

    def create(self, obj):
        self.attempts += 1
        if self.left:
            self.left -= 1
            raise self.error
        return self.store.create(obj)

    def patch(self, *args, **kwargs):
        return self.store.patch(*args, **kwargs)


def test_the_webhook_configuration_is_registered_once_the_api_server_answers(caplog):
    from tandem.errors import Forbidden, ServiceUnavailable
    from tandem.operator.process import register_when_reachable

    store = world()
    down = _Unreachable(store, ServiceUnavailable("cannot reach the API server"), times=3)
    with caplog.at_level("WARNING", logger="tandem.operator"):
        assert register_when_reachable(down, "https://127.0.0.1:1/validate", "", threading.Event(), first_delay=0.01)
    assert down.attempts == 4 and len(store.list("ValidatingWebhookConfiguration")) == 1
    assert sum("retrying" in r.message for r in caplog.records) == 3
    refused = _Unreachable(world(), Forbidden("validatingwebhookconfigurations is forbidden"), times=10)
    caplog.clear()
    with caplog.at_level("ERROR", logger="tandem.operator"):
        assert not register_when_reachable(refused, "https://127.0.0.1:1/validate", "", threading.Event(), first_delay=0.01)
    assert refused.attempts == 1 and [r.levelname for r in caplog.records] == ["ERROR"], "a terminal answer: said once, not retried"
    stopped = threading.Event()
    stopped.set()
    assert not register_when_reachable(_Unreachable(world(), ServiceUnavailable("down"), times=10), "u", "", stopped)
