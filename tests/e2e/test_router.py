"""A real serving client on tandem's pods (issue 28): SGLang's model gateway (`sglang-router`)
in prefill/decode mode finds the pods of examples/serving/sglang-pd.yaml by the labels tandem
gives them, with the selectors of examples/serving/sglang-pd-router.yaml, through its own
Kubernetes client against `tandem apiserver --engines`, while `tandem operator` runs the
group and kubectl does what a user does (`router_story.py` tells the story).

With requests flowing all the time the group scales to a second unit, rolls out a new
template, loses a decode pod and scales back to one unit: every request succeeds; every pod took requests only once
Ready and none once its engine had stopped (the router drops a pod when it sees its
deletionTimestamp; the preStop sleep keeps the engine serving meanwhile); every pod Ready
during the load was used. Requests one at a time show TTFT and ITL through the router within
20% of `tandem profile predict` for the example's configuration.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from e2e import router_story
from e2e.processes import KUBECTL, NO_KUBECTL, NO_ROUTER

pytestmark = [pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL),
              pytest.mark.skipif(importlib.util.find_spec("sglang_router") is None, reason=NO_ROUTER)]

TOLERANCE = 0.20


def test_the_real_router_serves_through_scaling_up_and_down_a_rollout_and_a_lost_decode_without_a_failed_request(tmp_path: Path):
    story = router_story.run(tmp_path)

    assert all(o.ok for o in story.measured), [o.error for o in story.measured if not o.ok]
    ttft, itl = router_story.medians(story.measured)
    predicted_ttft, predicted_itl = story.predicted["prefill_s"], story.predicted["decode_step_s"]
    assert abs(ttft / predicted_ttft - 1) <= TOLERANCE, f"TTFT {ttft * 1e3:.1f} ms against {predicted_ttft * 1e3:.1f} ms predicted"
    assert abs(itl / predicted_itl - 1) <= TOLERANCE, f"ITL {itl * 1e3:.2f} ms against {predicted_itl * 1e3:.2f} ms predicted"

    failed = [o for o in story.outcomes if not o.ok]
    assert len(story.outcomes) >= router_story.LEAST_REQUESTS, f"only {len(story.outcomes)} requests"
    assert not failed, f"{len(failed)} of {len(story.outcomes)} failed: {[o.error for o in failed[:5]]}"

    assert story.engines, "the stand-ins reported their pods"
    assert any(p["deletingSince"] for p in story.engines), "pods went during the load (the rollout, the lost decode)"
    for pod in story.engines:
        arrivals = router_story.arrivals(pod)
        name = f"{pod['name']} ({pod['uid']})"
        if arrivals:
            assert pod["readySince"] is not None and min(arrivals) >= pod["readySince"], f"{name} took a request before it was Ready"
        if pod["stoppedAt"] is not None:
            late = [a - pod["stoppedAt"] for a in arrivals if a > pod["stoppedAt"]]
            assert not late, f"{name} took {len(late)} requests after its engine stopped (up to {max(late) * 1e3:.0f} ms after)"
        served_from = max(pod["readySince"] or story.window[1], story.window[0])
        served_until = min(pod["deletingSince"] or story.window[1], story.window[1])
        if served_until - served_from > 2.0:
            assert arrivals, f"{name} was Ready for {served_until - served_from:.1f} s of the load and took no request"
