"""Admission as a cluster runs it: `tandem apiserver` and `tandem operator --webhook-port N
--manage-webhook-config` as processes, and the real kubectl.

The operator registers its ValidatingWebhookConfiguration with the server, which from then
on sends every InferenceGroup write to it over HTTPS: malformed groups are refused with
every field path (the CRD's CEL rules catch some before the webhook is asked, the webhook
the rest: a level the ClusterTopology lacks, an affinity to a role the group lacks), and
nothing is created; a valid group is admitted, one that could never fit with a `Warning:`.
With the operator stopped the configuration stays, so writes fail closed.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

import json
import re
import socket
import subprocess
import time

from e2e.processes import KUBECTL, NO_KUBECTL, REPO, ApiServer, OperatorProcess, free_port, start_apiserver, start_operator, tandem, wait_for
from tandem.topology.generate import generate_cluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
NS = "admission"
CONFIG = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/tandem-operator"
WEBHOOK = "validate.tandem.dev"


def group(name: str, *, gpus: int = 2, pods: int = 1, pack: str = "rack", **role: Any) -> dict[str, Any]:
    """Prefill and decode, one replica each of `pods` pods with `gpus` GPUs, packed in a `pack`."""
    template = {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                                         "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}
    roles = [{"name": name_, "replicas": 1, "podsPerReplica": pods, "template": template} for name_ in ("prefill", "decode")]
    roles[0].update(role)
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "InferenceGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "topologyName": "default", "topology": {"pack": {"required": pack}}, "roles": roles}}


def documents(*objects: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objects)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The server with tandem's CRDs (and their CEL rules), 4 nodes of 8 GPUs in 2 racks, and the topology."""
    work = tmp_path_factory.mktemp("admission")
    topology, nodes = generate_cluster([("rack", 2), ("host", 2)], 8)
    (work / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    api = start_apiserver(work, "--cluster", str(work / "nodes.yaml"))
    api.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(topology))
    yield api
    assert api.stop() == 0, "SIGTERM ends the server cleanly"
    assert api.stderr.read_text() == "", "nothing went wrong on the server's side"


@pytest.fixture
def operator(server: ApiServer, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator serving the webhook on a port of its own, once its configuration points there."""
    port = free_port()
    process = start_operator(server, tmp_path, f"webhook-{port}", "--webhook-port", str(port), "--manage-webhook-config")
    try:
        wait_for(lambda: _webhook_url(server).endswith(f":{port}/validate"), 20, "the operator's ValidatingWebhookConfiguration")
        yield process
    finally:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGTERM)
            process.process.wait(timeout=10)


def _webhook_url(server: ApiServer) -> str:
    try:
        return server.get(CONFIG)["webhooks"][0]["clientConfig"]["url"]
    except OSError:
        return ""


def _groups(server: ApiServer) -> list[str]:
    listed = server.kubectl("get", "ig", "-n", NS, "-o", "name", check=False)
    return listed.stdout.split()


def test_malformed_groups_are_refused_with_every_field_path_and_good_ones_admitted(server, operator):
    cel = group("cel", minReplicas=2)  # the CRD's rule, checked by the server itself
    levels = group("levels", pack="zone")  # the topology has no such level: only the webhook knows
    affinity = group("affinity")
    affinity["spec"]["affinity"] = [{"from": "prefill", "to": "nosuch", "level": "rack"}]
    refused = server.kubectl("apply", "-f", "-", stdin=documents(cel, levels, affinity), check=False)
    assert refused.returncode != 0
    for path in ("spec.roles[0].minReplicas: Invalid value: \"object\": minReplicas must be <= replicas",
                 "spec.topology.pack.required: unknown level 'zone'", "spec.affinity[0].to"):
        assert path in refused.stderr, refused.stderr
    assert f'admission webhook "{WEBHOOK}" denied the request' in refused.stderr
    assert _groups(server) == [], "nothing was created"

    admitted = server.kubectl("apply", "-f", "-", stdin=documents(group("fits")))
    assert admitted.stdout.strip() == "inferencegroup.tandem.dev/fits created" and "Warning" not in admitted.stderr

    never = server.kubectl("apply", "-f", "-", stdin=documents(group("never", gpus=8, pods=2, pack="host")))
    assert never.stdout.strip() == "inferencegroup.tandem.dev/never created"
    assert "Warning: the group's minimum cannot fit this cluster even with every node empty" in never.stderr
    assert _groups(server) == ["inferencegroup.tandem.dev/fits", "inferencegroup.tandem.dev/never"]
    server.kubectl("delete", "ig", "fits", "never", "-n", NS)


def test_scaling_a_group_goes_through_the_same_checks(server, operator):
    """`kubectl scale` writes the scale subresource, not the group: it is checked as the
    group it would make, so a count no cluster of this size could hold is refused."""
    server.kubectl("apply", "-f", "-", stdin=documents(group("scaled")))
    try:
        refused = server.kubectl("scale", "ig", "scaled", "-n", NS, "--replicas=50000", check=False)
        assert refused.returncode != 0
        assert f'admission webhook "{WEBHOOK}" denied the request: spec.replicas: 50,000 units could never fit' in refused.stderr, refused.stderr
        stored = server.kubectl("get", "ig", "scaled", "-n", NS, "-o", "jsonpath={.spec.replicas}")
        assert stored.stdout == "1", "nothing was written"
        assert server.kubectl("scale", "ig", "scaled", "-n", NS, "--replicas=2").returncode == 0
        assert server.kubectl("get", "ig", "scaled", "-n", NS, "-o", "jsonpath={.spec.replicas}").stdout == "2"
    finally:
        server.kubectl("delete", "ig", "scaled", "-n", NS)


def test_a_topology_groups_name_cannot_be_deleted_nor_its_levels_broken(server, operator):
    """`kubectl delete ctopo` of a topology a group names is refused with the group named, and so
    is a change of levels that would break the group; `kubectl get ctopo` shows the status columns."""
    server.kubectl("apply", "-f", "-", stdin=documents(group("user")))
    try:
        refused = server.kubectl("delete", "ctopo", "default", check=False)
        assert refused.returncode != 0
        assert (f'admission webhook "{WEBHOOK}" denied the request: ClusterTopology \'default\' is used by 1 InferenceGroup(s): '
                f"{NS}/user; delete them or point their spec.topologyName elsewhere first") in refused.stderr, refused.stderr
        topology = yaml.safe_load(server.kubectl("get", "ctopo", "default", "-o", "yaml").stdout)
        flat = {**topology, "spec": {"levels": [level for level in topology["spec"]["levels"] if level["name"] != "rack"]}}
        broken = server.kubectl("apply", "-f", "-", stdin=documents(flat), check=False)
        assert broken.returncode != 0
        assert f"spec.levels: InferenceGroup {NS}/user uses this topology and the change breaks it: spec.topology.pack.required" in broken.stderr
        header = server.kubectl("get", "ctopo").stdout.splitlines()[0].split()
        assert header == ["NAME", "LEVELS", "DOMAINS", "NODES", "UNLABELED", "READY", "AGE"]
    finally:
        server.kubectl("delete", "ig", "user", "-n", NS)
    assert server.kubectl("get", "ctopo", "default", "-o", "name").stdout.strip() == "clustertopology.tandem.dev/default"


def test_with_the_operator_stopped_writes_fail_closed(server, operator):
    assert server.kubectl("apply", "-f", "-", stdin=documents(group("before"))).returncode == 0
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=10) == 0
    closed = server.kubectl("apply", "-f", "-", stdin=documents(group("after")), check=False)
    assert closed.returncode != 0
    assert f'Internal error occurred: failed calling webhook "{WEBHOOK}": failed to call webhook' in closed.stderr
    assert "connect: connection refused" in closed.stderr
    assert _groups(server) == ["inferencegroup.tandem.dev/before"], "nothing more was created"
    changed = server.kubectl("scale", "ig", "before", "-n", NS, "--replicas=2", check=False)
    assert changed.returncode != 0 and f'failed calling webhook "{WEBHOOK}"' in changed.stderr, "scaling fails closed too"
    server.kubectl("delete", "ig", "before", "-n", NS)


def test_the_temporary_certificate_directory_goes_with_the_operator(server, operator):
    """A webhook certificate made for one run (its private key) does not outlive the run."""
    written = [json.loads(line)["message"] for line in operator.log().splitlines() if "self-signed webhook certificate" in line]
    directory = Path(re.sub(r"^.* to ", "", written[0]))
    assert (directory / "tls.key").is_file()
    operator.process.send_signal(signal.SIGTERM)
    assert operator.process.wait(timeout=10) == 0
    assert not directory.exists(), f"{directory} left behind"


@pytest.mark.parametrize("flag", ["--health-port", "--metrics-port", "--webhook-port"])
def test_a_port_in_use_is_one_error_line_not_a_traceback(server, flag):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--health-port": "0", "--metrics-port": "0", "--webhook-port": "0", flag: str(port)}
        run = subprocess.run(tandem("operator", "--kubeconfig", str(server.kubeconfig), *[a for kv in ports.items() for a in kv]),
                             capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if " INFO " not in line]  # the log may say what it did before
    assert errors == [f"error: {flag}: cannot listen on 0.0.0.0:{port}: Address already in use"], run.stderr
    made = re.findall(r"self-signed webhook certificate to (\S+)", run.stderr)
    assert all(not Path(d).exists() for d in made), "the certificate made for the run went with it"


def test_an_operator_started_before_its_api_server_registers_its_webhook_once_the_server_is_up(tmp_path):
    """Start order must not matter: the operator keeps trying until the server answers."""
    port, webhook = free_port(), free_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "local", "user": {}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local"}}],
    }))
    stderr = tmp_path / "operator.stderr"
    operator = subprocess.Popen(tandem("operator", "--kubeconfig", str(kubeconfig), "--health-port", "0", "--metrics-port", "0",
                                       "--webhook-port", str(webhook), "--manage-webhook-config"),
                                stdout=subprocess.DEVNULL, stderr=stderr.open("w"), cwd=REPO)
    api = None
    try:
        wait_for(lambda: "cannot register the admission webhook configuration yet" in stderr.read_text() or operator.poll() is not None,
                 30, "the operator trying to register")
        assert operator.poll() is None, stderr.read_text()
        topology, nodes = generate_cluster([("host", 2)], 8)
        (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
        api = subprocess.Popen(tandem("apiserver", "--kubeconfig", str(tmp_path / "server-kubeconfig"), "--port", str(port),
                                      "--cluster", str(tmp_path / "nodes.yaml")),
                               stdout=subprocess.DEVNULL, stderr=(tmp_path / "apiserver.stderr").open("w"), cwd=REPO)
        server = ApiServer(api, kubeconfig, tmp_path, f"http://127.0.0.1:{port}", "", tmp_path / "apiserver.stderr")
        wait_for(lambda: _webhook_url(server).endswith(f":{webhook}/validate"), 60, "the webhook configuration")
        assert "Traceback" not in stderr.read_text()
    finally:
        for process in (operator, api):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=10)


def test_a_renewed_certificate_is_served_and_registered_without_a_restart(server, tmp_path):
    """The certificate directory gets a new pair with a new CA (a renewal): the operator
    serves it and registers the new CA bundle, and writes keep being admitted."""
    from datetime import datetime, timezone

    from tandem.runtime.certs import make_certificates

    certs = tmp_path / "certs"
    certs.mkdir()
    make_certificates(["127.0.0.1", "localhost"], datetime.now(timezone.utc)).write(certs)
    port = free_port()
    process = start_operator(server, tmp_path, f"renew-{port}", "--webhook-port", str(port), "--webhook-cert-dir", str(certs),
                             "--manage-webhook-config")
    try:
        wait_for(lambda: _webhook_url(server).endswith(f":{port}/validate"), 20, "the operator's ValidatingWebhookConfiguration")
        before = server.get(CONFIG)["webhooks"][0]["clientConfig"]["caBundle"]
        make_certificates(["127.0.0.1", "localhost"], datetime.now(timezone.utc)).write(certs)
        wait_for(lambda: server.get(CONFIG)["webhooks"][0]["clientConfig"]["caBundle"] != before, 30, "the new CA bundle")
        admitted = server.kubectl("apply", "-f", "-", stdin=documents(group("renewed")))
        assert admitted.stdout.strip() == "inferencegroup.tandem.dev/renewed created", admitted.stderr
        refused = server.kubectl("apply", "-f", "-", stdin=documents(group("refused", pack="zone")), check=False)
        assert f'admission webhook "{WEBHOOK}" denied the request' in refused.stderr, "the webhook itself answered, over the new pair"
    finally:
        server.kubectl("delete", "ig", "renewed", "-n", NS, "--ignore-not-found")
        process.process.send_signal(signal.SIGTERM)
        process.process.wait(timeout=10)


def test_the_metrics_say_what_an_sre_alerts_on(server, tmp_path):
    """Per group units and per-role replicas wanted and had, conditions, units by state and
    by operation (the rollout), the last pass, the webhook's verdicts and latency, the
    informers' delivery delay and disconnection, and the process's own figures."""
    import urllib.request

    metrics_port, webhook = free_port(), free_port()
    process = start_operator(server, tmp_path, f"metrics-{metrics_port}", "--metrics-port", str(metrics_port),
                             "--webhook-port", str(webhook), "--manage-webhook-config")
    try:
        wait_for(lambda: _webhook_url(server).endswith(f":{webhook}/validate"), 20, "the operator's ValidatingWebhookConfiguration")
        server.kubectl("apply", "-f", "-", stdin=documents(group("watched")))
        server.kubectl("apply", "-f", "-", stdin=documents(group("denied", pack="zone")), check=False)

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as answer:
                return answer.read().decode()

        labels = f'group="watched",kind="functional",namespace="{NS}"'
        wait_for(lambda: f"tandem_group_units{{{labels}}} 1.0" in scrape(), 60, "the group functional in the metrics")
        text = scrape()
        for line in (f'tandem_group_units{{group="watched",kind="desired",namespace="{NS}"}} 1.0',
                     f'tandem_group_role_replicas{{group="watched",kind="ready",namespace="{NS}",role="prefill"}} 1.0',
                     f'tandem_group_role_replicas{{group="watched",kind="desired",namespace="{NS}",role="decode"}} 1.0',
                     f'tandem_group_condition{{condition="Available",group="watched",namespace="{NS}"}} 1.0',
                     'tandem_webhook_requests_total{verdict="allowed"}', 'tandem_webhook_requests_total{verdict="denied"} 1.0',
                     "tandem_webhook_review_seconds_count", "tandem_last_successful_pass_timestamp_seconds ",
                     "process_resident_memory_bytes", "python_info", "python_gc_collections_total",
                     f'tandem_group_unit_states{{group="watched",namespace="{NS}",state="Complete"}} 1.0',
                     f'tandem_group_unit_states{{group="watched",namespace="{NS}",state="Stalled"}} 0.0',
                     f'tandem_group_unit_operations{{group="watched",namespace="{NS}",operation="Idle"}} 1.0',
                     'tandem_informer_disconnected_seconds{kind="Pod"} 0.0',
                     'tandem_informer_event_delay_seconds_bucket{kind="Pod",le="1.0"}'):
            assert line in text, line
        delivered = re.search(r'tandem_informer_event_delay_seconds_count\{kind="Pod"\} ([0-9.]+)', text)
        assert delivered and float(delivered.group(1)) >= 2, "each pod's ADDED event timed from its creationTimestamp"
        assert "tandem_informer_lag_seconds" not in text
        server.kubectl("delete", "ig", "watched", "-n", NS)
        wait_for(lambda: 'group="watched"' not in scrape(), 30, "the deleted group's series gone")
    finally:
        server.kubectl("delete", "ig", "watched", "-n", NS, "--ignore-not-found")
        process.process.send_signal(signal.SIGTERM)
        process.process.wait(timeout=10)


def test_text_logs_show_each_pass_with_its_figures(server, tmp_path):
    webhook = free_port()  # an earlier test's stopped operator left the (fail-closed) webhook: point it here
    process = start_operator(server, tmp_path, "text-logs", "--log-format", "text", "--webhook-port", str(webhook), "--manage-webhook-config")
    try:
        wait_for(lambda: _webhook_url(server).endswith(f":{webhook}/validate"), 20, "the operator's ValidatingWebhookConfiguration")
        server.kubectl("apply", "-f", "-", stdin=documents(group("logged")))
        line = wait_for(lambda: next((l for l in process.log().splitlines() if "INFO tandem.operator: pass " in l and "placed=" in l), None),
                        30, "a pass line that placed pods")
        assert re.search(r"pass seconds=[0-9.]+ writes=[0-9]+ placed=[0-9]+", line), line
    finally:
        server.kubectl("delete", "ig", "logged", "-n", NS, "--ignore-not-found")
        process.process.send_signal(signal.SIGTERM)
        process.process.wait(timeout=10)


def test_text_logs_say_each_decision_once_and_nothing_while_settled(server, tmp_path):
    """`kubectl scale` to a second unit: one line per replica made (its pods' nodes on it),
    not one per pod; then, settled, passes every second (`--resync 1`) log nothing."""
    webhook = free_port()
    process = start_operator(server, tmp_path, "decisions", "--log-format", "text", "--resync", "1",
                             "--webhook-port", str(webhook), "--manage-webhook-config")
    try:
        wait_for(lambda: _webhook_url(server).endswith(f":{webhook}/validate"), 20, "the operator's ValidatingWebhookConfiguration")
        server.kubectl("apply", "-f", "-", stdin=documents(group("decided", pods=2)))

        def settled(units: int) -> bool:
            got = server.get(f"/apis/tandem.dev/v1alpha1/namespaces/{NS}/inferencegroups/decided")
            status = got.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            return status.get("functionalUnits") == units and conditions.get("Progressing") == "False"

        wait_for(lambda: settled(1), 60, "one unit settled")
        server.kubectl("scale", "ig", "decided", "-n", NS, "--replicas=2")
        wait_for(lambda: settled(2), 60, "two units settled")
        lines = [line.split(" INFO tandem.operator: ", 1)[1] for line in process.log().splitlines() if " INFO tandem.operator: " in line]
        made = [line for line in lines if line.startswith(f"group {NS}/decided unit 1: ") and " created" in line]
        assert len(made) == 3, made  # the peers file, the prefill replica, the decode replica
        assert made[0] == f"group {NS}/decided unit 1: peers file created"
        for role in ("prefill", "decode"):
            assert any(re.fullmatch(rf"group {NS}/decided unit 1: {role} replica 0 created, placed on [^ ,]+(, [^ ,]+)?", line) for line in made), made
        assert not any("decided-1-" in line for line in lines), "no pod named: a line per replica, not per pod"
        time.sleep(1.0)  # the last pass's writes come back
        quiet = len(process.log().splitlines())
        time.sleep(3.0)
        assert process.log().splitlines()[quiet:] == [], "settled: passes run and say nothing"
    finally:
        server.kubectl("delete", "ig", "decided", "-n", NS, "--ignore-not-found")
        process.process.send_signal(signal.SIGTERM)
        process.process.wait(timeout=10)
