"""The README's "Run it on a cluster" section, run as it stands (issue 25, item 9).

Its shell blocks are read from README.md and run in order, each as one bash script
(`set -euo pipefail`), with the real kubectl, in a copy of the repository's deploy/,
examples/ and image files (step 1 edits deploy/base/kustomization.yaml):

- the cluster's block against a `tandem apiserver` this test starts (48 nodes, no CRDs:
  `kubectl apply -k deploy/` installs them), as if it were the cluster;
- the local block as it is: it starts its own `tandem apiserver` and `tandem operator`.

A command whose comment says `refused: TEXT` must fail and print TEXT. What a local API
server and this machine cannot do is named in NOT_RUN_AS_WRITTEN with what runs instead and
why; every other command runs verbatim. Two literal values are replaced, so the test
neither clobbers the reader's files nor fights other tests for a port: SUBSTITUTED.
`.venv/bin/tandem` is this checkout's tandem (a shim in the copy).

The README's other sections (`make demo`, plans, simulations, benches, `tandem trace fetch`)
are not run here: they take minutes, or download from the internet, and have their own tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tandem.topology.generate import generate_cluster
from e2e.processes import KUBECTL, NO_KUBECTL, REPO, ApiServer, free_port, start_apiserver

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)
SECTION = "### Run it on a cluster"
SCRIPT_TIMEOUT_S = 240
KUSTOMIZE = shutil.which("kustomize")

# README command (its start) -> (what runs in its place, why).
NOT_RUN_AS_WRITTEN: dict[str, tuple[str, str]] = {
    "docker build": ("a stand-in `docker` that checks the Dockerfile is there and notes the call",
                     "no container runtime or registry here; tests/deploy/test_image.py checks the Dockerfile (base pinned by digest, "
                     "dependencies locked with hashes, .dockerignore) and this test the image reference kustomize writes"),
    "docker push": ("the stand-in `docker`, noting the call", "no registry here"),
    "DIGEST=$(docker inspect": ("the stand-in `docker`, printing a repo digest made from the image name", "no registry here"),
    "kubectl -n tandem-system rollout status deployment/tandem-operator": (
        "`tandem operator --leader-elect --lease-namespace tandem-system --manage-webhook-config` started on this machine, "
        "waited for until it holds the Lease and its webhook configuration points at it",
        "tandem apiserver stores the Deployment but runs no Deployment controller, and cannot route the webhook's Service"),
    "kubectl -n tandem-system scale deployment tandem-operator --replicas=0": (
        "the command itself, then the operator started above is stopped (SIGTERM)",
        "in a cluster the Deployment's pods go; here nothing runs the Deployment"),
}
if KUSTOMIZE is None:
    NOT_RUN_AS_WRITTEN["(cd deploy/base && kustomize edit set image"] = (
        "a stand-in `kustomize` writing the `images:` entry `kustomize edit set image` writes",
        "kustomize is not installed here (kubectl has `kubectl kustomize` only); the rendered Deployment is checked")
SUBSTITUTED = {"/tmp/tandem.kubeconfig": "the test's temporary kubeconfig", "9443": "a free port"}

STAND_IN_DOCKER = '''\
import hashlib, json, os, sys
args = sys.argv[1:]
with open(os.environ["README_DOCKER_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[0] == "build" and not os.path.exists(args[-1] + "/Dockerfile"):
    sys.exit("docker build: no Dockerfile in " + args[-1])
if args[0] == "inspect":
    image = args[-1]
    print(image.rsplit(":", 1)[0] + "@sha256:" + hashlib.sha256(image.encode()).hexdigest())
'''

STAND_IN_KUSTOMIZE = '''\
import sys, yaml
assert sys.argv[1:4] == ["edit", "set", "image"], sys.argv
old, new = sys.argv[4].split("=", 1)
doc = yaml.safe_load(open("kustomization.yaml"))
entry = {"name": old}
if "@" in new:
    entry["newName"], entry["digest"] = new.split("@", 1)
elif ":" in new.rsplit("/", 1)[-1]:
    entry["newName"], entry["newTag"] = new.rsplit(":", 1)
else:
    entry["newName"] = new
doc["images"] = [i for i in doc.get("images", []) if i["name"] != old] + [entry]
open("kustomization.yaml", "w").write(yaml.safe_dump(doc, sort_keys=False))
'''


def readme_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index(SECTION):]
    section = section[: section.index("\n### ", len(SECTION))]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def commands(block: str) -> list[tuple[str, str]]:
    """(command, its comment) for every command of a block; continuation lines joined."""
    out, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full, pending = pending + line, ""
        out.append(_split_comment(full))
    return out


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing `# comment` (a # inside quotes or $(...) is not one)."""
    quote, depth = "", 0
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "#" and depth == 0 and (i == 0 or line[i - 1].isspace()):
            return " ".join(line[:i].split()), line[i + 1:].strip()
    return " ".join(line.split()), ""


def _stand_in(command: str) -> str | None:
    return next((key for key in NOT_RUN_AS_WRITTEN if command.startswith(key)), None)


def script(block: str, work: Path, values: dict[str, str], webhook_port: int) -> str:
    lines = ["set -euo pipefail", f"cd {shlex.quote(str(work))}"]
    for command, comment in commands(block):
        for literal, value in values.items():
            command = command.replace(literal, value)
        lines.append(f"echo {shlex.quote('$ ' + command)}")
        key = _stand_in(command)
        if key is not None:
            instead, why = NOT_RUN_AS_WRITTEN[key]
            lines.append(f"echo {shlex.quote(f'# not run as written: {instead} ({why})')}")
        if comment.startswith("refused:"):
            expected = comment.split(":", 1)[1].strip()
            lines += [f"if out=$({command} 2>&1); then echo 'README: expected a refusal'; exit 90; fi",
                      'echo "$out"', f"grep -qF -- {shlex.quote(expected)} <<<\"$out\""]
        elif key == "kubectl -n tandem-system rollout status deployment/tandem-operator":
            lines += [
                f"{shlex.quote(str(work / '.venv/bin/tandem'))} operator --kubeconfig \"$KUBECONFIG\" --leader-elect "
                f"--lease-namespace tandem-system --identity readme-operator --health-port 0 --metrics-port 0 "
                f"--webhook-port {webhook_port} --manage-webhook-config 2>operator.log & OPERATOR=$!",
                "until kubectl get validatingwebhookconfiguration tandem-operator -o jsonpath='{.webhooks[0].clientConfig.url}' "
                "| grep -q https; do sleep 0.1; done",
                "until kubectl -n tandem-system get lease tandem-operator -o jsonpath='{.spec.holderIdentity}' | grep -q readme; do sleep 0.1; done",
            ]
        elif key == "kubectl -n tandem-system scale deployment tandem-operator --replicas=0":
            lines += [command, "kill -TERM $OPERATOR", "wait $OPERATOR"]
        else:
            lines.append(command)
    return "\n".join(lines) + "\n"


def _work(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of what the README's commands read, a `.venv/bin/tandem` of this checkout, and the stand-ins."""
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("deploy", "examples", "requirements"):
        shutil.copytree(REPO / name, work / name)
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml"):
        shutil.copy(REPO / name, work / name)
    bin_dir, stand_ins = work / ".venv" / "bin", tmp_path / "stand-ins"
    bin_dir.mkdir(parents=True)
    stand_ins.mkdir()
    _executable(bin_dir / "tandem", f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tandem.cli.main "$@"\n')
    _executable(stand_ins / "docker", f"#!{sys.executable}\n{STAND_IN_DOCKER}")
    if KUSTOMIZE is None:
        _executable(stand_ins / "kustomize", f"#!{sys.executable}\n{STAND_IN_KUSTOMIZE}")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{stand_ins}{os.pathsep}{Path(KUBECTL).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # type: ignore[arg-type]
           "HOME": str(home), "CLOUDSDK_CONFIG": str(home / "gcloud"), "README_DOCKER_LOG": str(tmp_path / "docker.log"),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return work, env


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def run(text: str, env: dict[str, str], log: Path) -> int:
    """Run a script in its own process group; what it left running in the background is ended after."""
    with log.open("w") as out:
        process = subprocess.Popen(["bash", "-c", text], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            return process.wait(timeout=SCRIPT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return -1
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ApiServer]:
    """The stand-in cluster: 48 nodes of 8 GPUs, labelled as examples/real-cluster/topology.yaml expects; no CRDs yet."""
    _, nodes = generate_cluster([("block", 3), ("rack", 2), ("host", 8)], 8)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    server = start_apiserver(tmp_path, "--cluster", str(tmp_path / "nodes.yaml"), "--no-crds")
    try:
        yield server
    finally:
        server.stop()


def test_the_readme_has_the_blocks_this_test_runs_and_names_every_command_it_does_not_run_as_written():
    blocks = readme_blocks()
    assert len(blocks) == 2, "the cluster's block and the local one"
    every = [command for block in blocks for command, _ in commands(block)]
    for key in NOT_RUN_AS_WRITTEN:
        assert any(command.startswith(key) for command in every), f"no README command starts with {key!r}: update NOT_RUN_AS_WRITTEN"
    for literal in SUBSTITUTED:
        assert any(literal in command for command in every), f"{literal!r} is no longer in the README"
    local = [command for command, _ in commands(blocks[1])]
    started = next(i for i, c in enumerate(local) if c.startswith(".venv/bin/tandem apiserver"))
    waited = next(i for i, c in enumerate(local) if c.startswith("until [ -s $KUBECONFIG ]"))
    operator = next(i for i, c in enumerate(local) if c.startswith(".venv/bin/tandem operator"))
    assert started < waited < operator, "the local block waits for the kubeconfig before starting the operator"
    assert local[started - 1] == "rm -f /tmp/tandem.kubeconfig", "a kubeconfig of an earlier run is not taken for the new one"


def test_the_cluster_path_runs_in_order(cluster: ApiServer, tmp_path: Path):
    work, env = _work(tmp_path)
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    text = script(readme_blocks()[0], work, {}, free_port())
    log = tmp_path / "cluster-block.log"
    status = run(text, env, log)
    output = log.read_text()
    operator_log = (work / "operator.log").read_text() if (work / "operator.log").exists() else ""
    assert status == 0, f"the README's cluster block failed ({status}):\n{output[-4000:]}\noperator:\n{operator_log[-2000:]}"

    calls = [json.loads(line) for line in (tmp_path / "docker.log").read_text().splitlines()]
    image = "registry.example.com/tandem-operator:0.1.0"
    assert [c[0] for c in calls] == ["build", "push", "inspect"] and calls[0] == ["build", "-t", image, "."] and calls[1] == ["push", image]
    digest = re.search(r"image: (registry\.example\.com/tandem-operator@sha256:[0-9a-f]{64})$", output, re.M)
    assert digest, f"`kubectl kustomize deploy/` names the pushed image by digest:\n{output}"
    assert "ghcr.io/tandem-dev" not in re.findall(r"image: .*", output)[0]
    assert re.search(r"^tandem-operator\s+readme-operator\s", output, re.M), "the Lease in tandem-system, held by the operator"
    assert re.search(r"^llama-70b\s+(Ready|Pending|Progressing)\s+2\s+2\s+True\s", output, re.M), f"kubectl get ig: extras may still wait (Pending), two units, both functional, Available:\n{output[output.find('get ig -n'):][:1500]}"
    assert 'failed calling webhook "validate.tandem.dev"' in output, "the stopped operator's webhook refused the write"
    # Uninstalled: tandem's kinds, namespace and webhook configuration are gone from the "cluster".
    assert cluster.kubectl("get", "crd", "-o", "name").stdout == ""
    assert cluster.kubectl("get", "validatingwebhookconfiguration", "-o", "name").stdout == ""
    assert cluster.kubectl("get", "namespace", "tandem-system", check=False).returncode == 1


def test_the_local_block_runs_as_written(tmp_path: Path):
    work, env = _work(tmp_path)
    env.pop("KUBECONFIG", None)
    kubeconfig = tmp_path / "tandem.kubeconfig"
    text = script(readme_blocks()[1], work, {"/tmp/tandem.kubeconfig": str(kubeconfig), "9443": str(free_port())}, 0)
    log = tmp_path / "local-block.log"
    status = run(text, env, log)
    output = log.read_text()
    assert status == 0, f"the README's local block failed ({status}):\n{output[-4000:]}"
    pods = [line.split() for line in output.splitlines() if line.startswith("llama-70b-")]
    assert len(pods) == 16 and all(row[1:3] == ["1/1", "Running"] for row in pods), output
    assert "inferencegroup.tandem.dev/llama-70b scaled" in output and 'inferencegroup.tandem.dev "llama-70b" deleted' in output
