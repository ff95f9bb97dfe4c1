"""The `tandem operator` process: connect, elect, serve probes and metrics, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection.
The loop itself (`runner.Operator`) and the pass (`tandem.controller`) are the same code
the simulator drives.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from tandem.autoscaling.metrics_source import SourceDefaults
from tandem.cluster.ports import Cluster
from tandem.controller import DelegationSettings, ProvisioningSettings
from tandem.operator.group_sources import GroupSources
from tandem.operator.runner import Operator
from tandem.runtime import webhook_config
from tandem.runtime.leader import LeaderElector
from tandem.runtime.process import Admission, ProcessConfig, run_process
from tandem.runtime.schedule import PassSchedule
from tandem.runtime.serving import freeze_heap
from tandem.runtime.webhook_config import Registration, Webhook

log = logging.getLogger("tandem.operator")


@dataclass(frozen=True)
class OperatorConfig(ProcessConfig):
    """The shared flags (runtime/process.py; the Lease `tandem-operator`) and the operator's own."""

    namespaces: tuple[str, ...] = ()
    # Units that do not fit ask for nodes with ProvisioningRequests (docs/provisioning.md): off by default.
    provisioning: ProvisioningSettings = field(default_factory=ProvisioningSettings)
    # Groups naming these schedulers are handed to them (docs/backends.md): none by default.
    delegation: DelegationSettings = field(default_factory=DelegationSettings)
    # Where the autoscaler reads signals by default (--metrics-source, --prometheus-url,
    # --metrics-window); a group's spec.autoscaling.metrics overrides it. Sources are built
    # over the connected cluster (a scraper finds the Ready pods in its snapshot). A group
    # left with none is told so (ScalingActive=False, NoMetricsSource), its counts not sized to load.
    metrics: SourceDefaults = field(default_factory=lambda: SourceDefaults(source="none"))


def run(config: OperatorConfig, connect: Callable[[OperatorConfig, Callable[..., None]], Cluster], stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status."""

    def start(cluster: Cluster, clock: Callable[[], float], elector: LeaderElector | None) -> Operator:
        return Operator(cluster, clock, elector, PassSchedule(resync=config.resync), on_synced=_freeze_heap, provisioning=config.provisioning,
                        delegation=config.delegation, group_sources=GroupSources(config.metrics, cluster.snapshot))

    started = {"metrics_source": config.metrics.source != "none"}
    return run_process(config, lambda changed: connect(config, changed), start, _admission, "operator", started, stop, log)


def _freeze_heap() -> None:
    freeze_heap(log)


def _admission() -> Admission:
    """InferenceGroups and ClusterTopology deletes, reviewed over the informers' snapshot."""
    from tandem.operator.admission import review

    return Admission(REGISTRATION, review)


WEBHOOK_CONFIG = "tandem-operator"
REGISTRATION = Registration(
    WEBHOOK_CONFIG,
    (
        {
            "apiGroups": ["tandem.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["inferencegroups", "inferencegroups/scale"],
            "scope": "*",
        },
        {  # deleting a topology groups name is refused, naming them (api/topology_admission.py)
            "apiGroups": ["tandem.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["clustertopologies"],
            "scope": "Cluster",
        },
    ),
    also=(
        # HPAs and KEDA ScaledObjects, only those whose scaleTargetRef names a tandem.dev kind
        # (operator/scaler_admission.py): the others never wait on this webhook, nor fail with it.
        Webhook(
            "autoscalers.validate.tandem.dev",
            (
                {"apiGroups": ["autoscaling"], "apiVersions": ["v2"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["horizontalpodautoscalers"], "scope": "Namespaced"},
                {"apiGroups": ["keda.sh"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["scaledobjects"], "scope": "Namespaced"},
            ),
            (
                {"name": "targets-tandem",
                 "expression": "has(object.spec) && has(object.spec.scaleTargetRef) && has(object.spec.scaleTargetRef.apiVersion) && "
                               "object.spec.scaleTargetRef.apiVersion.startsWith('tandem.dev/')"},
            ),
        ),
    ),
)


def keep_registered(cluster: Cluster, url: str, bundle: Callable[[], str], stop: threading.Event, every: float = 5.0) -> None:
    """The operator's configuration, registered and kept (runtime/webhook_config.py)."""
    webhook_config.keep_registered(cluster, REGISTRATION, url, bundle, stop, log, every)


def register_when_reachable(cluster: Cluster, url: str, ca_bundle: str, stop: threading.Event, first_delay: float = 0.5, most: float = 30.0) -> bool:
    """The operator's configuration, registered once the API server answers (runtime/webhook_config.py)."""
    return webhook_config.register_when_reachable(cluster, REGISTRATION, url, ca_bundle, stop, log, first_delay, most)


def register_webhook(cluster: Cluster, url: str, ca_bundle: str) -> None:
    """Create or update the ValidatingWebhookConfiguration that sends tandem's kinds here (and
    ClusterTopology deletes): fail closed, 5 s."""
    webhook_config.register_webhook(cluster, REGISTRATION, url, ca_bundle, log)
