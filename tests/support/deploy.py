"""Rendering deploy/ with the real kubectl (kustomize), for the deploy tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on this machine (kubectl kustomize renders deploy/)")
TARGETS = ["deploy", "deploy/overlays/local", "deploy/overlays/cert-manager", "deploy/overlays/namespaced", "deploy/overlays/operator-only",
           "deploy/overlays/topology-only", "deploy/overlays/topology-only-cert-manager"]


def rendered_text(target: str) -> str:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, "kustomize", str(REPO / target)], capture_output=True, text=True, timeout=60, check=True).stdout


def render(target: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(rendered_text(target)) if doc]


def write_install(directory: Path, base: str, components: list[str]) -> str:
    """A user's own kustomization in `directory`: deploy/'s `base` (deploy, or an overlay) as a
    resource, and components added; returns the directory to render."""
    up = os.path.relpath(REPO / "deploy", directory)
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:", f"  - {os.path.join(up, base)}", "components:"]
    lines += [f"  - {up}/components/{c}" for c in components]
    (directory / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return str(directory)


def with_components(directory: Path, base: str, components: list[str]) -> list[dict]:
    """The objects of `write_install`'s install."""
    return render(write_install(directory, base, components))


Grant = tuple[str, str, str, str]  # (namespace, or "" across the cluster; API group; resource; verb)


def grants(objects: list[dict], service_account: str, namespace: str = "tandem-system") -> set[Grant]:
    """What the rendered install grants one ServiceAccount: every rule of every role bound to
    it, scoped by the binding (a ClusterRoleBinding: the cluster; a RoleBinding: its namespace)."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    out: set[Grant] = set()
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in binding.get("subjects", []):
            continue
        scope = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
        ref = binding["roleRef"]
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"])]
        out |= {(scope, g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def component_rules(directory: Path) -> list[dict]:
    """Every RBAC rule a component brings, read from its files: its roles' rules and those its
    patches add to other roles (`add /rules/-`)."""
    rules = [rule for path in sorted(directory.glob("*.yaml")) if path.name != "kustomization.yaml"
             for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") in ("Role", "ClusterRole") for rule in doc["rules"]]
    for patch in (yaml.safe_load((directory / "kustomization.yaml").read_text()).get("patches") or []):
        rules += [op["value"] for op in yaml.safe_load(patch.get("patch", "[]")) if op.get("op") == "add" and op.get("path") == "/rules/-"]
    return rules
