"""Rendering deploy/ with the real kubectl (kustomize), for the deploy tests."""

from __future__ import annotations

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
