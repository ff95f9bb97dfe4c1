"""Row-wise tests over a few resource columns: `np.all(..., axis=1)` without its overhead.

Placement compares [nodes or domains, resources] arrays with two to six columns
thousands of times a plan. `np.all(..., axis=1)` spends most of its time in its Python
wrapper and, on long arrays, in reduction machinery (nine times as long as combining
the columns with `&` on five thousand rows). So: up to `_SHORT` rows the array's own
`.all(axis=1)` / `.any(axis=1)`, beyond it one column at a time. Both give the same
booleans; `tests/placement/test_fast_paths.py` checks it.
"""

from __future__ import annotations

import numpy as np

# Up to this many rows the reduction's fixed cost is below a numpy call per column.
_SHORT = 64


def all_at_least(rows: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """`np.all(rows >= vec, axis=1)` for a 2-D `rows` and a vector per column."""
    out: np.ndarray
    if rows.shape[0] <= _SHORT or rows.shape[1] == 0:
        out = np.logical_and.reduce(rows >= vec, axis=1)  # (what `.all(axis=1)` calls: an array, as its type says)
        return out
    out = rows[:, 0] >= vec[0]
    for c in range(1, rows.shape[1]):
        out &= rows[:, c] >= vec[c]
    return out


def all_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.all(a == b, axis=1)` for two 2-D arrays of one shape."""
    out: np.ndarray
    if a.shape[0] <= _SHORT or a.shape[1] == 0:
        out = (a == b).all(axis=1)
        return out
    out = a[:, 0] == b[:, 0]
    for c in range(1, a.shape[1]):
        out &= a[:, c] == b[:, c]
    return out


def any_differ(a: np.ndarray, b: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
    """`np.any(a != b, axis=1)` for two 2-D arrays of one shape; with `columns`,
    `np.any(a[:, columns] != b, axis=1)`, reading those columns of `a` in place (a
    rollup compares the whole cluster's free capacity with its own copy of a few columns)."""
    out: np.ndarray
    if a.shape[0] <= _SHORT or b.shape[1] == 0:
        out = ((a if columns is None else a[:, columns]) != b).any(axis=1)
        return out
    picked = list(range(b.shape[1])) if columns is None else columns.tolist()
    out = a[:, picked[0]] != b[:, 0]
    for j in range(1, len(picked)):
        out |= a[:, picked[j]] != b[:, j]
    return out
