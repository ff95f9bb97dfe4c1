"""Closed-form timing of a decode batch whose membership does not change.

Between joins and departures a decode replica repeats the same iteration with a context
that grows by one token per request: iteration i (0-based) takes

    step(i) = max(base + slope x i, floor)

The serving model uses it with the roofline's decode step, which is linear in the KV the
batch reads (`roofline.decode_step_parts`): base = fixed(batch) + per_token(batch) x
context at the run's start, slope = per_token(batch) x batch, floor = 0. The general
form also covers a compute floor: the linear term only grows, so the max switches regime
at most once, and the time of k iterations is an arithmetic series; the simulator needs
no event per token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchRun:
    start: float  # when iteration 0 begins (s)
    batch: int  # requests in every iteration
    context: int  # KV tokens the whole batch reads in iteration 0
    base: float  # memory time of iteration 0 (s)
    slope: float  # memory time added by each later iteration (s), > 0
    floor: float  # compute time of any iteration (s)

    def step(self, i: int) -> float:
        """Seconds of iteration i."""
        return max(self.base + self.slope * i, self.floor)

    def elapsed(self, k: int) -> float:
        """Seconds of the first k iterations: n x floor + sum over i in [n, k) of (base + slope x i),
        where n is the number of compute-bound iterations at the start."""
        if k <= 0:
            return 0.0
        n = 0 if self.base >= self.floor else min(k, math.ceil((self.floor - self.base) / self.slope))
        return n * self.floor + (k - n) * self.base + self.slope * ((k * (k - 1) - n * (n - 1)) / 2)

    def boundary(self, k: int) -> float:
        """When iteration k-1 ends (k iterations done)."""
        return self.start + self.elapsed(k)

    def done_by(self, t: float, limit: int) -> int:
        """Iterations completed at time t (boundaries <= t), at most `limit`.

        `boundary` never decreases with k (each term of `elapsed` grows with k and rounding
        keeps that order), so the answer is the one k with boundary(k) <= t < boundary(k + 1).
        The series' root usually names it at once; `boundary` confirms it, else a bisection
        finds it, so the answer is the bisection's either way."""
        if limit <= 0:
            return 0
        guess = self._root(t, limit)
        if guess >= 1 and self.boundary(guess) <= t and (guess == limit or self.boundary(guess + 1) > t):
            return guess
        if self.boundary(1) > t:
            return 0
        low, high = 1, limit  # boundary(low) <= t
        if self.boundary(high) <= t:
            return high
        while high - low > 1:
            middle = (low + high) // 2
            if self.boundary(middle) <= t:
                low = middle
            else:
                high = middle
        return low

    def _root(self, t: float, limit: int) -> int:
        """About how many iterations are done at t, at most `limit` (0 when unsure): the
        whole part of the root of elapsed(k) = t - start while no iteration is
        compute-bound, k x base + slope x k(k-1)/2, in the form that does not cancel."""
        spent = t - self.start
        half = self.base - self.slope / 2
        if self.base < self.floor or not 0 < spent < math.inf or half <= 0:
            return 0
        root = 2 * spent / (half + math.sqrt(half * half + 2 * self.slope * spent))
        return min(limit, int(root))

    def progress(self, t: float, limit: int) -> float:
        """Iterations done at time t, counting the one under way pro rata (at most `limit`)."""
        if t <= self.start:
            return 0.0
        done = self.done_by(t, limit)
        if done >= limit:
            return float(limit)
        return done + (t - self.boundary(done)) / self.step(done)

    def first_boundary_from(self, t: float, limit: int) -> int:
        """The first k >= 1 whose boundary is at or after t, at most `limit`."""
        done = self.done_by(t, limit)
        if done >= 1 and self.boundary(done) == t:
            return done
        return min(limit, done + 1)
