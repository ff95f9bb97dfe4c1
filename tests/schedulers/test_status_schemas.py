"""Every status a stand-in writes fits the real CRD's (or Kubernetes') schema of its kind."""

from __future__ import annotations

from typing import Any

import pytest

from backends.schemas import SCHEMAS, SKIP_REASON, builtin_validator, crd_validator
from schedulers.helpers import (Store, kai_group, kai_pod, koord_group, koord_pod, kueue_pod, node, pod_group, volcano_group, volcano_pod, wa_pod,
                                workload)

pytestmark = pytest.mark.skipif(not SCHEMAS.exists(), reason=SKIP_REASON)


def _stores() -> list[Store]:
    return [
        Store([volcano_pod(f"v-{i}", "g", gpus=8) for i in range(2)], [node("n-0")], {"volcano": [volcano_group("g", 2)]}),
        Store([kai_pod(f"k-{i}", "g", "decode.0", gpus=8) for i in range(2)], [node("n-0")],
              {"kai": [kai_group("g", 2, [{"name": "decode"}, {"name": "decode.0", "parent": "decode", "minMember": 2}])]}),
        Store([koord_pod(f"c-{i}", "g", gpus=8) for i in range(2)], [node("n-0")], {"koordinator": [koord_group("g", 2)]}),
        Store([kueue_pod(f"q-{i}", "g", gpus=8) for i in range(2)], [node("n-0")], {"kueue": [workload("g", {"decode": 2})]}),
        Store([wa_pod(f"w-{i}", "g", gpus=8) for i in range(2)], [node("n-0")], {"workload-api": [pod_group("g", 2)]}),
    ]


def _status_errors(obj: dict[str, Any]) -> list[str]:
    api_version, kind = obj["apiVersion"], obj["kind"]
    validator = builtin_validator(api_version, kind, "1.37") if api_version.startswith("scheduling.k8s.io/") else crd_validator(api_version, kind)
    return [f"{kind} {'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj) if list(e.absolute_path)[:1] == ["status"]]


@pytest.mark.parametrize("store", _stores(), ids=["volcano", "kai", "koordinator", "kueue", "workload-api"])
def test_waiting_and_placed_statuses_fit_the_schema(store: Store):
    written = list(store.run().statuses)
    store.nodes.append(node("n-1"))
    written += store.run(now=300.0).statuses
    assert written, "the stand-in wrote a status"
    for write in written:
        assert _status_errors(dict(write.object)) == []
