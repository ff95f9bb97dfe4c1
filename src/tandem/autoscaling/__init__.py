"""Prefill/decode-aware autoscaling (pure): per-role signals -> desired replicas per unit.

`scale` is the whole interface; `group_inputs` reads its explicit inputs from a group.
See docs/autoscaling.md for the policies, stabilisation, panic and rounding.
"""

from tandem.autoscaling.group import GroupInputs, group_inputs
from tandem.autoscaling.memory import AutoscalerState, Recommendation
from tandem.autoscaling.rounding import apportion
from tandem.autoscaling.scaler import ScaleDecision, scale
from tandem.autoscaling.signals import RoleSignals, Signals

__all__ = [
    "AutoscalerState",
    "GroupInputs",
    "Recommendation",
    "RoleSignals",
    "ScaleDecision",
    "Signals",
    "apportion",
    "group_inputs",
    "scale",
]
