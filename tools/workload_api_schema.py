"""Write `src/tandem/apiserver/data/scheduling.k8s.io_v1alpha3.json`: Kubernetes' own schema of
the Workload API kinds `tandem apiserver --workload-api` serves (Workload, CompositePodGroup,
PodGroup of `scheduling.k8s.io/v1alpha3`), the closure of those three definitions only.

The source is the one `tests/backends` checks rendered Workload API objects against: the
PyPI package kubernetes-validate (a dev dependency, Apache-2.0), `vX-local-strict` (every
object refuses unknown fields, `null` accepted for "unset"), descriptions dropped as
`pod_template_schema.py` drops them.

    python tools/workload_api_schema.py [--version 1.37.0] [--out PATH]

`tests/apiserver/test_workload_api.py` checks that the shipped file is still what the
installed kubernetes-validate gives (`structure()` below).
"""

from __future__ import annotations

import argparse
import importlib.metadata
from pathlib import Path
from typing import Any

import pod_template_schema

PREFIX = "io.k8s.api.scheduling.v1alpha3."
KINDS = ("Workload", "CompositePodGroup", "PodGroup")
OUT = Path(__file__).resolve().parents[1] / "src/tandem/apiserver/data/scheduling.k8s.io_v1alpha3.json"


def structure(version: str) -> dict[str, Any]:
    """The closure of the three kinds' definitions, descriptions dropped, refs local to the result."""
    return pod_template_schema.structure(version, tuple(PREFIX + kind for kind in KINDS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="1.37.0", help="the Kubernetes version of kubernetes-validate's schema")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    defs = structure(args.version)
    document = {
        "$comment": (
            f"Kubernetes {args.version} scheduling.k8s.io/v1alpha3 Workload, CompositePodGroup and PodGroup and what they refer to, "
            "made by tools/workload_api_schema.py. Kubernetes' OpenAPI schema as shipped by the PyPI package kubernetes-validate "
            f"{importlib.metadata.version('kubernetes-validate')} (github.com/willthames/kubernetes-validate, "
            f"kubernetes-json-schema/v{args.version}-local-strict/_definitions.json), descriptions dropped. "
            "Apache-2.0 (The Kubernetes Authors; Will Thames)."
        ),
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": defs,
    }
    pod_template_schema.write(args.out, document)


if __name__ == "__main__":
    main()
