"""`tandem topology from-hypernodes`: files or a cluster in, a ClusterTopology to apply out.

The cluster test runs the local API server with Volcano's own HyperNode CRD
(../shared/schemas) installed, HyperNodes as UFM's discoverer writes them, and checks the
nodes get the tier labels (once: a second run finds nothing to write).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tandem.api.loading import load_texts

SCHEMAS = Path(__file__).resolve().parents[2] / ".." / "shared" / "schemas"
HYPERNODE_CRD = SCHEMAS / "volcano" / "topology.volcano.sh_hypernodes.yaml"
HN = "topology.volcano.sh/v1alpha1"


def nodes(*names: str, **labels: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, **labels}},
             "status": {"allocatable": {"nvidia.com/gpu": "8"}}} for n in names]


def ufm(leaves: list[list[str]]) -> list[dict[str, Any]]:
    """HyperNodes as Volcano's UFM discoverer builds them: leaf switches of node names, one spine."""
    source = {"volcano.sh/network-topology-source": "ufm"}
    out = [{"apiVersion": HN, "kind": "HyperNode", "metadata": {"name": f"leaf-hn-{i}", "labels": source},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]}}
           for i, names in enumerate(leaves)]
    out.append({"apiVersion": HN, "kind": "HyperNode", "metadata": {"name": "spine-hn", "labels": source},
                "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf-hn-{i}"}}} for i in range(len(leaves))]}})
    return out


def write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False), encoding="utf-8")
    return path


def test_tandems_render_read_back_from_files_is_a_topology_validate_accepts(run_cli, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    assert run_cli("cluster", "generate", "--shape", "block=2,rack=2,host=2", "-o", cluster).exit_code == 0
    rendered = run_cli("render", "--topology-only", "-b", "volcano", "-c", cluster)
    assert rendered.exit_code == 0, rendered.stderr
    (tmp_path / "hypernodes.yaml").write_text(rendered.stdout, encoding="utf-8")
    generated = list(yaml.safe_load_all(cluster.read_text(encoding="utf-8")))
    write(tmp_path / "nodes.yaml", generated[1]["items"])

    result = run_cli("topology", "from-hypernodes", tmp_path / "hypernodes.yaml", "-f", tmp_path / "nodes.yaml", "--name", "fabric")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    topology = yaml.safe_load(result.stdout)
    assert topology == {"apiVersion": "tandem.dev/v1alpha1", "kind": "ClusterTopology", "metadata": {"name": "fabric"},
                        "spec": {"levels": [{"name": "block", "nodeLabel": "network.tandem.dev/block"},
                                            {"name": "rack", "nodeLabel": "network.tandem.dev/rack"},
                                            {"name": "host", "nodeLabel": "kubernetes.io/hostname"}]}}
    (tmp_path / "adopted.yaml").write_text(result.stdout, encoding="utf-8")
    assert run_cli("validate", tmp_path / "adopted.yaml", tmp_path / "nodes.yaml").exit_code == 0
    again = run_cli("topology", "from-hypernodes", "-f", tmp_path / "nodes.yaml", "-f", tmp_path / "hypernodes.yaml", "--name", "fabric")
    assert again.stdout == result.stdout  # deterministic, whatever the file order


def test_ufm_files_say_which_labels_are_needed_and_write_a_script(run_cli, tmp_path: Path) -> None:
    source = write(tmp_path / "in.yaml", ufm([["gpu-0", "gpu-1"], ["gpu-2"]]) + nodes("gpu-0", "gpu-1", "gpu-2"))
    script = tmp_path / "label.sh"
    result = run_cli("topology", "from-hypernodes", source, "--labels-out", script)
    assert result.exit_code == 0, result.stderr
    assert [lv["nodeLabel"] for lv in yaml.safe_load(result.stdout)["spec"]["levels"]] == [
        "topology.tandem.dev/tier-2", "topology.tandem.dev/tier-1", "kubernetes.io/hostname"]
    assert result.stderr.strip() == (
        "note: the ClusterTopology needs labels on 3 node(s) (topology.tandem.dev/tier-1 on 3 node(s), "
        f"topology.tandem.dev/tier-2 on 3 node(s)); run {script} before applying it"
    )
    lines = script.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#!/bin/sh" and "set -e" in lines
    assert [line for line in lines if line.startswith("kubectl")] == [
        "kubectl label node gpu-0 topology.tandem.dev/tier-1=leaf-hn-0 topology.tandem.dev/tier-2=spine-hn --overwrite",
        "kubectl label node gpu-1 topology.tandem.dev/tier-1=leaf-hn-0 topology.tandem.dev/tier-2=spine-hn --overwrite",
        "kubectl label node gpu-2 topology.tandem.dev/tier-1=leaf-hn-1 topology.tandem.dev/tier-2=spine-hn --overwrite",
    ]
    bare = run_cli("topology", "from-hypernodes", source)
    assert "label them with --label-nodes or --labels-out FILE" in bare.stderr and bare.stdout == result.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--label-nodes",), "error: --label-nodes: needs --kubeconfig"),
        (("--name", "Not_A_Label"), "error: --name: 'Not_A_Label' is not a DNS-1123 label"),
        (("--kubeconfig", "k"), "error: --kubeconfig: read from a cluster or from files, not both"),
    ],
    ids=["label-nodes-without-cluster", "bad-name", "files-and-cluster"],
)
def test_option_mistakes_are_one_line_and_exit_2(run_cli, tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    source = write(tmp_path / "in.yaml", ufm([["gpu-0"]]) + nodes("gpu-0"))
    result = run_cli("topology", "from-hypernodes", source, *args)
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and result.stderr.startswith(says), result.stderr
    assert result.stdout == ""


def test_input_mistakes_name_the_file_or_the_hypernode(run_cli, tmp_path: Path) -> None:
    other = write(tmp_path / "other.yaml", [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}])
    result = run_cli("topology", "from-hypernodes", other)
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {other}: items[0].kind: unsupported v1/Pod")
    tree = ufm([["gpu-0"], ["gpu-0"]])
    broken = write(tmp_path / "broken.yaml", tree + nodes("gpu-0"))
    result = run_cli("topology", "from-hypernodes", broken)
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.strip() == "error: HyperNode/leaf-hn-1.spec.members[0]: node 'gpu-0' is also in HyperNode 'leaf-hn-0' of the same tier 1"
    assert run_cli("topology", "from-hypernodes").exit_code == 2


# ----------------------------------------------------------------------------- a cluster


@pytest.fixture
def api():
    pytest.importorskip("jsonschema", reason="the local API server needs the apiserver extra")
    from tandem.apiserver.server import ApiServer

    with ApiServer(objects=nodes("gpu-0", "gpu-1", "gpu-2"), kubelet=False) as server:
        yield server


def _call(url: str, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.mark.skipif(not HYPERNODE_CRD.exists(), reason=f"Volcano's HyperNode CRD is not here: {SCHEMAS.resolve()} is absent (it sits beside the repository)")
def test_from_a_cluster_the_nodes_are_labelled_once(run_cli, api, tmp_path: Path) -> None:
    from tandem.apiserver.kubeconfig import write_kubeconfig

    config = tmp_path / "kubeconfig"
    write_kubeconfig(config, api.url)
    missing = run_cli("topology", "from-hypernodes", "--kubeconfig", config)
    assert missing.exit_code == 2
    assert missing.stderr.strip() == "error: --kubeconfig: the cluster serves no HyperNodes (404): is Volcano's HyperNode CRD installed?"

    crd = yaml.safe_load(HYPERNODE_CRD.read_text(encoding="utf-8"))
    assert _call(api.url, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    empty = run_cli("topology", "from-hypernodes", "--kubeconfig", config)
    assert empty.exit_code == 2 and "the cluster has no HyperNode: nothing to adopt" in empty.stderr
    for hypernode in ufm([["gpu-0", "gpu-1"], ["gpu-2"]]):
        code, answer = _call(api.url, "POST", f"/apis/{HN}/hypernodes", hypernode)
        assert code == 201, answer

    result = run_cli("topology", "from-hypernodes", "--kubeconfig", config, "--label-nodes", "--name", "fabric")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.strip() == "labelled 3 node(s): topology.tandem.dev/tier-1 on 3 node(s), topology.tandem.dev/tier-2 on 3 node(s)"
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in _call(api.url, "GET", "/api/v1/nodes")[1]["items"]}
    assert {n: (v.get("topology.tandem.dev/tier-2"), v.get("topology.tandem.dev/tier-1")) for n, v in labels.items()} == {
        "gpu-0": ("spine-hn", "leaf-hn-0"), "gpu-1": ("spine-hn", "leaf-hn-0"), "gpu-2": ("spine-hn", "leaf-hn-1")}
    topology = load_texts([("out", result.stdout)]).topologies["fabric"]
    assert [lv.node_label for lv in topology.spec.levels] == ["topology.tandem.dev/tier-2", "topology.tandem.dev/tier-1", "kubernetes.io/hostname"]

    again = run_cli("topology", "from-hypernodes", "--kubeconfig", config, "--label-nodes", "--name", "fabric")
    assert again.exit_code == 0 and again.stderr == "" and again.stdout == result.stdout
