"""Lease leader election: one writer, takeover after the lease duration as each candidate
observes it (not as the clocks say), immediate takeover on release."""

from __future__ import annotations

from tandem.cluster.memory import MemoryStore
from tandem.cluster.ports import Conflict
from tandem.runtime.leader import LeaderElector, LeaseConfig


def elector(store, identity, **kw):
    return LeaderElector(store, LeaseConfig(identity=identity, namespace="tandem-system", **kw))


def lease(store):
    return store.get("Lease", "tandem-system", "tandem-operator")


def test_the_first_candidate_acquires_an_absent_lease():
    store = MemoryStore()
    a = elector(store, "a")
    assert a.step(100.0)
    spec = lease(store)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] == "1970-01-01T00:01:40Z"


def test_a_standby_takes_over_only_after_the_lease_duration_it_observed():
    store = MemoryStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(0.0)
    for t in (0.5, 2.5, 4.5, 6.5):
        assert a.step(t) and not b.step(t), "one leader while a renews"
    # a dies at 6.5 (its last renewal was at 6.0); b last saw the record change at 6.5
    assert not b.step(20.0), "15 s have not passed since b saw the last renewal"
    assert b.step(21.5)
    spec = lease(store)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_clock_skew_between_replicas_cannot_make_two_leaders():
    store = MemoryStore()
    a, b = elector(store, "a"), elector(store, "b")
    skew = 3600.0  # b's clock runs an hour ahead: a's renewTime looks ancient to it
    assert a.step(0.0)
    assert not b.step(0.0 + skew)
    for t in (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0):
        assert a.step(t)
        assert not b.step(t + skew), "b measures expiry on its own clock from the last change it saw"


def test_release_hands_over_at_once():
    store = MemoryStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(0.0) and not b.step(1.0)
    a.release(2.0)
    assert not a.leading and "holderIdentity" not in lease(store)["spec"]
    assert b.step(2.5)


def test_racing_candidates_compare_and_swap_so_one_wins():
    store = MemoryStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(0.0)
    stale = store.snapshot()  # both read the lease at this version
    a.step(3.0)  # a renews: the version moves
    b.cluster = _Stale(store, stale)
    b._observed_at = -100.0  # as if b had seen no change for long
    b._observed = ("a", lease(store)["spec"]["renewTime"])
    assert not b.step(30.0), "b's write is preconditioned on a version that is gone"


def test_a_leader_that_cannot_renew_stops_leading_after_its_deadline():
    store = MemoryStore()
    a = elector(store, "a")
    assert a.step(0.0)
    a.cluster = _Failing(store)
    assert a.step(5.0), "within renewDeadline (10 s) it still leads"
    assert not a.step(10.5)


class _Stale:
    def __init__(self, store, snapshot):
        self.store, self._snapshot = store, snapshot

    def snapshot(self):
        return self._snapshot

    def __getattr__(self, name):
        return getattr(self.store, name)


class _Failing:
    def __init__(self, store):
        self.store = store

    def snapshot(self):
        return self.store.snapshot()

    def served(self, kinds):
        return self.store.served(kinds)

    def create(self, obj):
        raise Conflict("injected")

    def patch(self, *args, **kwargs):
        raise Conflict("injected")


class _Refusing(MemoryStore):
    """A store that refuses to create Leases (no RBAC, or a namespace that does not exist)."""

    def __init__(self, error):
        super().__init__()
        self.error = error

    def create(self, obj):
        if obj.get("kind") == "Lease" and self.error is not None:
            raise self.error
        return super().create(obj)


def test_a_refused_lease_is_kept_as_the_failure_and_cleared_once_it_can_lead():
    from tandem.errors import Forbidden

    store = _Refusing(Forbidden('leases.coordination.k8s.io is forbidden: cannot create resource "leases"'))
    a = elector(store, "a")
    assert not a.step(0.0) and isinstance(a.failure, Forbidden), "never leading, and saying why"
    store.error = None
    assert a.step(2.0) and a.failure is None


def test_losing_a_race_or_standing_by_is_no_failure():
    store = MemoryStore()
    a, b = elector(store, "a"), elector(store, "b")
    assert a.step(0.0)
    assert not b.step(0.5) and b.failure is None, "a healthy standby"
