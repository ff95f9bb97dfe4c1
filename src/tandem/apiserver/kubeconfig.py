"""The kubeconfig that points kubectl (and `tandem operator --kubeconfig`) at the local API server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

NAME = "tandem"


def kubeconfig(server: str, namespace: str = "default") -> dict[str, Any]:
    """One cluster (plain HTTP, no certificate to check), one user without credentials, one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": NAME, "user": {}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": namespace}}],
        "current-context": NAME,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server: str) -> None:
    """Write it whole or not at all (a temporary file renamed over it), so a script waiting
    for the file (`until [ -s FILE ]`) never reads half of one; parent directories made;
    raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(yaml.safe_dump(kubeconfig(server), sort_keys=False), encoding="utf-8")
    os.replace(partial, path)
