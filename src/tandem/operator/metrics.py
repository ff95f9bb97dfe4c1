"""The operator's Prometheus metrics, in a registry of its own (no process-global state).

| metric | type | labels |
|---|---|---|
| tandem_pass_duration_seconds | histogram | |
| tandem_writes_total | counter | verb, kind |
| tandem_write_errors_total | counter | kind, code, retryable |
| tandem_conflicts_total | counter | kind |
| tandem_units | gauge | state (Stalled, Unschedulable, Pending, Progressing, Complete) |
| tandem_gated_pods_waiting | gauge | |
| tandem_placement_decision_seconds | histogram | |
| tandem_leader | gauge | (1 when this process leads) |
| tandem_leader_election_errors_total | counter | code (each election attempt the API refused, or could not answer) |
| tandem_informer_event_delay_seconds | histogram | kind (informer_metrics.py) |
| tandem_informer_disconnected_seconds | gauge | kind (informer_metrics.py) |
| tandem_last_successful_pass_timestamp_seconds | gauge | (when the last pass ran to its end, Unix seconds) |
| tandem_group_units | gauge | namespace, group, kind (desired, existing, functional, unschedulable) |
| tandem_group_role_replicas | gauge | namespace, group, role, kind (desired, scheduled, ready, updated) |
| tandem_group_condition | gauge | namespace, group, condition (1 when True) |
| tandem_group_unit_states | gauge | namespace, group, state (Stalled, Unschedulable, Pending, Progressing, Complete: units in it) |
| tandem_group_unit_operations | gauge | namespace, group, operation (Rollout, Scaling, Update, Idle: units doing it) |
| tandem_autoscaler_* | | the autoscaler loop's (autoscaler_metrics.py) |
| tandem_webhook_requests_total | counter | verdict (allowed, denied, malformed, error) |
| tandem_webhook_review_seconds | histogram | |
| process_*, python_* | | the standard process, platform and garbage-collector collectors |

The group series are set from each group's status after every pass and dropped with
the group, so an alert can say which group is short (`tandem_group_units{kind="functional"}
< tandem_group_units{kind="desired"}`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Hashable

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import generate_latest

from tandem.api.group_status import UNIT_STATES
from tandem.api.naming import GATE, GROUP_LABEL
from tandem.api.naming import ADMITTED
from tandem.cluster.ports import NotFound, Reader
from tandem.controller import PassReport
from tandem.operator.autoscaler_metrics import AutoscalerMetrics

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pass_duration = Histogram("tandem_pass_duration_seconds", "Duration of one reconcile pass.", buckets=_LATENCY_BUCKETS, registry=r)
        self.writes = PromCounter("tandem_writes", "Successful writes to the API, by verb and kind.", ["verb", "kind"], registry=r)
        self.write_errors = PromCounter("tandem_write_errors", "Failed writes, by kind, HTTP code and retryability.", ["kind", "code", "retryable"], registry=r)
        self.conflicts = PromCounter("tandem_conflicts", "Writes refused with 409, by kind.", ["kind"], registry=r)
        self.units = Gauge("tandem_units", "Units by coordination state.", ["state"], registry=r)
        self.gated = Gauge("tandem_gated_pods_waiting", "Admitted pods still behind tandem's scheduling gate.", registry=r)
        self.placement = Histogram(
            "tandem_placement_decision_seconds", "Time the placement engine took per pass that placed.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.leader = Gauge("tandem_leader", "1 when this process holds the Lease.", registry=r)
        self.election_errors = PromCounter(
            "tandem_leader_election_errors", "Leader-election attempts the API refused or could not answer, by HTTP code.", ["code"], registry=r
        )
        self.last_pass = Gauge("tandem_last_successful_pass_timestamp_seconds", "When the last reconcile pass ran to its end (Unix seconds).", registry=r)
        self.group_units = Gauge("tandem_group_units", "A group's units: desired (spec), existing, functional and unschedulable (status).",
                                 ["namespace", "group", "kind"], registry=r)
        self.role_replicas = Gauge("tandem_group_role_replicas", "A role's replicas over all units: desired, scheduled, ready, updated.",
                                   ["namespace", "group", "role", "kind"], registry=r)
        self.conditions = Gauge("tandem_group_condition", "1 when the group's condition is True, else 0.", ["namespace", "group", "condition"], registry=r)
        self.group_backend = Gauge("tandem_group_backend", "1 for the scheduler that places the group (spec.scheduler.backend).",
                                   ["namespace", "group", "backend"], registry=r)
        self.backend_served = Gauge("tandem_backend_served", "Per backend of --backends: 1 when the API server serves every kind it needs.",
                                    ["backend"], registry=r)
        self.unit_states, self.unit_operations = rollout_gauges(r)
        self._group_versions: dict[tuple[str, str], str | None] = {}  # the resourceVersion each group's series were set from
        self._group_series: dict[tuple[str, str], set[tuple[Gauge, tuple[str, ...]]]] = {}
        # What the cluster gauges were counted from, kept up to date from the reader's changes:
        # each group's units by state and their sum, the admitted pods at tandem's gate, and
        # the reader's cursor (for `observe_cluster`, and apart for `observe_groups`).
        self._unit_states: dict[tuple[str, str], Counter[str]] = {}
        self._units_total: Counter[str] = Counter({state: 0 for state in UNIT_STATES})
        self._waiting: set[tuple[str, str]] = set()
        self._cluster_cursor: Hashable | None = None
        self._groups_cursor: Hashable | None = None
        self.autoscaler = AutoscalerMetrics(r)
        self.webhook_requests = PromCounter("tandem_webhook_requests", "Admission reviews answered, by verdict.", ["verdict"], registry=r)
        self.webhook_seconds = Histogram("tandem_webhook_review_seconds", "Time to review one AdmissionReview.", buckets=_LATENCY_BUCKETS, registry=r)
        # The process's CPU, memory and file descriptors, the interpreter, and its garbage
        # collector, as every Python exporter has them (collectors bound to this registry).
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            r.register(collector)

    def observe_pass(self, report: PassReport, seconds: float) -> None:
        self.pass_duration.observe(seconds)
        for (verb, kind), count in report.by_kind.items():
            self.writes.labels(verb=verb, kind=kind).inc(count)
        for error in report.errors:
            kind = error.action.split(" ")[-2] if " " in error.action else "?"
            self.write_errors.labels(kind=kind, code=str(error.code), retryable=str(error.retryable).lower()).inc()
            if error.code == 409:
                self.conflicts.labels(kind=kind).inc()

    def observe_cluster(self, reader: Reader) -> None:
        """Units by state and gated pods, from what the pass will see next. Only the groups
        and pods that changed since the last call are read again when the reader can say
        which (`changes_since`: 262,000 pods listed after every pass cost the operator about
        a second a pass at 65,536 nodes); everything otherwise."""
        cursor, changed = _changes(reader, self._cluster_cursor)
        if changed is None:
            self._unit_states, self._waiting = {}, set()
            # every state counted before stays, at 0 unless counted again (its gauge is set below)
            self._units_total = Counter({state: 0 for state in (*UNIT_STATES, *self._units_total)})
            for group in reader.list("InferenceGroup"):
                self._count_units(_group_key(group), group)
            self._waiting = {_pod_key(pod) for pod in reader.list("Pod", labels=GROUP_LABEL) if _waits_at_gate(pod)}
        else:
            for kind, namespace, name in changed:
                if kind == "InferenceGroup":
                    self._count_units((namespace, name), _read(reader, kind, namespace, name))
                elif kind == "Pod":
                    pod = _read(reader, kind, namespace, name)
                    waits = pod is not None and GROUP_LABEL in (pod["metadata"].get("labels") or {}) and _waits_at_gate(pod)
                    (self._waiting.add if waits else self._waiting.discard)((namespace, name))
        self._cluster_cursor = cursor
        for state, count in self._units_total.items():
            self.units.labels(state=state).set(count)
        self.gated.set(len(self._waiting))

    def _count_units(self, key: tuple[str, str], group: dict[str, Any] | None) -> None:
        """The group's units by state into the totals, in place of what it counted before."""
        self._units_total.subtract(self._unit_states.pop(key, Counter()))
        if group is None:
            return
        status = group.get("status") or {}
        states: Counter[str] = Counter()
        if "unitStates" in status:  # every unit, listed in `units` or not
            states.update({str(k): int(v) for k, v in status["unitStates"].items()})
        else:
            for unit in status.get("units") or []:
                states[str(unit.get("state"))] += 1
        self._unit_states[key] = states
        self._units_total.update(states)

    def observe_backends(self, served: dict[str, bool]) -> None:
        """Whether each enabled backend is live (its kinds served), as the last pass found it."""
        for backend, live in served.items():
            self.backend_served.labels(backend=backend).set(1 if live else 0)

    def observe_groups(self, reader: Reader) -> None:
        """Per group, units and per-role replicas wanted and had, and its conditions, from
        what the pass wrote. Only a group whose object changed is read again: the groups
        the reader says changed (`changes_since`), or, when it cannot say, every group
        whose resourceVersion moved; a group that is gone, or a series a group no longer
        has (a role removed), loses its series."""
        cursor, changed = _changes(reader, self._groups_cursor)
        self._groups_cursor = cursor
        if changed is not None:
            for kind, namespace, name in changed:
                if kind == "InferenceGroup":
                    self._group_series_from((namespace, name), _read(reader, kind, namespace, name))
            return
        present: set[tuple[str, str]] = set()
        for group in reader.list("InferenceGroup"):
            key = _group_key(group)
            present.add(key)
            self._group_series_from(key, group)
        for key in [k for k in self._group_versions if k not in present]:
            self._group_series_from(key, None)

    def _group_series_from(self, key: tuple[str, str], group: dict[str, Any] | None) -> None:
        """Set the group's series from this version of it (None: it is gone), unless they were set from it already."""
        if group is None:
            if key in self._group_versions:
                del self._group_versions[key]
                self._drop_series(key, [])
            return
        version = group["metadata"].get("resourceVersion")
        if version is not None and self._group_versions.get(key) == version:
            return
        self._group_versions[key] = version
        self._drop_series(key, self._series_of(key, group))

    def _series_of(self, key: tuple[str, str], group: dict[str, Any]) -> list[tuple[Gauge, tuple[str, ...]]]:
        """Set the group's series; the (gauge, labels) of each one set."""
        namespace, name = key
        spec, status = group.get("spec") or {}, group.get("status") or {}
        values: list[tuple[Gauge, tuple[str, ...], float]] = []
        units = int(spec.get("replicas", 1))
        unschedulable = (status.get("unitStates") or {}).get("Unschedulable", 0)
        for kind, value in (("desired", units), ("existing", status.get("replicas", 0)), ("functional", status.get("functionalUnits", 0)),
                            ("unschedulable", unschedulable)):
            values.append((self.group_units, (namespace, name, kind), value))
        seen = {r.get("name"): r for r in status.get("roles") or []}
        for role in spec.get("roles") or []:
            had = seen.get(role.get("name"), {})
            for kind, value in (("desired", int(role.get("replicas", 1)) * units), ("scheduled", had.get("scheduledReplicas", 0)),
                                ("ready", had.get("readyReplicas", 0)), ("updated", had.get("updatedReplicas", 0))):
                values.append((self.role_replicas, (namespace, name, role.get("name", ""), kind), value))
        for condition in status.get("conditions") or []:
            values.append((self.conditions, (namespace, name, condition.get("type", "")), 1 if condition.get("status") == "True" else 0))
        scheduler = spec.get("scheduler")
        backend = scheduler.get("backend") if isinstance(scheduler, dict) else None
        values.append((self.group_backend, (namespace, name, str(backend or "native")), 1))
        values += rollout_series(self.unit_states, self.unit_operations, namespace, name, status)
        for gauge, labels, value in values:
            gauge.labels(*labels).set(value)
        return [(gauge, labels) for gauge, labels, _ in values]

    def _drop_series(self, key: tuple[str, str], kept: list[tuple[Gauge, tuple[str, ...]]]) -> None:
        """Remove the group's series it did not just set."""
        now = set(kept)
        for series in self._group_series.pop(key, set()) - now:
            series[0].remove(*series[1])
        if now:
            self._group_series[key] = now

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _changes(reader: Reader, cursor: Hashable | None) -> tuple[Hashable | None, set[tuple[str, str, str]] | None]:
    """The reader's cursor and the keys changed since `cursor` (None: not known, read everything)."""
    feed = getattr(reader, "changes_since", None)
    if feed is None or cursor is None:
        return (None, None) if feed is None else (feed(None)[0], None)
    next_cursor, keys = feed(cursor)
    return next_cursor, keys


def _read(reader: Reader, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return reader.get(kind, namespace or None, name)
    except NotFound:
        return None


def _group_key(group: dict[str, Any]) -> tuple[str, str]:
    meta = group["metadata"]
    return (meta.get("namespace", "default"), meta["name"])


def _pod_key(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def _waits_at_gate(pod: dict[str, Any]) -> bool:
    """Admitted, and still behind tandem's scheduling gate."""
    gated = any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates", []))
    return gated and (pod["metadata"].get("annotations") or {}).get(ADMITTED) == "true"


# ----------------------------------------------------------------------------- rollout state

STATES = UNIT_STATES  # always exported, 0 when no unit is in it
OPERATIONS = ("Idle", "Rollout", "Scaling", "Update")


def rollout_gauges(registry: CollectorRegistry) -> tuple[Gauge, Gauge]:
    """Where each group's rollout stands: its units by state, and by what coordination is
    doing with them (`Update` > 0: a rolling update under way)."""
    states = Gauge("tandem_group_unit_states", "A group's units by state (status.units[].state).", ["namespace", "group", "state"], registry=registry)
    operations = Gauge("tandem_group_unit_operations", "A group's units by what coordination is doing: Rollout, Scaling, Update, Idle.",
                       ["namespace", "group", "operation"], registry=registry)
    return states, operations


def rollout_series(states: Gauge, operations: Gauge, namespace: str, name: str, status: dict[str, Any]) -> list[tuple[Gauge, tuple[str, ...], float]]:
    """The group's rollout series, from its status's units."""
    by_state: Counter[str] = Counter({state: 0 for state in STATES})
    by_operation: Counter[str] = Counter({operation: 0 for operation in OPERATIONS})
    listed = status.get("units") or []
    for unit in listed:
        by_state[str(unit.get("state"))] += 1
        by_operation[str((unit.get("coordination") or {}).get("mode") or "Idle")] += 1
    counted = status.get("unitStates")
    if counted:  # every unit, listed or not: an unlisted one is Complete and Idle (group_status.list_units)
        by_state = Counter({state: int(counted.get(state, 0)) for state in STATES})
        by_operation["Idle"] += max(sum(int(v) for v in counted.values()) - len(listed), 0)
    out: list[tuple[Gauge, tuple[str, ...], float]] = [(states, (namespace, name, s), float(n)) for s, n in sorted(by_state.items())]
    out += [(operations, (namespace, name, o), float(n)) for o, n in sorted(by_operation.items())]
    return out
