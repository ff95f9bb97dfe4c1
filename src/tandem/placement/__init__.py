"""The placement engine: snapshot + pending units -> an assignment per pod or a reason per unit (pure)."""

from tandem.placement.demand import AffinityRule, PodShape, RoleDemand, UnitDemand, units_from_groups
from tandem.placement.engine import place
from tandem.placement.plan import Plan, PodAssignment, ReplicaAssignment, UnitPlacement

__all__ = [
    "AffinityRule",
    "Plan",
    "PodAssignment",
    "PodShape",
    "ReplicaAssignment",
    "RoleDemand",
    "UnitDemand",
    "UnitPlacement",
    "place",
    "units_from_groups",
]
