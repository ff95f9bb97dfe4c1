"""KV transfer in the event model: NICs, shared uplinks, streaming behind prefill."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from tandem.sim.serving import ReplicaInfo, ServingModel, gpu_profile, kv_transfer_seconds, model_profile, prefill_seconds

L70, H100 = model_profile("llama-3.1-70b"), gpu_profile("h100-sxm")
LATENCY_S = H100.transfer_latency_us * 1e-6


def bandwidth(a: str, b: str) -> float:
    """Nodes `r<rack>-h<host>`: 7200 Gbit/s within a node, 400 within a rack, 100 between racks."""
    if a == b:
        return 7200.0
    return 400.0 if a.split("-")[0] == b.split("-")[0] else 100.0


def replica(kind: str, index: int, node: str, gpus: int = 8) -> ReplicaInfo:
    return ReplicaInfo(f"m/0/{kind}/{index}", kind, 0, gpus, node)


def serve(arrival, inputs, outputs, replicas, **options) -> ServingModel:
    sm = ServingModel(L70, H100, bandwidth, ttft_slo_s=2.0, itl_slo_s=0.05, **options)
    sm.add_requests(np.asarray(arrival, float), np.asarray(inputs), np.asarray(outputs))
    sm.set_replicas(0.0, replicas)
    sm.advance(1e6)
    return sm


def test_transfers_across_a_rack_boundary_share_its_uplink():
    """Four prompts prefilled in one batch in rack 0 go to a decode replica in rack 1 as
    the batch ends: the k-th starts with k - 1 in flight and gets 100 / k Gbit/s."""
    sm = serve([0.0] * 4, [2000] * 4, [2] * 4, [replica("prefill", 0, "r0-h0"), replica("decode", 0, "r1-h0")])
    result = sm.results()
    batch = prefill_seconds(L70, H100, 8, 8000, [2000] * 4)
    expected = [kv_transfer_seconds(L70, 2000, 100.0 / k, latency_s=LATENCY_S, overlap_s=batch) for k in (1, 2, 3, 4)]
    assert result.kv_transfer_s.tolist() == pytest.approx(expected, rel=1e-12)
    assert result.kv_transfer_s[3] > result.kv_transfer_s[0]


def test_transfers_over_different_uplinks_do_not_slow_each_other():
    """Two racks, each with its own prefill and decode: every transfer stays inside its rack
    and crosses only its own prefill node's uplink."""
    replicas = [
        ReplicaInfo("m/0/prefill/0", "prefill", 0, 8, "r0-h0"), ReplicaInfo("m/0/decode/0", "decode", 0, 8, "r0-h1"),
        ReplicaInfo("m/1/prefill/0", "prefill", 1, 8, "r1-h0"), ReplicaInfo("m/1/decode/0", "decode", 1, 8, "r1-h1"),
    ]
    result = serve([0.0, 0.0], [2000, 2000], [2, 2], replicas).results()
    alone = kv_transfer_seconds(L70, 2000, 400.0, latency_s=LATENCY_S, overlap_s=prefill_seconds(L70, H100, 8, 2000))
    assert result.kv_transfer_s.tolist() == pytest.approx([alone, alone], rel=1e-12)


def test_the_nics_bind_when_the_link_is_faster():
    """Between two nodes of a 7200 Gbit/s domain a 1-GPU replica sends through one
    400 Gbit/s NIC at its efficiency; on one node NVLink carries it."""

    def fast(a: str, b: str) -> float:
        return 7200.0

    l8 = model_profile("llama-3.1-8b")
    for decode_node, gbps in (("n1", 400 * H100.nic_efficiency), ("n0", 7200.0)):
        sm = ServingModel(l8, H100, fast, ttft_slo_s=2.0, itl_slo_s=0.05)
        sm.add_requests(np.array([0.0]), np.array([4000]), np.array([2]))
        sm.set_replicas(0.0, [ReplicaInfo("p", "prefill", 0, 1, "n0"), ReplicaInfo("d", "decode", 0, 1, decode_node)])
        sm.advance(100.0)
        overlap = prefill_seconds(l8, H100, 1, 4000)
        assert sm.results().kv_transfer_s[0] == pytest.approx(
            kv_transfer_seconds(l8, 4000, gbps, latency_s=LATENCY_S, overlap_s=overlap), rel=1e-12
        )


def test_a_request_that_waited_for_room_sends_its_whole_kv():
    """max_decode_batch does not hold KV back, so make the decode replica's KV the bound:
    the second request waits in the admission pool and streams nothing behind its prefill."""
    from tandem.sim.serving.profiles import GIB
    from tandem.sim.serving.roofline import Parallel, activation_bytes

    l8 = model_profile("llama-3.1-8b")
    engine = activation_bytes(l8, Parallel(1), 8192)
    tiny = H100.model_copy(update={"hbm_gib": (l8.weight_bytes + engine + 3000.5 * 131_072) / GIB,
                                   "memory_utilization": 1.0, "reserved_gib": 0.0})
    sm = ServingModel(l8, tiny, lambda a, b: 100.0, ttft_slo_s=2.0, itl_slo_s=0.05)
    # 187 blocks of 16: the first takes 63 (1,001 tokens), the second's 126 (2,001) do not fit beside them
    sm.add_requests(np.array([0.0, 0.0]), np.array([1000, 2000]), np.array([1000, 10]))
    sm.set_replicas(0.0, [ReplicaInfo("p", "prefill", 0, 1, "a"), ReplicaInfo("d", "decode", 0, 1, "b")])
    sm.advance(1e5)
    result = sm.results()
    assert result.completed.all()
    assert result.kv_transfer_s[1] == pytest.approx(kv_transfer_seconds(l8, 2000, 100.0, latency_s=LATENCY_S), rel=1e-12)
    assert result.kv_transfer_s[1] > 10 * result.kv_transfer_s[0]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.integers(1, 12), prompt=st.integers(100, 6000))
def test_more_concurrent_transfers_never_make_one_faster(count, prompt):
    """Transfers only ever share: none is faster than the same transfer alone."""
    replicas = [replica("prefill", 0, "r0-h0"), replica("decode", 0, "r1-h0")]
    many = serve([0.0] * count, [prompt] * count, [2] * count, replicas).results()
    alone = serve([0.0], [prompt], [2], replicas).results()
    assert many.completed.all()
    assert np.all(many.kv_transfer_s >= alone.kv_transfer_s[0] * (1 - 1e-12))
    assert np.all(np.diff(many.kv_transfer_s[: min(count, 8192 // prompt)]) >= -1e-15)  # one batch: later ones share more
