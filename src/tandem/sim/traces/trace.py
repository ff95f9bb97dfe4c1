"""A request trace: when each request arrives and how long its prompt and answer are.

Arrays rather than a list of records, because the real traces hold tens of thousands to
millions of requests and every consumer (replay, summaries, the simulator) works on
whole columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests sorted by arrival; times in seconds from the trace's start, lengths in tokens.

    `failed_dropped` counts rows of the source file left out as failed requests (BurstGPT
    rows with 0 response tokens); it describes the whole source file, so transforms and
    the synthetic generator leave it at 0.
    """

    name: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    failed_dropped: int = 0
    # Per request, the ids of its prompt's prefix blocks (Mooncake's `hash_ids`: block j
    # hashes the first (j + 1) x `prefix_block_tokens` tokens, so equal ids mean an equal
    # prefix); None when the source has none (then no prefix-cache hits are possible).
    prefix_hashes: tuple[tuple[int, ...], ...] | None = None
    prefix_block_tokens: int = 512

    def __post_init__(self) -> None:
        # Fix the dtypes and freeze the arrays: a frozen dataclass whose arrays can be
        # written through would only look immutable.
        arrays = {
            "arrival_s": np.array(self.arrival_s, dtype=np.float64),
            "input_tokens": np.array(self.input_tokens, dtype=np.int64),
            "output_tokens": np.array(self.output_tokens, dtype=np.int64),
        }
        sizes = {a.shape for a in arrays.values()}
        if len(sizes) != 1 or next(iter(sizes)) == () or len(next(iter(sizes))) != 1:
            raise ValueError(f"Trace columns must be 1-D and equally long, got shapes {sorted(sizes)}")
        arrival = arrays["arrival_s"]
        if arrival.size == 0:
            raise ValueError("a Trace holds at least one request")
        if not np.all(np.isfinite(arrival)) or arrival[0] < 0 or np.any(np.diff(arrival) < 0):
            raise ValueError("Trace arrival times must be finite, >= 0 and sorted")
        if arrays["input_tokens"].min() < 1 or arrays["output_tokens"].min() < 1:
            raise ValueError("Trace token counts must be >= 1")
        for key, value in arrays.items():
            value.setflags(write=False)
            object.__setattr__(self, key, value)
        if self.prefix_hashes is not None:
            hashes = tuple(tuple(int(h) for h in row) for row in self.prefix_hashes)
            if len(hashes) != arrival.size:
                raise ValueError(f"Trace prefix_hashes must have one row per request ({arrival.size}), got {len(hashes)}")
            object.__setattr__(self, "prefix_hashes", hashes)
        if self.prefix_block_tokens < 1:
            raise ValueError("Trace prefix_block_tokens must be >= 1")

    def take(self, index: np.ndarray, arrival_s: np.ndarray, name: str | None = None) -> "Trace":
        """The requests at `index` (in that order) with new arrival times; prefix hashes follow."""
        hashes = None if self.prefix_hashes is None else tuple(self.prefix_hashes[int(i)] for i in index)
        return Trace(
            name=self.name if name is None else name,
            arrival_s=arrival_s,
            input_tokens=self.input_tokens[index],
            output_tokens=self.output_tokens[index],
            prefix_hashes=hashes,
            prefix_block_tokens=self.prefix_block_tokens,
        )

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (
            self.name == other.name
            and self.failed_dropped == other.failed_dropped
            and np.array_equal(self.arrival_s, other.arrival_s)
            and np.array_equal(self.input_tokens, other.input_tokens)
            and np.array_equal(self.output_tokens, other.output_tokens)
            and self.prefix_hashes == other.prefix_hashes
            and self.prefix_block_tokens == other.prefix_block_tokens
        )

    __hash__ = None  # type: ignore[assignment]  # equal by value, and arrays are not hashable

    @property
    def duration_s(self) -> float:
        """Seconds from time 0 to the last arrival."""
        return float(self.arrival_s[-1])

    def summary(self) -> dict[str, Any]:
        """Plain numbers (JSON-ready): counts, span, mean rate and length statistics."""
        duration = self.duration_s
        return {
            "name": self.name,
            "requests": len(self),
            "duration_s": duration,
            # One request, or all at the same instant, has no meaningful rate.
            "rate_per_s": len(self) / duration if duration > 0 else None,
            "input_tokens": _length_stats(self.input_tokens),
            "output_tokens": _length_stats(self.output_tokens),
            "failed_dropped": self.failed_dropped,
            "prefix_hashes": self.prefix_hashes is not None,
        }


def _length_stats(lengths: np.ndarray) -> dict[str, float | int]:
    p50, p99 = np.percentile(lengths, [50, 99])
    return {
        "mean": float(lengths.mean()),
        "p50": float(p50),
        "p99": float(p99),
        "max": int(lengths.max()),
        "total": int(lengths.sum()),
    }
