"""The controller's two passes, each observe -> decide (pure) -> apply over the cluster
ports: `reconcile` (coordination, placement, pods, status) and `autoscale` (the counts).

Drivers (the operator, the simulator's runner, the admission webhook) use only what this
package exports; its modules are its own (an import-linter contract keeps them so).
"""

from tandem.controller.autoscaler import AutoscaleReport, Metrics, Sources, autoscale
from tandem.controller.delegation import DelegationSettings
from tandem.controller.observe import OBSERVED_KINDS
from tandem.controller.provisioning import PROVISIONING_KINDS, ProvisioningSettings
from tandem.controller.reconcile import Change, Memo, PassReport, Placer, WriteError, reconcile
from tandem.controller.validity import group_problems, topologies_of

__all__ = [
    "AutoscaleReport",
    "Change",
    "DelegationSettings",
    "Memo",
    "Metrics",
    "OBSERVED_KINDS",
    "PROVISIONING_KINDS",
    "PassReport",
    "ProvisioningSettings",
    "Placer",
    "Sources",
    "WriteError",
    "autoscale",
    "group_problems",
    "reconcile",
    "topologies_of",
]
