"""Prefill/decode-aware autoscaling (pure): per-role signals -> desired replicas per unit.

`decide` is the whole interface; `group_inputs` reads its explicit inputs from a group.
See docs/autoscaling.md for the policies, stabilisation, panic and rounding.
"""

from tandem.autoscaling.decide import ScaleDecision, decide
from tandem.autoscaling.group import GroupInputs, group_inputs
from tandem.autoscaling.rounding import apportion
from tandem.autoscaling.signals import RoleSignals, Signals
from tandem.autoscaling.state import AutoscalerState, Recommendation

__all__ = [
    "AutoscalerState",
    "GroupInputs",
    "Recommendation",
    "RoleSignals",
    "ScaleDecision",
    "Signals",
    "apportion",
    "decide",
    "group_inputs",
]
