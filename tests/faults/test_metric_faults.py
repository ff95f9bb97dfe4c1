"""Issue 29: the fault campaign's metric faults (outage, stale series, counter reset, a pod
missing from the scrape) against the operator's autoscaler loop, and its two invariants:
no scale-down on missing data, every decision inside the ratio band
(tests/support/faults/autoscaling.py, docs/reliability.md). The schedules below 50 with
autoscaled groups also run in test_campaign.py's seeded subset."""

from __future__ import annotations

import math

import tandem.autoscaling.scaler as scaler
import tandem.autoscaling.scrape_window as scrape_window
from support.faults.autoscaling import in_bands, in_ratio, missing_data, raisable
from support.faults.campaign import run
from support.faults.engines import ANSWERED, DOWN, MISSING, STALE, EngineModel, Scrape
from support.faults.schedule import METRIC_FAULTS, generate
from tandem.api.naming import GROUP_LABEL, POD_INDEX_LABEL, ROLE_LABEL
from tandem.autoscaling.engine_metrics import VLLM, read_pod
from tandem.operator.pod_metrics import parse_exposition

POLICIES = {"FixedRatio", "PreferredBand", "SLO", "Independent"}


def invariants(seed: int) -> set[str]:
    return {v.invariant for v in run(generate(seed)).violations}


def test_some_schedules_autoscale_groups_under_every_policy_with_every_metric_fault():
    schedules = [generate(seed) for seed in range(200)]
    autoscaled = [s for s in schedules if s.metrics]
    assert 0.1 < len(autoscaled) / len(schedules) < 0.4
    specs = [m["spec"] for s in autoscaled for m in s.groups.values() if m["spec"].get("autoscaling")]
    assert {spec["autoscaling"]["policy"] for spec in specs} == POLICIES
    assert any(spec["autoscaling"]["preferredBand"].get("bands") for spec in specs if spec["autoscaling"]["policy"] == "PreferredBand")
    assert {e["type"] for s in autoscaled for e in s.events} >= {"load", *METRIC_FAULTS}
    assert not [e for s in schedules if not s.metrics for e in s.events if e["type"] in ("load", *METRIC_FAULTS)]
    autoscaled_names = [(s, {n for n, m in s.groups.items() if m["spec"].get("autoscaling")}) for s in autoscaled]
    assert not [e for s, names in autoscaled_names for e in s.events if e["type"] == "ratio" and e["group"] in names]
    assert not any(generate(seed, world="http").metrics or generate(seed, metrics=False).metrics for seed in range(40))


def _pod(name: str, role: str) -> dict:
    return {"metadata": {"name": name, "namespace": "serving", "labels": {GROUP_LABEL: "g0", ROLE_LABEL: role, POD_INDEX_LABEL: "0"}},
            "spec": {}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def test_the_engines_speak_vllm_through_the_real_parser_and_each_metric_fault_means_what_it_says():
    t = [0.0]
    model = EngineModel(lambda: t[0])
    model.load["g0"] = 2.0  # requests/s: 4,000 prompt and 1,000 generated tokens/s
    pods = [_pod("g0-p", "prefill"), _pod("g0-d", "decode")]
    for _ in range(10):
        model.advance(pods, {"g0"})
        t[0] += 1
    text, state = model.exposition(("serving", "g0-d"))
    reading = read_pod(parse_exposition(text), VLLM)
    assert state == ANSWERED and reading is not None
    assert reading.generation_tokens == 10 * 1000 and reading.requests == 20 and reading.ttft.count == 20 and reading.kv_usage > 0
    assert read_pod(parse_exposition(model.exposition(("serving", "g0-p"))[0]), VLLM).prompt_tokens == 10 * 4000
    model.go_stale(("serving", "g0-d"), until=15.0)
    model.advance(pods, {"g0"})
    text, state = model.exposition(("serving", "g0-d"))
    assert state == STALE and read_pod(parse_exposition(text), VLLM) is None  # gauges NaN: no reading, never zeros
    model.reset(("serving", "g0-p"))
    assert read_pod(parse_exposition(model.exposition(("serving", "g0-p"))[0]), VLLM).prompt_tokens == 0
    model.miss(("serving", "g0-p"), until=20.0)
    assert model.exposition(("serving", "g0-p")) == (None, MISSING)
    model.outage(until=30.0)
    assert model.exposition(("serving", "g0-d")) == (None, DOWN)
    t[0] = 30.0
    model.advance(pods, {"g0"})
    assert model.exposition(("serving", "g0-d"))[1] == model.exposition(("serving", "g0-p"))[1] == ANSWERED  # all over


FIXED = {"policy": "FixedRatio", "roles": {}}
BAND_ON_GAUGES = {"policy": "PreferredBand", "preferredBand": {"targets": {"prefill": {"metric": "queueDepth", "value": 2},
                                                                             "decode": {"metric": "kvUtilization", "value": 0.6}}}}


def _round(at: float, **pods: tuple[str, str]) -> Scrape:
    return Scrape(0, at, "g0", {"prefill": 1, "decode": 1}, pods)


def test_missing_data_is_what_the_figures_the_policy_reads_lack_inside_the_window():
    both = {"p": ("prefill", ANSWERED), "d": ("decode", ANSWERED)}
    assert missing_data([_round(0, **both), _round(5, **both)], FIXED, 20) is None
    assert "0 answered" in missing_data([_round(0, **both), _round(5, p=both["p"], d=("decode", MISSING)),
                                         _round(30, p=both["p"], d=("decode", STALE))], FIXED, 20)  # nothing of d in the window
    assert "1 answered" in missing_data([_round(5, **both)], FIXED, 20)  # a rate needs two
    assert missing_data([_round(5, **both)], BAND_ON_GAUGES, 20) is None  # a gauge needs one
    assert missing_data([_round(0, **both), _round(5, p=("prefill", MISSING), d=both["d"])], FIXED, 20) is None  # FixedRatio reads decode only
    assert "no pod answered" in missing_data([_round(0, **both), _round(5, p=("prefill", DOWN), d=("decode", DOWN))], BAND_ON_GAUGES, 20)
    assert "no Ready decode pod" in missing_data([_round(5, p=both["p"])], BAND_ON_GAUGES, 20)


def test_the_ratio_is_the_largest_remainder_split_and_a_band_is_excused_only_when_no_raise_holds_it():
    wide = {"prefill": (1, 8), "decode": (1, 8)}
    ratio = {"prefill": 1, "decode": 2}
    assert all(in_ratio({"prefill": p, "decode": d}, ratio, wide) for p, d in [(1, 1), (1, 2), (1, 3), (2, 3), (2, 4), (2, 5), (3, 5)])
    assert not any(in_ratio({"prefill": p, "decode": d}, ratio, wide) for p, d in [(2, 2), (1, 4), (3, 3), (1, 5)])
    assert in_ratio({"prefill": 2, "decode": 6}, ratio, {"prefill": (1, 2), "decode": (1, 8)})  # prefill's maximum binds
    bands = {"prefill": (30, 50), "decode": (50, 70)}
    assert in_bands({"prefill": 2, "decode": 3}, bands) and not in_bands({"prefill": 2, "decode": 1}, bands)
    assert raisable({"prefill": 2, "decode": 1}, bands, wide)
    assert not raisable({"prefill": 2, "decode": 1}, bands, {"prefill": (1, 2), "decode": (1, 1)})


def test_an_autoscaler_that_counts_a_missing_metric_as_zero_scales_down_on_missing_data(monkeypatch):
    """Kthena's rule (a pod it cannot read counts as zero): a decode pod with one answered
    scrape in the window (too few for a rate) adds nothing to decode's tokens/s, and
    FixedRatio scales decode down."""
    assert not invariants(86)  # the real code: held
    monkeypatch.setattr(scrape_window, "_strict_sum", lambda values: math.fsum(0.0 if math.isnan(v) else v for v in values) if values else math.nan)
    monkeypatch.setattr(scrape_window, "_strict_mean",
                        lambda values: math.fsum(0.0 if math.isnan(v) else v for v in values) / len(values) if values else math.nan)
    assert "scale-down-on-missing-data" in invariants(86)


def test_an_autoscaler_that_skips_the_band_clip_breaks_the_ratio_band(monkeypatch):
    """PreferredBand's split without its bands (and no band guard after the windows)."""
    first = run(generate(3))
    assert first.ok and first.counts["autoscaler_decisions"] > 0  # the real code: inside the bands
    assert run(generate(3)).to_json() == first.to_json(), "the autoscaler's decisions replay the same"
    monkeypatch.setattr(scaler, "band_bounds", lambda total, bands, bounds: (dict(bounds), True))
    monkeypatch.setattr(scaler, "_keep_bands", lambda desired, bands, limits, fits: (desired, []))
    assert "ratio-band" in invariants(3)
