"""A small subset of the load bench (`bench/load.py`, issue 16 item 4), as processes over
HTTP: 50 groups created, scaled and deleted through `tandem apiserver` and `tandem
operator`; 20 concurrent AdmissionReviews to the operator's webhook; 3 watchers on pods
and 3 on groups while writers create, update and delete. Each asserts that nothing was
lost or duplicated, never a timing (the figures are the bench's, docs/reliability.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("jsonschema", reason="the local API server needs the apiserver extra: pip install 'tandem[apiserver]'")
for _module in ("lightkube", "prometheus_client", "cryptography"):
    pytest.importorskip(_module, reason="tandem operator needs the operator extra: pip install 'tandem[operator]'")
if not Path("/proc/self/status").exists():
    pytest.skip("peak RSS is read from /proc (Linux)", allow_module_level=True)

_PATH = Path(__file__).resolve().parents[2] / "bench" / "load.py"
_spec = importlib.util.spec_from_file_location("bench_load", _PATH)
assert _spec is not None and _spec.loader is not None
load = importlib.util.module_from_spec(_spec)
sys.modules["bench_load"] = load
_spec.loader.exec_module(load)


def test_fifty_groups_created_scaled_and_deleted_in_bursts_lose_and_duplicate_nothing():
    row = load.operator_case(groups=50, bursts=2, show=False, timeout=45)
    assert row["lost"] == 0 and row["extra"] == 0, row
    assert row["created_twice"] == 0, "no pod name and revision created twice"
    assert row["events_duplicated"] == 0 and row["events_out_of_order"] == 0, row
    assert row["left_behind"] == {"pods": 0, "services": 0, "configmaps": 0}, row
    assert row["pod_events"] > 0 and all(row["phases"][p]["latency_ms"]["n"] == 50 for p in ("create", "scale", "delete"))
    assert row["rss_peak_mib"]["apiserver"] > 0 and row["rss_peak_mib"]["operator"] > 0


def test_twenty_concurrent_reviews_are_each_answered_once_for_their_own_uid():
    row = load.webhook_case(reviews=20, rounds=1, show=False)
    assert row["answered"] == 20 and row["lost"] == 0 and row["duplicated"] == 0 and row["wrong"] == 0, row
    assert row["rss_peak_mib"]["operator"] > 0


def test_three_watchers_each_see_every_write_once_and_in_order():
    row = load.apiserver_case(watchers=3, objects=100, show=False)
    assert row["write_failures"] == 0, row["write_failure_examples"]
    assert row["lost"] == 0 and row["duplicated"] == 0 and row["out_of_order"] == 0, row
    assert row["streams_differing"] == 0, "every watcher of a kind saw the same stream"
    assert row["delivery_latency_ms"]["n"] == 3 * 3 * (100 + 20), "each write's event measured at each watcher"
