"""Serving realism (issue 14, item 5): drains, paged KV with preemption, the KV signal from
allocated blocks, prefix caching keyed by Mooncake hash ids, chunked prefill."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from support.fuzz import examples
from support.serving import H100, L8, L70
from tandem.sim.serving import GpuProfile, ReplicaInfo, ServingModel, kv_capacity_tokens, prefill_seconds
from tandem.sim.serving.profiles import GIB
from tandem.sim.serving.roofline import Parallel, activation_bytes


def prefill(index: int, unit: int = 0, gpus: int = 8) -> ReplicaInfo:
    return ReplicaInfo(f"p{index}", "prefill", unit, gpus, f"p-{index}")


def decode(index: int, unit: int = 0, gpus: int = 8) -> ReplicaInfo:
    return ReplicaInfo(f"d{index}", "decode", unit, gpus, f"d-{index}")


def model(m=L70, gpu=H100, **options) -> ServingModel:
    return ServingModel(m, gpu, lambda a, b: 400.0, ttft_slo_s=2.0, itl_slo_s=0.05, **options)


def tiny_gpu(kv_tokens: float) -> GpuProfile:
    """An H100 whose HBM holds llama-3.1-8b's weights, activations and `kv_tokens` of KV."""
    engine = activation_bytes(L8, Parallel(1), 8192)
    return H100.model_copy(
        update={"hbm_gib": (L8.weight_bytes + engine + kv_tokens * 131_072) / GIB, "memory_utilization": 1.0, "reserved_gib": 0.0}
    )


# ------------------------------------------------------------------ drains


def test_a_draining_decode_replica_finishes_its_requests_takes_no_new_ones_and_then_leaves():
    sm = model()
    sm.add_requests(np.array([0.0, 0.0, 5.0]), np.array([1000, 1000, 1000]), np.array([400, 400, 50]))
    sm.set_replicas(0.0, [prefill(0), decode(0)])
    sm.advance(2.0)  # both decoding on d0
    sm.set_replicas(2.0, [prefill(0), decode(1)], drain_s={"d0": 600.0})
    sm.advance(1e4)
    r = sm.results()
    assert r.completed.all() and r.restarts.sum() == 0 and r.drain_requeued.sum() == 0
    d0, d1 = r.replica_ids.index("d0"), r.replica_ids.index("d1")
    assert r.decode_replica.tolist() == [d0, d0, d1]  # the one arriving during the drain goes to d1
    assert r.replica_drain_s[d0] == 2.0 and math.isnan(r.replica_drain_s[d1])
    assert r.replica_left_s[d0] == pytest.approx(r.e2e_s[:2].max())  # it leaves with its last request


def test_a_drain_whose_grace_runs_out_sends_what_is_left_back_and_counts_it():
    sm = model()
    sm.add_requests(np.array([0.0]), np.array([1000]), np.array([3000]))  # about 30 s of decode
    sm.set_replicas(0.0, [prefill(0), decode(0)])
    sm.advance(2.0)
    sm.set_replicas(2.0, [prefill(0), decode(1)], drain_s={"d0": 5.0})
    sm.advance(1e4)
    r = sm.results()
    assert r.completed.all()
    assert r.drain_requeued.tolist() == [1] and r.restarts.tolist() == [1]
    assert r.replica_left_s[r.replica_ids.index("d0")] == pytest.approx(7.0)
    assert r.decode_replica[0] == r.replica_ids.index("d1")


def test_a_forced_removal_restarts_at_once_and_a_draining_prefill_finishes_its_queue():
    sm = model()
    sm.add_requests(np.zeros(6), np.full(6, 8000), np.full(6, 5))  # one prompt per batch
    sm.set_replicas(0.0, [prefill(0), prefill(1), decode(0)])
    sm.advance(0.05)
    sm.set_replicas(0.05, [prefill(1), decode(0)], drain_s={"p0": 60.0})
    sm.advance(1e4)
    r = sm.results()
    p0 = r.replica_ids.index("p0")
    assert r.completed.all() and r.restarts.sum() == 0
    assert (r.prefill_replica == p0).sum() == 3  # the three routed to p0 were prefilled there
    forced = model()
    forced.add_requests(np.zeros(6), np.full(6, 8000), np.full(6, 5))
    forced.set_replicas(0.0, [prefill(0), prefill(1), decode(0)])
    forced.advance(0.05)
    forced.set_replicas(0.05, [prefill(1), decode(0)])
    forced.advance(1e4)
    assert forced.results().restarts.sum() == 1  # the prompt p0 was running


# ------------------------------------------------------------------ paged KV


def test_the_decode_kv_signal_is_allocated_blocks_over_all_blocks():
    sm = model(m=L8, gpu=tiny_gpu(16_000.5), block_tokens=16)  # 1,000 blocks
    sm.add_requests(np.array([0.0]), np.array([1000]), np.array([2000]))
    sm.set_replicas(0.0, [prefill(0, gpus=1), decode(0, gpus=1)])
    early = sm.signals(1.0, 1.0).roles["decode"].kv_utilization
    late = sm.signals(10.0, 1.0).roles["decode"].kv_utilization
    r = sm.results()
    delivered_by = lambda t: 1000 + 1 + (t - r.ttft_s[0]) / 0.0064  # roughly 6.4 ms per token
    assert early == pytest.approx(math.ceil(delivered_by(1.0) / 16) / 1000, abs=0.01)
    assert late > early  # blocks grow with the answer, nothing reserved up front
    assert early < (1000 + 2000) / 16 / 1000 / 2


def test_swap_preemption_resumes_faster_than_recompute():
    gpu = tiny_gpu(4000.5)
    runs = {}
    for mode in ("recompute", "swap"):
        sm = model(m=L8, gpu=gpu, preemption=mode)
        sm.add_requests(np.zeros(3), np.full(3, 1000), np.full(3, 500))
        sm.set_replicas(0.0, [prefill(0, gpus=1), decode(0, gpus=1)])
        sm.advance(1e4)
        runs[mode] = sm.results()
    for r in runs.values():
        assert r.completed.all() and r.preemptions.tolist() == [0, 0, 1]
    # a swap of ~1,400 tokens (180 MB) over 25 GB/s and back costs less than re-prefilling them
    assert runs["swap"].max_itl_s[2] < runs["recompute"].max_itl_s[2]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(1, 14),
    seed=st.integers(0, 2**16),
    kv_tokens=st.integers(3000, 12000),
    mode=st.sampled_from(["recompute", "swap"]),
    block=st.sampled_from([1, 16, 32]),
    chunked=st.booleans(),
)
# A request parked off a resume queue (longer than the whole cache) frees the room others
# wait for: admission must hear of it, or the pool waits for ever on idle decode replicas.
@example(count=9, seed=9, kv_tokens=3000, mode="recompute", block=1, chunked=False)
def test_blocks_never_exceed_capacity_and_every_request_ends_exactly_once(count, seed, kv_tokens, mode, block, chunked):
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 5, count))
    inputs = rng.integers(1, 2500, count)
    outputs = rng.integers(1, 1500, count)
    sm = model(m=L8, gpu=tiny_gpu(kv_tokens + 0.5), preemption=mode, block_tokens=block, chunked_prefill=chunked,
               max_prefill_batch_tokens=2048)
    sm.add_requests(arrival, inputs, outputs)
    replicas = [prefill(0, gpus=1), decode(0, gpus=1), decode(1, gpus=1)]
    sm.set_replicas(0.0, replicas)
    for t in np.linspace(0.5, 200, 25):
        sm.signals(float(t), 0.5)
        for decode_replica in sm.fleet.decodes.values():  # the invariant at every sample
            assert 0 <= sm.allocated_blocks(decode_replica) <= decode_replica.blocks
    sm.advance(1e6)
    r = sm.results()
    capacity_blocks = kv_capacity_tokens(L8, tiny_gpu(kv_tokens + 0.5), 1) // block
    assert np.all(r.replica_peak_kv_utilization[np.array(r.replica_kinds) == "decode"] <= 1.0)
    assert np.all(r.samples.kv_utilization[~np.isnan(r.samples.kv_utilization)] <= 1.0)
    # a request ends exactly once: completed, or never finished because it outgrew every cache
    too_long = -(-(inputs + outputs) // block) > capacity_blocks
    assert np.array_equal(r.completed, ~too_long) or (r.completed | too_long).all()
    assert np.all(r.completed[~too_long])
    # everything allocated is given back
    for decode_replica in sm.fleet.decodes.values():
        assert decode_replica.held == 0 and decode_replica.swapped == 0 and decode_replica.ids.size == 0


# ------------------------------------------------------------------ prefix caching


def test_a_shared_prefix_is_served_from_the_prefill_cache_and_skips_its_compute():
    sm = model()
    sm.add_requests(
        np.array([0.0, 1.0, 2.0]), np.array([2000, 2000, 2000]), np.array([2, 2, 2]),
        prefix_hashes=[(1, 2, 3, 4), (1, 2, 5, 6), (7, 8, 9, 10)],
    )
    sm.set_replicas(0.0, [prefill(0), decode(0)])
    sm.advance(100.0)
    r = sm.results()
    assert r.cached_tokens.tolist() == [0, 1024, 0]  # two leading 512-token blocks
    assert r.prefix_hit_rate() == pytest.approx(1024 / 6000)
    computed = prefill_seconds(L70, H100, 8, 976, [976], attention_squares=2000**2 - 1024**2)
    assert r.prefill_s[1] == pytest.approx(computed)
    assert r.prefill_s[1] < 0.6 * r.prefill_s[0]


def test_no_hashes_or_caching_off_give_no_hits_and_the_cache_evicts_least_recently_used():
    plain = model()
    plain.add_requests(np.array([0.0, 1.0]), np.array([2000, 2000]), np.array([2, 2]))
    plain.set_replicas(0.0, [prefill(0), decode(0)])
    plain.advance(100.0)
    assert plain.results().cached_tokens.sum() == 0
    off = model(prefix_caching=False)
    off.add_requests(np.array([0.0, 1.0]), np.array([2000, 2000]), np.array([2, 2]), prefix_hashes=[(1, 2), (1, 2)])
    off.set_replicas(0.0, [prefill(0), decode(0)])
    off.advance(100.0)
    assert off.results().prefix_hit_rate() == 0.0
    # a cache of 8 blocks (4,096 tokens): after two other 4-block prompts, the first is gone
    lru = model(m=L8, gpu=tiny_gpu(4096.5))
    lru.add_requests(
        np.array([0.0, 1.0, 2.0, 3.0]), np.full(4, 2048), np.full(4, 2),
        prefix_hashes=[(1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (1, 2, 3, 4)],
    )
    lru.set_replicas(0.0, [prefill(0, gpus=1), decode(0, gpus=1)])
    lru.advance(100.0)
    assert lru.results().cached_tokens.tolist() == [0, 0, 0, 0]


# ------------------------------------------------------------------ chunked prefill


def test_chunked_prefill_bounds_every_iteration_by_the_token_budget():
    sm = model(chunked_prefill=True, max_prefill_batch_tokens=4096)
    sm.add_requests(np.array([0.0, 0.0]), np.array([10_000, 1000]), np.array([2, 2]))
    sm.set_replicas(0.0, [prefill(0), decode(0)])
    sm.advance(100.0)
    r = sm.results()
    assert r.completed.all()
    replica = sm.fleet.prefills["p0"]
    assert replica.tokens == [4096, 4096, 2808]  # 10,000 + 1,000: two full iterations of the budget, then the rest
    # the long prompt's chunks: each new chunk's queries attend to the whole prefix
    expected = sum(
        prefill_seconds(L70, H100, 8, c, [c], attention_squares=(p + c) ** 2 - p**2) for p, c in ((0, 4096), (4096, 4096))
    )
    last = prefill_seconds(L70, H100, 8, 2808, [1808, 1000], attention_squares=10_000**2 - 8192**2 + 1000**2)
    assert r.prefill_s[0] == pytest.approx(expected + last)
    assert r.prefill_s[1] == pytest.approx(last)  # the short prompt rides in the last chunk's iteration
    whole = model()
    whole.add_requests(np.array([0.0]), np.array([10_000]), np.array([2]))
    whole.set_replicas(0.0, [prefill(0), decode(0)])
    whole.advance(100.0)
    assert whole.fleet.prefills["p0"].tokens == [10_000]  # without chunking a long prompt runs alone
