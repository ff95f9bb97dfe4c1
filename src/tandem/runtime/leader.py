"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does.

Only the leader runs passes (writes). A candidate acquires the Lease when nobody holds
it, when its holder released it, or when the holder has not renewed it for
`leaseDurationSeconds` *as this candidate observed it*: expiry is measured on the
candidate's own clock from the moment it last saw the record change, never by comparing
the holder's `renewTime` with the local clock, so clock skew between replicas cannot
make two leaders. Every write is compare-and-swap on the Lease's resourceVersion (a
create, or a preconditioned merge patch): of two candidates racing, one gets a
Conflict and stays a follower. The leader renews every `renew_every` seconds and gives
up leadership (stops writing) if it could not renew within `renew_deadline`. `release`
(on SIGTERM) clears the holder so a standby takes over at once.

`step(now)` is the whole algorithm, called by the operator's loop with the time; the
clock is passed in, never read here. An attempt the API refused for another reason than
losing a race (a 403 without RBAC for Leases, a 404 for a namespace that does not exist,
the API away) is kept in `failure` until an attempt succeeds, so the operator can say
why it never leads instead of waiting as a standby for ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tandem.api.timestamps import rfc3339
from tandem.cluster.ports import ApiError, Cluster, Conflict, NotFound, Object

LEASE_API = "coordination.k8s.io/v1"


@dataclass(frozen=True)
class LeaseConfig:
    name: str = "tandem-operator"
    namespace: str = "tandem-system"
    identity: str = "tandem"
    duration: float = 15.0  # leaseDurationSeconds
    renew_deadline: float = 10.0  # a leader that could not renew for this long stops writing
    renew_every: float = 2.0  # retryPeriod


@dataclass
class LeaderElector:
    cluster: Cluster
    config: LeaseConfig
    leading: bool = False
    last_renewed: float | None = None  # when we last wrote the Lease as its holder
    # Why the last attempt to read or write the Lease failed (None: it did not, or it lost
    # a race, which is how election works): a standby that only ever fails never leads.
    failure: ApiError | None = None
    _observed: tuple[str, str] | None = None  # (holder, renewTime) as last read
    _observed_at: float = 0.0  # local time the record last changed

    def step(self, now: float) -> bool:
        """Try to acquire or renew; returns whether this process leads now."""
        try:
            lease = self.cluster.snapshot().get("Lease", self.config.namespace, self.config.name)
        except NotFound:
            lease = None
        except ApiError as exc:
            self.failure = exc
            return self._lost_if_stale(now)
        if lease is None:
            return self._write(now, None, transitions=0)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.config.duration)
        mine = holder == self.config.identity
        if mine and self.leading and self.last_renewed is not None and now - self.last_renewed < self.config.renew_every:
            return True
        expired = now - self._observed_at >= duration
        if not mine and holder and not expired:
            self.leading, self.failure = False, None  # a healthy standby
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        return self._write(now, lease, transitions)

    def holds(self, now: float) -> bool:
        """Whether this process may write as the leader at `now`, read without touching the
        Lease: it leads and renewed within the renew deadline (a loop in another thread asks
        this; only the loop that steps the elector writes the Lease)."""
        return self.leading and self.last_renewed is not None and now - self.last_renewed < self.config.renew_deadline

    def release(self, now: float) -> None:
        """Give the Lease up (SIGTERM): a standby need not wait for it to expire."""
        if not self.leading:
            return
        self.leading = False
        try:
            lease = self.cluster.snapshot().get("Lease", self.config.namespace, self.config.name)
            if (lease.get("spec") or {}).get("holderIdentity") != self.config.identity:
                return
            self.cluster.patch(
                "Lease",
                self.config.namespace,
                self.config.name,
                {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": rfc3339(now)}},
                resource_version=lease["metadata"].get("resourceVersion"),
            )
        except ApiError:
            pass  # it expires on its own

    def _write(self, now: float, lease: Object | None, transitions: int) -> bool:
        stamp = rfc3339(now)
        spec: dict[str, Any] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.duration),
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        if holder != self.config.identity:
            spec["acquireTime"] = stamp
        try:
            if lease is None:
                self.cluster.create(
                    {"apiVersion": LEASE_API, "kind": "Lease", "metadata": {"name": self.config.name, "namespace": self.config.namespace}, "spec": spec}
                )
            else:
                self.cluster.patch(
                    "Lease", self.config.namespace, self.config.name, {"spec": spec}, resource_version=lease["metadata"].get("resourceVersion")
                )
        except Conflict:
            self.failure = None  # someone else wrote first: a race lost, not a failure
            return self._lost_if_stale(now)
        except ApiError as exc:
            self.failure = exc  # refused (403, 404: no namespace), or the API is away
            return self._lost_if_stale(now)
        self.leading, self.last_renewed, self.failure = True, now, None
        self._observed, self._observed_at = (self.config.identity, stamp), now
        return True

    def _lost_if_stale(self, now: float) -> bool:
        """A leader that cannot renew keeps leading only until its renew deadline."""
        if self.leading and self.last_renewed is not None and now - self.last_renewed < self.config.renew_deadline:
            return True
        self.leading = False
        return False
