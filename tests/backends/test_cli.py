"""`tandem render`, `tandem render --topology-only` and `tandem validate` with backend problems."""

from __future__ import annotations

from pathlib import Path

import yaml

from backends.variants import load


def _kinds(text: str) -> list[str]:
    return [doc["kind"] for doc in yaml.safe_load_all(text) if doc]


def _group_file(examples: Path, tmp_path: Path, backend: str) -> Path:
    text = (examples / "llama-70b.yaml").read_text(encoding="utf-8").replace("backend: native", f"backend: {backend}")
    path = tmp_path / f"llama-70b-{backend}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_render_prints_every_object_to_apply_and_warns_on_approximations(run_cli, examples: Path) -> None:
    args = ("render", examples / "llama-70b.yaml", "--backend", "volcano", "--cluster", examples / "cluster.yaml")
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    kinds = _kinds(result.stdout)
    assert kinds.count("PodGroup") == 2 and kinds.count("PriorityClass") == 1
    assert kinds.count("Pod") == 2 * (4 * 1 + 2 * 2)
    assert kinds.count("HyperNode") == 1 + 2 + 8  # root, blocks, racks: a host is a Node, not a HyperNode
    assert kinds.index("HyperNode") < kinds.index("PriorityClass") < kinds.index("PodGroup") < kinds.index("Pod")
    assert result.stdout.startswith("# Rendered by tandem for backend volcano.")
    warnings = result.stderr.strip().splitlines()
    assert warnings and all(line.startswith("warning: ") for line in warnings)
    assert any("spec.topology.pack.preferred" in line for line in warnings)
    assert run_cli(*args).stdout == result.stdout  # deterministic


def test_render_defaults_to_the_backend_each_group_names(run_cli, examples: Path, tmp_path: Path) -> None:
    kai_group = _group_file(examples, tmp_path, "kai")
    text = (examples / "llama-8b.yaml").read_text(encoding="utf-8").replace("replicas: 3\n  topology", "replicas: 3\n  scheduler: {backend: kai}\n  topology", 1)
    eight = tmp_path / "llama-8b.yaml"
    eight.write_text(text, encoding="utf-8")
    native = run_cli("render", examples / "llama-70b.yaml")
    assert native.exit_code == 0 and _kinds(native.stdout) == ["InferenceGroup"]
    assert load([next(yaml.safe_load_all(native.stdout.split("\n", 1)[1]))]).groups[0].metadata.name == "llama-70b"
    kai = run_cli("render", eight, "--cluster", examples / "cluster.yaml")
    assert kai.exit_code == 0, kai.stderr
    assert _kinds(kai.stdout).count("Topology") == 1 and "scheduling.run.ai/v2alpha2" in kai.stdout
    refused = run_cli("render", kai_group, "--cluster", examples / "cluster.yaml")
    assert refused.exit_code == 2 and "backend 'kai' cannot honour replica gang" in refused.stderr


def test_render_topology_only_exports_the_backend_topology_objects(run_cli, examples: Path) -> None:
    cluster = examples / "cluster.yaml"
    expected = {"kai": ["Topology"], "kueue": ["Topology"], "koordinator": ["ClusterNetworkTopology"], "native": ["ClusterTopology"], "workload-api": []}
    for backend, kinds in expected.items():
        result = run_cli("render", "--topology-only", "--backend", backend, "--cluster", cluster)
        assert result.exit_code == 0, result.stderr
        assert _kinds(result.stdout) == kinds, backend
    koordinator = next(yaml.safe_load_all(run_cli("render", "--topology-only", "-b", "koordinator", "-c", cluster).stdout))
    layers = [(e["topologyLayer"], e.get("labelKey")) for e in koordinator["spec"]["networkTopologySpec"]]
    assert layers == [("BlockLayer", ["network.tandem.dev/block"]), ("RackLayer", ["network.tandem.dev/rack"]), ("NodeTopologyLayer", None)]
    missing = run_cli("render", "--topology-only", "--cluster", cluster)
    assert missing.exit_code == 2 and missing.stderr.startswith("error: --backend: is required with --topology-only")


def test_render_refuses_with_one_error_line_per_problem(run_cli, examples: Path) -> None:
    result = run_cli("render", examples / "llama-70b.yaml", "--backend", "koordinator", "--cluster", examples / "cluster.yaml")
    assert result.exit_code == 2 and result.exception is None
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert [line.split(": ")[2] for line in errors] == [
        "spec.roles[1].podsPerReplica",
        "spec.roles[1].minReplicas",
        "spec.roles[1].topology.pack.required",
    ]
    assert all(line.startswith(f"error: {examples / 'llama-70b.yaml'}: ") for line in errors)
    assert "Traceback" not in result.stderr


def test_render_usage_mistakes(run_cli, examples: Path) -> None:
    for args, message in [
        (("render", examples / "llama-70b.yaml", "--backend", "slurm"), "error: --backend: must be one of native, volcano"),
        (("render", examples / "llama-70b.yaml", "-b", "workload-api", "--workload-api-version", "v9"), "error: --workload-api-version: must be one of"),
        (("render", examples / "llama-70b.yaml", "-b", "kai"), "spec.topologyName: ClusterTopology 'default' is needed"),
        (("render", "--cluster", examples / "cluster.yaml"), "error: no InferenceGroup in the input files"),
    ]:
        result = run_cli(*args)
        assert result.exit_code == 2 and result.exception is None, args
        assert message in result.stderr, result.stderr


def test_render_capabilities_prints_the_docs_matrix(run_cli) -> None:
    result = run_cli("render", "--capabilities")
    doc = Path(__file__).resolve().parents[2] / "docs" / "capabilities.md"
    assert result.exit_code == 0 and result.stdout == doc.read_text(encoding="utf-8")


def test_validate_reports_problems_of_the_backend_each_group_names(run_cli, examples: Path, tmp_path: Path) -> None:
    kueue = _group_file(examples, tmp_path, "kueue")
    # As written, Kueue takes llama-70b: its minimums (1 prefill pod beside 1 decode replica) are a
    # leader and workers in one rack; extras are pod groups of their own, with a warning.
    as_written = run_cli("validate", examples / "cluster.yaml", kueue)
    assert as_written.exit_code == 0, as_written.stderr
    assert f"warning: {kueue}: spec.roles[0].replicas: backend 'kueue' approximates minimums before extras" in as_written.stderr
    # Two prefill pods in the minimum make two PodSets of several pods: Kueue cannot pack that base.
    kueue.write_text(kueue.read_text(encoding="utf-8").replace("minReplicas: 1\n", "minReplicas: 2\n", 1), encoding="utf-8")
    volcano = _group_file(examples, tmp_path, "volcano").rename(tmp_path / "other.yaml")
    text = volcano.read_text(encoding="utf-8").replace("name: llama-70b\n", "name: llama-70b-v\n", 1)
    volcano.write_text(text, encoding="utf-8")
    result = run_cli("validate", examples / "cluster.yaml", kueue, volcano)
    assert result.exit_code == 2 and result.exception is None and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and all(line.startswith(f"error: {kueue}: spec.") for line in errors)
    assert any("spec.topology.pack.required: backend 'kueue' cannot honour required unit pack" in line for line in errors)
    assert f"warning: {kueue}: spec.affinity[0]: backend 'kueue' approximates preferred cross-role affinity" in result.stderr
    assert any(line.startswith(f"warning: {volcano}: spec.") for line in result.stderr.splitlines())

    accepted = run_cli("validate", examples / "cluster.yaml", volcano)
    assert accepted.exit_code == 0, accepted.stderr
    assert accepted.stdout.strip() == "ok: 64 node(s), 0 pod(s), 1 topology(ies), 1 group(s)"
    assert all(line.startswith("warning: ") for line in accepted.stderr.strip().splitlines())


def _write(tmp_path: Path, name: str, objects: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    return path


def _scheduler_group(**scheduler: object) -> dict:
    from support.builders import group, role

    g = group("llama", [role("prefill", 2, 2, gpus=8), role("decode", 1, 1, gpus=8)], required="rack")
    g["spec"]["scheduler"] = scheduler
    return g


def test_validate_refuses_what_koordinator_cannot_honour_and_a_qos_class_elsewhere(run_cli, tmp_path: Path) -> None:
    from support.builders import cluster

    koord = _scheduler_group(backend="koordinator", qosClass="LS")
    koord["spec"]["roles"][0]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    koord["spec"]["roles"][1]["template"]["metadata"] = {"annotations": {"grove.io/auto-mnnvl": "enabled"}}
    volcano = _scheduler_group(backend="volcano", qosClass="BE")
    volcano["metadata"]["name"] = "other"
    nodes = _write(tmp_path, "cluster.yaml", cluster("rack=2,host=4"))
    for objects, expected in (
        ([koord], ["spec.roles[0].template.spec.resourceClaims", 'spec.roles[1].template.metadata.annotations["grove.io/auto-mnnvl"]']),
        ([volcano], ["spec.scheduler.qosClass"]),
    ):
        result = run_cli("validate", nodes, _write(tmp_path, "groups.yaml", objects))
        assert result.exit_code == 2 and result.exception is None
        assert [line.split(": ")[2] for line in result.stderr.splitlines() if line.startswith("error: ")] == expected


def test_render_takes_the_queue_from_the_group_before_the_cli_option(run_cli, tmp_path: Path) -> None:
    from support.builders import cluster

    nodes = _write(tmp_path, "cluster.yaml", cluster("rack=2,host=4"))
    own = _write(tmp_path, "own.yaml", [_scheduler_group(backend="volcano", queue="team-a")])
    plain = _write(tmp_path, "plain.yaml", [_scheduler_group(backend="volcano")])
    for path, expected in ((own, "team-a"), (plain, "from-cli")):
        result = run_cli("render", path, "--cluster", nodes, "--queue", "from-cli")
        assert result.exit_code == 0, result.stderr
        groups = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "PodGroup"]
        assert groups and {g["spec"]["queue"] for g in groups} == {expected}
    assert "a group's own queue wins" in " ".join(run_cli("render", "--help").stdout.split())
