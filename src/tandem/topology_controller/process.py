"""The `tandem topology-controller` process: connect, elect, serve probes, metrics and
(optionally) admission, loop, stop.

Everything here is edge: the wall clock, signals, sockets, the Kubernetes connection. It
shares the operator's process pieces (tandem.runtime) and none of its pass: a cluster can
run this alone, the operator alone, or both. Its Lease and its webhook configuration have
names of their own, so the two never take each other's.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Callable

from tandem.cluster.ports import Cluster
from tandem.kube import kinds
from tandem.runtime.leader import LeaderElector
from tandem.runtime.process import Admission, ProcessConfig, run_process
from tandem.runtime.schedule import PassSchedule
from tandem.runtime.serving import freeze_heap
from tandem.runtime.webhook_config import Registration
from tandem.topology_controller.admission import RULES, review
from tandem.topology_controller.kinds import BACKEND_KINDS
from tandem.topology_controller.reconcile import TopologySettings
from tandem.topology_controller.runner import BATCH_WINDOW_S, TopologyController

log = logging.getLogger("tandem.topology")
LEASE_NAME = "tandem-topology-controller"
WEBHOOK_CONFIG = "tandem-topology-controller"
REGISTRATION = Registration(WEBHOOK_CONFIG, RULES, webhook="topologies.validate.tandem.dev")


@dataclass(frozen=True)
class TopologyControllerConfig(ProcessConfig):
    """The shared flags (runtime/process.py) under names of its own, and the controller's."""

    lease_name: str = LEASE_NAME
    settings: TopologySettings = field(default_factory=TopologySettings)
    batch_window: float = BATCH_WINDOW_S  # seconds from the first change to the pass that sees it (a burst is one pass)


def register_backend_kinds(settings: TopologySettings) -> None:
    """Tell the Kubernetes adapter where the managed backends' kinds live in the REST API."""
    for backend in settings.backends:
        for kind in BACKEND_KINDS[backend]:
            kinds.register(kinds.Kind(kind.kind, kind.api_version, kind.plural, namespaced=kind.namespaced, qualified=kind.qualified))


def run(config: TopologyControllerConfig, connect: Callable[[TopologyControllerConfig, Callable[..., None]], Cluster],
        stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); returns the exit status."""

    def start(cluster: Cluster, clock: Callable[[], float], elector: LeaderElector | None) -> TopologyController:
        schedule = PassSchedule(debounce=config.batch_window, resync=config.resync)
        settings = replace(config.settings, refusal_retry=config.resync)  # a refused write is tried again each resync
        return TopologyController(cluster, clock, settings, elector, schedule, on_synced=lambda: freeze_heap(log))

    return run_process(config, lambda changed: connect(config, changed), start, lambda: Admission(REGISTRATION, review), "topology controller",
                       {"backends": list(config.settings.backends)}, stop, log)
