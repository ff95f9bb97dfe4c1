"""Seeded synthetic traces: Poisson or bursty Gamma arrivals, log-normal or fixed lengths.

For load shapes no public trace has (a higher rate, longer prompts, a burstier stream)
while staying reproducible: the same arguments and seed give identical arrays. Arrival
gaps, input lengths and output lengths come from three independent streams spawned from
one `numpy.random.default_rng(seed)`, so changing a length distribution does not move a
single arrival.

Gamma gaps keep the mean 1/rate and set the coefficient of variation (std/mean of the
gaps) to `burstiness`: 1 is a Poisson stream, above 1 bursts and lulls, below 1 steadier.
The defaults for lengths are close to the Azure 2023 conversation trace (median prompt
1,020 and answer 129 tokens; log standard deviations 0.99 and 0.86).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal

import numpy as np

from tandem.errors import InputError, Problem
from tandem.sim.traces.trace import Trace

ARRIVALS = ("poisson", "gamma")
DISTRIBUTIONS = ("lognormal", "fixed")
MAX_REQUESTS = 10_000_000  # beyond this the arrays alone take gigabytes
_CHUNK = 4096


@dataclass(frozen=True)
class Lengths:
    """Token lengths: log-normal around `median` with log-sd `sigma`, or always `median`
    (`fixed`); rounded to whole tokens and clipped to [1, maximum]."""

    distribution: Literal["lognormal", "fixed"] = "lognormal"
    median: float = 1024
    sigma: float = 1.0
    maximum: int = 131_072


DEFAULT_INPUT = Lengths("lognormal", median=1024, sigma=1.0, maximum=16_384)
DEFAULT_OUTPUT = Lengths("lognormal", median=128, sigma=0.9, maximum=4_096)


def synthetic(
    seed: int,
    duration_s: float,
    rate: float,
    arrivals: str = "poisson",
    burstiness: float = 1.0,
    input_lengths: Lengths = DEFAULT_INPUT,
    output_lengths: Lengths = DEFAULT_OUTPUT,
    name: str | None = None,
) -> Trace:
    """Requests arriving over [0, duration_s) at `rate` per second on average."""
    _check(seed, duration_s, rate, arrivals, burstiness)
    _check_lengths(input_lengths, "input_lengths")
    _check_lengths(output_lengths, "output_lengths")
    arrival_rng, input_rng, output_rng = np.random.default_rng(seed).spawn(3)
    times = _arrival_times(arrival_rng, duration_s, rate, arrivals, burstiness)
    if times.size == 0:
        raise InputError(
            Problem("duration_s", f"no request arrives in {duration_s:g} s at {rate:g}/s (seed {seed}); lengthen it or raise the rate")
        )
    return Trace(
        name=name or f"synthetic-{arrivals}-seed{seed}",
        arrival_s=times,
        input_tokens=_draw_lengths(input_rng, input_lengths, times.size),
        output_tokens=_draw_lengths(output_rng, output_lengths, times.size),
    )


def _arrival_times(rng: np.random.Generator, duration_s: float, rate: float, arrivals: str, burstiness: float) -> np.ndarray:
    """Cumulative gaps below duration_s, drawn in fixed-size chunks so a longer duration
    extends a shorter one with the same seed instead of reshuffling it."""
    mean_gap = 1.0 / rate
    shape = 1.0 / burstiness**2
    chunks = []
    clock = 0.0
    while True:
        if arrivals == "gamma":
            gaps = rng.gamma(shape, mean_gap / shape, _CHUNK)
        else:
            gaps = rng.exponential(mean_gap, _CHUNK)
        times = clock + np.cumsum(gaps)
        chunks.append(times[times < duration_s])
        if times[-1] >= duration_s:
            return np.concatenate(chunks)
        clock = float(times[-1])


def _draw_lengths(rng: np.random.Generator, lengths: Lengths, count: int) -> np.ndarray:
    if lengths.distribution == "fixed":
        return np.full(count, int(lengths.median), dtype=np.int64)
    drawn = rng.lognormal(math.log(lengths.median), lengths.sigma, count)
    return np.clip(np.rint(drawn), 1, lengths.maximum).astype(np.int64)


MAX_BURSTINESS = 20.0


def _check(seed: int, duration_s: float, rate: float, arrivals: str, burstiness: float) -> None:
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise InputError(Problem("seed", f"must be a whole number >= 0, got {seed!r}"))
    if not _positive(duration_s):
        raise InputError(Problem("duration_s", f"must be a finite number > 0, got {duration_s!r}"))
    if not _positive(rate):
        raise InputError(Problem("rate", f"must be a finite number > 0 (requests per second), got {rate!r}"))
    if rate * duration_s > MAX_REQUESTS:
        raise InputError(
            Problem("rate", f"{rate:g}/s for {duration_s:g} s is about {rate * duration_s:,.0f} requests; at most {MAX_REQUESTS:,} are generated")
        )
    if arrivals not in ARRIVALS:
        raise InputError(Problem("arrivals", f"must be one of {', '.join(ARRIVALS)}, got {arrivals!r}"))
    if not _positive(burstiness) or burstiness > MAX_BURSTINESS:
        # Gamma gaps of shape 1/burstiness²: far beyond real traces (CV 2-5), almost every gap
        # is 0 and the draw never reaches the duration.
        raise InputError(Problem("burstiness", f"must be a finite number > 0 and at most {MAX_BURSTINESS:g}, got {burstiness!r}"))
    if arrivals == "poisson" and burstiness != 1:
        raise InputError(Problem("burstiness", f"applies to gamma arrivals only (Poisson gaps have burstiness 1), got {burstiness!r}"))


def _check_lengths(lengths: Lengths, path: str) -> None:
    if lengths.distribution not in DISTRIBUTIONS:
        raise InputError(Problem(f"{path}.distribution", f"must be one of {', '.join(DISTRIBUTIONS)}, got {lengths.distribution!r}"))
    if isinstance(lengths.maximum, bool) or not isinstance(lengths.maximum, Integral) or lengths.maximum < 1:
        raise InputError(Problem(f"{path}.maximum", f"must be a whole number >= 1, got {lengths.maximum!r}"))
    if lengths.distribution == "fixed":
        whole = _positive(lengths.median) and lengths.median == int(lengths.median)
        if not whole or lengths.median > lengths.maximum:
            raise InputError(Problem(f"{path}.median", f"a fixed length must be a whole number in [1, {lengths.maximum}], got {lengths.median!r}"))
        return
    if not _positive(lengths.median):
        raise InputError(Problem(f"{path}.median", f"must be a finite number > 0, got {lengths.median!r}"))
    if isinstance(lengths.sigma, bool) or not isinstance(lengths.sigma, Real) or not math.isfinite(lengths.sigma) or lengths.sigma < 0:
        raise InputError(Problem(f"{path}.sigma", f"must be a finite number >= 0, got {lengths.sigma!r}"))


def _positive(value: object) -> bool:
    # typeshed's numbers.Real declares only __lt__ and __le__ (the ABC's abstract ones), not __gt__.
    return not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value) and value > 0  # type: ignore[operator]
