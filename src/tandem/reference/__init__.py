"""Reference points for the placement engine (see DESIGN.md §3, §4).

- `baselines`: what today's schedulers do with the same input (`independent`: the
  Workload API's independent PodGroups; `sequential`: Kueue TAS, pod set after pod set).
- `exact`: the optimum by mixed-integer programming (HiGHS, extra `tandem[exact]`),
  for small instances only; `objective="replicas"` is the lexicographic reference that
  sees extras (minimums in order, then replicas, then affinity).
- `instances`: seeded small problems built as manifests (`random_instance`,
  `contention_scenarios`, `fits_whole_instance`), and `score`, which checks and measures
  any plan the same way.

Used by `bench/quality.py` and the tests; nothing in the product depends on it.
"""

from tandem.reference.baselines import independent, sequential
from tandem.reference.exact import ExactResult, ExactSolverUnavailable, Tier, exact, solve
from tandem.reference.instances import (
    Instance,
    Score,
    contention_scenarios,
    fits_whole_instance,
    random_instance,
    score,
    whole_plan,
)

__all__ = [
    "ExactResult",
    "ExactSolverUnavailable",
    "Instance",
    "Score",
    "Tier",
    "contention_scenarios",
    "exact",
    "fits_whole_instance",
    "independent",
    "random_instance",
    "score",
    "sequential",
    "solve",
    "whole_plan",
]
