"""One autoscaler pass that changes a group's counts (spec and status writes)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.controller import autoscale

GROUP = Path(__file__).resolve().parents[2] / "examples" / "llama-70b-autoscaled.yaml"


def autoscale_once(cluster) -> None:
    group = yaml.safe_load(GROUP.read_text())
    group["metadata"]["name"] = "scaled"
    cluster.store.create(group)
    role = RoleSignals(replicas=1, queue_depth=0.0, busy_fraction=0.5, kv_utilization=0.5, tokens_per_s=12_000.0)
    signals = Signals(0.0, 60.0, {"prefill": role, "decode": role}, 5.0, 5000.0, 12_000.0, 0.2, 0.02)
    report = autoscale(cluster, 0.0, lambda ns, name, now: signals if name == "scaled" else None)
    assert report.changes, "the story needs a spec change"
