"""The `tandem` commands end to end: cluster generate, validate, plan and its JSON contract."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from tandem.api.loading import load_texts
from tandem.topology import ClusterSnapshot, TopologyView

STATES = {"Placed", "MinimumPlaced", "Unschedulable"}


# ----------------------------------------------------------------------------- cluster generate


def test_cluster_generate_writes_a_valid_cluster(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    result = run_cli("cluster", "generate", "--shape", "block=2,rack=2,host=4", "--gpus", "8", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() == f"wrote 16 nodes and ClusterTopology 'default' to {out}"

    validated = run_cli("validate", out)
    assert validated.exit_code == 0, validated.stderr
    assert validated.stdout.strip() == "ok: 16 node(s), 0 pod(s), 1 topology(ies), 0 group(s)"

    inputs = load_texts([(str(out), out.read_text(encoding="utf-8"))])
    topology = inputs.topologies["default"]
    assert [(lv.name, lv.node_label) for lv in topology.spec.levels] == [
        ("block", "network.tandem.dev/block"),
        ("rack", "network.tandem.dev/rack"),
        ("host", "kubernetes.io/hostname"),
    ]
    nodes = inputs.nodes
    assert len(nodes) == 16 and len({n.metadata.name for n in nodes}) == 16
    for node in nodes:
        labels = node.metadata.labels
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        assert re.fullmatch(r"block-[01]", labels["network.tandem.dev/block"])
        assert re.fullmatch(r"rack-[0-3]", labels["network.tandem.dev/rack"])
        assert node.status.allocatable["nvidia.com/gpu"] == 8_000
        assert node.ready() and not node.spec.unschedulable
    # 2 blocks of 2 racks of 4 hosts; rack names are global, so each rack sits in one block
    assert Counter(n.metadata.labels["network.tandem.dev/block"] for n in nodes) == {"block-0": 8, "block-1": 8}
    assert Counter(n.metadata.labels["network.tandem.dev/rack"] for n in nodes) == {f"rack-{i}": 4 for i in range(4)}
    rack_block = {(n.metadata.labels["network.tandem.dev/rack"], n.metadata.labels["network.tandem.dev/block"]) for n in nodes}
    assert len(rack_block) == 4


def test_cluster_generate_to_stdout_is_deterministic(run_cli) -> None:
    first = run_cli("cluster", "generate", "--shape", "rack=2,host=3", "--gpus", "0", "--topology-name", "lab")
    second = run_cli("cluster", "generate", "--shape", "rack=2,host=3", "--gpus", "0", "--topology-name", "lab")
    assert first.exit_code == 0 and first.stdout == second.stdout
    inputs = load_texts([("stdout", first.stdout)])
    assert list(inputs.topologies) == ["lab"] and len(inputs.nodes) == 6
    assert all("nvidia.com/gpu" not in n.status.allocatable for n in inputs.nodes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "block=2,rack"], "error: --shape: 'rack' is not LEVEL=COUNT with COUNT >= 1"),
        (["--shape", "block=0,host=2"], "error: --shape: 'block=0' is not LEVEL=COUNT"),
        (["--shape", "host=x"], "error: --shape: 'host=x' is not LEVEL=COUNT"),
        (["--shape", ""], "error: --shape: '' is not LEVEL=COUNT"),
        (["--shape", "rack=2,rack=2"], "error: --shape: level names must be unique, got rack, rack"),
        (["--shape", "Rack=2,host=2"], "error: --shape: 'Rack' is not a DNS-1123 label"),
        (["--shape", "host=2", "--topology-name", "My_Topology"], "error: --topology-name: 'My_Topology' is not a DNS-1123 label"),
    ],
)
def test_cluster_generate_rejects_a_bad_shape(run_cli, tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "c.yaml"
    result = run_cli("cluster", "generate", *args, "-o", out)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert not out.exists()


def test_cluster_generate_cannot_write(run_cli, tmp_path: Path) -> None:
    result = run_cli("cluster", "generate", "--shape", "host=2", "-o", tmp_path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: --output: cannot write '{tmp_path}': Is a directory"]


# ----------------------------------------------------------------------------- plan -o json


@pytest.fixture(scope="module")
def example_plan(examples: Path) -> tuple[dict, list[Path]]:
    from typer.testing import CliRunner

    from tandem.cli.main import app

    files = [examples / "llama-70b.yaml", examples / "llama-8b.yaml"]
    result = CliRunner().invoke(app, ["plan", "--cluster", str(examples / "cluster.yaml"), *map(str, files), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), files


def test_plan_json_stable_part(example_plan: tuple[dict, list[Path]], examples: Path) -> None:
    """The keys DESIGN.md §2 promises, with the values they promise."""
    document, files = example_plan
    groups_in = [yaml.safe_load(f.read_text(encoding="utf-8")) for f in files]
    nodes = {n.metadata.name: n for n in load_texts([("c", (examples / "cluster.yaml").read_text(encoding="utf-8"))]).nodes}
    assert isinstance(document["groups"], list)
    expected_units = [(g["metadata"]["namespace"], g["metadata"]["name"], u) for g in groups_in for u in range(g["spec"]["replicas"])]
    assert sorted((g["namespace"], g["name"], g["unit"]) for g in document["groups"]) == sorted(expected_units)
    for group in document["groups"]:
        assert {"namespace", "name", "unit", "state", "message", "roles"} <= set(group)
        assert group["state"] in STATES
        assert isinstance(group["message"], str)
        spec = next(g["spec"] for g in groups_in if g["metadata"]["name"] == group["name"])
        assert [role["name"] for role in group["roles"]] == [r["name"] for r in spec["roles"]]
        for role in group["roles"]:
            assert {"name", "replicas"} <= set(role)
            role_spec = next(r for r in spec["roles"] if r["name"] == role["name"])
            assert len(role["replicas"]) <= role_spec["replicas"]
            for replica in role["replicas"]:
                assert set(replica) == {"index", "pods"}
                assert len(replica["pods"]) == role_spec.get("podsPerReplica", 1)
                for pod_index, pod in enumerate(replica["pods"]):
                    assert set(pod) == {"name", "node"}
                    assert pod["name"] == f"{group['name']}-{group['unit']}-{role['name']}-{replica['index']}-{pod_index}"
                    assert pod["node"] in nodes
            assert len({r["index"] for r in role["replicas"]}) == len(role["replicas"])
        if group["state"] == "Placed":
            assert all(len(r["replicas"]) == rs["replicas"] for r, rs in zip(group["roles"], spec["roles"]))


def test_plan_json_additive_keys(example_plan: tuple[dict, list[Path]]) -> None:
    """Keys beyond DESIGN.md §2 that the code emits: domain, desiredReplicas, minReplicas, unusableNodes."""
    document, _ = example_plan
    assert document["unusableNodes"] == []
    for group in document["groups"]:
        assert group["domain"] is None or re.fullmatch(r"(block|rack|host|cluster)/\S+", group["domain"])
        for role in group["roles"]:
            assert isinstance(role["desiredReplicas"], int) and isinstance(role["minReplicas"], int)
            assert role["minReplicas"] <= role["desiredReplicas"]


def test_plan_pods_never_overfill_a_node(example_plan: tuple[dict, list[Path]]) -> None:
    document, files = example_plan
    inputs = load_texts([(str(f), f.read_text(encoding="utf-8")) for f in files])
    gpus_per_pod = {
        (group.metadata.name, role.name): role.template.spec.requests().get("nvidia.com/gpu", 0) // 1000
        for group in inputs.groups
        for role in group.spec.roles
    }
    gpus: Counter[str] = Counter()
    for group in document["groups"]:
        for role in group["roles"]:
            for replica in role["replicas"]:
                for pod in replica["pods"]:
                    gpus[pod["node"]] += gpus_per_pod[group["name"], role["name"]]
    assert gpus and max(gpus.values()) <= 8  # every node of examples/cluster.yaml has 8 GPUs


def test_plan_yaml_matches_json(run_cli, examples: Path) -> None:
    args = ["plan", "-c", examples / "cluster.yaml", examples / "llama-70b.yaml", examples / "llama-8b.yaml"]
    as_json = run_cli(*args, "-o", "json")
    as_yaml = run_cli(*args, "-o", "yaml")
    assert as_json.exit_code == as_yaml.exit_code == 0
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_plan_output_is_byte_identical_across_runs(examples: Path) -> None:
    """Two processes with different hash seeds print the same bytes, in every format."""
    exe = Path(sys.executable).with_name("tandem")
    args = [str(exe), "plan", "-c", str(examples / "cluster.yaml"), str(examples / "llama-70b.yaml"), str(examples / "llama-8b.yaml")]
    for output in ("json", "yaml"):
        runs = []
        for seed in ("1", "2"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            proc = subprocess.run([*args, "-o", output], capture_output=True, timeout=60, env=env)
            assert proc.returncode == 0, proc.stderr
            runs.append(proc.stdout)
        assert runs[0] == runs[1], output


def test_plan_domain_is_the_narrowest_holding_every_pod_in_json_and_table(run_cli, examples: Path) -> None:
    """`domain` in JSON names the narrowest domain with every placed pod; the table shows the same."""
    args = ["plan", "-c", examples / "cluster.yaml", examples / "llama-70b.yaml", examples / "llama-8b.yaml"]
    document = json.loads(run_cli(*args, "-o", "json").stdout)
    table = run_cli(*args).stdout
    inputs = load_texts([("c", (examples / "cluster.yaml").read_text(encoding="utf-8"))])
    view = TopologyView.build(inputs.topologies["default"], ClusterSnapshot.build(inputs.nodes)[0])
    for group in document["groups"]:
        nodes = np.array([view.snapshot.node_index[p["node"]] for r in group["roles"] for rep in r["replicas"] for p in rep["pods"]])
        where = view.narrowest(nodes)
        assert group["domain"] == (None if where is None else view.label(*where))
        for depth in range(where[0] + 1 if where else 0, view.depth_count):
            assert len({int(view.dom[depth][n]) for n in nodes}) != 1 or nodes.size == 0
        row = next(line for line in table.splitlines() if f"{group['namespace']}/{group['name']}[{group['unit']}]" in line)
        assert (group["domain"] or "-") in row


def test_plan_table_is_stable(run_cli, examples: Path) -> None:
    args = ["plan", "-c", examples / "cluster.yaml", examples / "llama-70b.yaml"]
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0 and first.stdout == second.stdout
    assert "serving/llama-70b[0]" in first.stdout and "tandem placement" in first.stdout


# ----------------------------------------------------------------------------- nothing fits


TOO_BIG = """\
apiVersion: tandem.dev/v1alpha1
kind: InferenceGroup
metadata: {name: huge, namespace: serving}
spec:
  topology: {pack: {required: rack}}
  roles:
    - name: prefill
      replicas: 12
      minReplicas: 12
      template: {spec: {containers: [{name: engine, resources: {requests: {nvidia.com/gpu: "8"}}}]}}
    - name: decode
      replicas: 2
      template: {spec: {containers: [{name: engine, resources: {requests: {nvidia.com/gpu: "8"}}}]}}
"""


def test_plan_exits_0_when_nothing_fits(run_cli, examples: Path, tmp_path: Path) -> None:
    group = tmp_path / "huge.yaml"
    group.write_text(TOO_BIG, encoding="utf-8")
    result = run_cli("plan", "-c", examples / "cluster.yaml", group, "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    [unit] = json.loads(result.stdout)["groups"]
    assert unit["state"] == "Unschedulable"
    assert unit["domain"] is None
    assert all(role["replicas"] == [] for role in unit["roles"])
    # the reason names the level it could not fit in and the best domain there
    assert "rack" in unit["message"] and re.search(r"\brack-\d+\b", unit["message"]), unit["message"]
    assert "prefill" in unit["message"]

    table = run_cli("plan", "-c", examples / "cluster.yaml", group)
    assert table.exit_code == 0
    assert "Unschedulable" in table.stdout and unit["message"] in table.stdout.replace("\n", " ")


def test_plan_reports_unusable_nodes_and_warnings(run_cli, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        """\
apiVersion: tandem.dev/v1alpha1
kind: ClusterTopology
metadata: {name: default}
spec: {levels: [{name: rack, nodeLabel: rack}, {name: host, nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: a, labels: {rack: r1, kubernetes.io/hostname: a}}, status: {allocatable: {cpu: "8"}}}
- {apiVersion: v1, kind: Node, metadata: {name: b, labels: {kubernetes.io/hostname: b}}, status: {allocatable: {cpu: "8"}}}
- {apiVersion: v1, kind: Node, metadata: {name: c, labels: {rack: r1, kubernetes.io/hostname: c}}, spec: {unschedulable: true}, status: {allocatable: {cpu: "8"}}}
- {apiVersion: v1, kind: Pod, metadata: {name: stray, namespace: ops}, spec: {nodeName: gone, containers: [{name: x}]}}
""",
        encoding="utf-8",
    )
    group = tmp_path / "g.yaml"
    group.write_text(
        "apiVersion: tandem.dev/v1alpha1\nkind: InferenceGroup\nmetadata: {name: small}\n"
        "spec: {roles: [{name: worker, template: {spec: {containers: [{name: w, resources: {requests: {cpu: '2'}}}]}}}]}\n",
        encoding="utf-8",
    )
    result = run_cli("plan", "-c", cluster, group, "-o", "json")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "warning: pod ops/stray is bound to node 'gone', which is not among the nodes given; ignored"
    ]
    document = json.loads(result.stdout)
    assert document["unusableNodes"] == [
        {"topology": "default", "node": "b", "reason": "missing label rack (level rack)"},
        {"topology": "default", "node": "c", "reason": "cordoned (spec.unschedulable)"},
    ]
    [unit] = document["groups"]
    assert unit["namespace"] == "default" and unit["state"] == "Placed"
    assert unit["roles"][0]["replicas"] == [{"index": 0, "pods": [{"name": "small-0-worker-0-0", "node": "a"}]}]


# ----------------------------------------------------------------------------- other exits


def test_the_same_file_twice_is_a_duplicate(run_cli, examples: Path) -> None:
    cluster = examples / "cluster.yaml"
    result = run_cli("plan", "-c", cluster, cluster, examples / "llama-70b.yaml")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {cluster} (document 1): metadata.name: duplicate ClusterTopology 'default'"), line


def test_plan_without_groups(run_cli, tmp_path: Path, examples: Path) -> None:
    nodes = tmp_path / "n.yaml"
    nodes.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {allocatable: {cpu: 1}}\n", encoding="utf-8")
    result = run_cli("plan", nodes)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: no InferenceGroup in the input files: nothing to plan"]


def test_validate_summary(run_cli, examples: Path) -> None:
    result = run_cli("validate", *sorted(examples.glob("*.yaml")))
    assert result.exit_code == 0, result.stderr
    assert re.fullmatch(r"ok: 64 node\(s\), 0 pod\(s\), 1 topology\(ies\), \d+ group\(s\)", result.stdout.strip())


@pytest.mark.parametrize("command", [[], ["plan"], ["validate"], ["cluster"], ["cluster", "generate"], ["crds"], ["certs"]])
def test_help(run_cli, command: list[str]) -> None:
    result = run_cli(*command, "--help")
    assert result.exit_code == 0
    assert "Usage: tandem" in result.stdout


def test_unknown_output_format_is_a_usage_error(run_cli, examples: Path) -> None:
    result = run_cli("plan", "-c", examples / "cluster.yaml", examples / "llama-70b.yaml", "-o", "xml")
    assert result.exit_code == 2
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["plan"], "Missing argument"),
        (["plan", "--bogus", "x"], "No such option: --bogus"),
        (["plan", "-o", "xml", "x.yaml"], "'xml' is not one of"),
        (["cluster", "generate", "--shape", "block=2", "--gpus", "-1"], "--gpus"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_usage_mistakes_are_one_line_and_exit_2(capsys, argv, phrase):
    from tandem.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and phrase in err[0]


def test_explain_prints_rollout_scaling_and_update_tables(run_cli, examples):
    result = run_cli("explain", examples / "llama-70b.yaml", "--scale-from", "prefill=1,decode=1")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "rollout from nothing" in out and "scaling from {prefill: 1, decode: 1}" in out and "rolling update" in out
    assert "complete" in out


def test_explain_rejects_a_bad_scale_from(run_cli, examples):
    result = run_cli("explain", examples / "llama-70b.yaml", "--scale-from", "prefill=1")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: --scale-from: must name every role")


# ----------------------------------------------------------------------------- large inputs


def _aks_nodes(path: Path, count: int) -> Path:
    """`kubectl get nodes -o yaml` of the bench's AKS-shaped nodes: over 1 MB, so read item by item."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from loading import DUMPER, aks_node  # the bench's AKS-shaped node

    items = "".join(yaml.dump([aks_node(i)], Dumper=DUMPER, sort_keys=True, width=10**6) for i in range(count))
    path.write_text("apiVersion: v1\nitems:\n" + items + "kind: List\n", encoding="utf-8")
    return path


def test_large_files_are_read_in_pieces_with_the_same_result(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tandem.cli import files

    nodes = _aks_nodes(tmp_path / "nodes.yaml", 70)
    assert nodes.stat().st_size > 1 << 20
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "apiVersion: tandem.dev/v1alpha1\nkind: ClusterTopology\nmetadata: {name: default}\n"
        "spec: {levels: [{name: zone, nodeLabel: topology.kubernetes.io/zone}, {name: host, nodeLabel: kubernetes.io/hostname}]}\n",
        encoding="utf-8",
    )
    whole = run_cli("validate", nodes, topology)
    monkeypatch.setattr(files, "STREAM_ABOVE_BYTES", 0)
    monkeypatch.setattr(files, "PIECE_CHARS", 4096)
    streamed = run_cli("validate", nodes, topology)
    assert whole.exit_code == streamed.exit_code == 0, streamed.stderr
    assert streamed.stdout == whole.stdout == "ok: 70 node(s), 0 pod(s), 1 topology(ies), 0 group(s)\n"


def test_a_large_file_that_is_not_utf8_is_one_problem(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tandem.cli import files

    monkeypatch.setattr(files, "STREAM_ABOVE_BYTES", 0)
    bad = tmp_path / "nodes.yaml"
    bad.write_bytes(b"apiVersion: v1\nitems:\n" + b"- {apiVersion: v1, kind: Node}\n" * 1000 + b"- \xff\n")
    result = run_cli("validate", bad)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: {bad}: is not UTF-8 text (expected YAML or JSON)"]


def test_the_progress_bar_shows_only_after_a_while_and_only_on_a_terminal() -> None:
    import io
    import time

    from rich.console import Console

    from tandem.cli.files import progress_bar

    def shown(terminal: bool, after: float) -> str:
        out = io.StringIO()
        with progress_bar(10 << 20, Console(file=out, force_terminal=terminal, width=100), after) as show:
            show("reading nodes.yaml", 5 << 20)
            time.sleep(0.3)
        return out.getvalue()

    assert "reading nodes.yaml" in shown(terminal=True, after=0)
    assert shown(terminal=True, after=5) == ""  # a quick load shows nothing
    assert shown(terminal=False, after=0) == ""  # nor does a pipe or a log


def test_the_progress_bar_never_touches_stdout(run_cli, tmp_path: Path, examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from tandem.cli import files

    bar = io.StringIO()
    monkeypatch.setattr(files, "_stderr", lambda: Console(file=bar, force_terminal=True, width=100))
    monkeypatch.setattr(files, "PROGRESS_AFTER_SECONDS", 0)
    nodes = _aks_nodes(tmp_path / "nodes.yaml", 70)
    result = run_cli("plan", "-c", nodes, "-c", examples / "cluster.yaml", examples / "llama-8b.yaml", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["groups"] and result.stderr == ""
    assert "reading" in bar.getvalue() and "1.2 MB" in bar.getvalue()  # the bar went to stderr alone


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_a_device_that_never_ends_is_one_error_line_not_all_the_memory(run_cli) -> None:
    result = run_cli("validate", "/dev/zero")
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == "error: /dev/zero: is binary (a NUL byte near its start), not YAML or JSON text"


def test_a_pipe_is_read_up_to_a_limit(run_cli, tmp_path: Path, monkeypatch) -> None:
    import tandem.cli.files as files

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "UNSIZED_LIMIT", 1 << 16)
    import threading

    def feed() -> None:
        with open(fifo, "w") as writer:
            try:
                writer.write("# a comment that goes on\n" * 10_000)
            except BrokenPipeError:
                pass

    threading.Thread(target=feed, daemon=True).start()
    result = run_cli("validate", fifo)
    assert result.exit_code == 2 and "and is not a regular file: save it to a file first" in result.stderr


def test_counts_no_cluster_could_hold_are_one_line_each_not_all_the_memory(run_cli, examples: Path, tmp_path: Path) -> None:
    text = (examples / "llama-8b.yaml").read_text()
    huge = tmp_path / "huge.yaml"
    huge.write_text(text.replace("  replicas: 3", "  replicas: 2147483647", 1).replace("      replicas: 1\n", "      replicas: 2147483647\n", 1))
    result = run_cli("plan", "--cluster", examples / "cluster.yaml", huge)
    assert result.exit_code == 2 and result.exception is None
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {huge}: spec.roles[0].replicas: 2,147,483,647 replicas of role router could never fit: "
                           "all the cluster's nodes together hold at most") and line.endswith("(and 1 more problem)")
    explained = run_cli("explain", huge)
    assert explained.exit_code == 2 and "spec.roles[0].replicas: 2,147,483,647 is more than explain's tables show" in explained.stderr
    scaled = run_cli("explain", examples / "llama-70b.yaml", "--scale-from", "prefill=99999999999,decode=1")
    assert scaled.exit_code == 2 and scaled.stderr.strip() == (
        "error: --scale-from: prefill=99,999,999,999 is more than explain's tables show (10,000 replicas per role)")
