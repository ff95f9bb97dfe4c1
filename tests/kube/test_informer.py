"""Informers against the fake API: list then watch, pages, bookmarks, resuming a watch that
ended, re-listing after 410 Gone (in the stream or as the answer), resync, back-off,
lag, and a stop that does not wait for a quiet watch."""

from __future__ import annotations

import json
import time
from typing import Callable

import pytest

from tandem.kube.informer import Informer, change_time
from tandem.kube.kinds import kind_of

NS = "serving"
FAST = {"backoff": (0.01, 0.05), "read_grace": 2.0}


def wait_until(predicate: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


def names(informer):
    with informer.lock:
        return sorted(name for _, name in informer.items)


@pytest.fixture
def start(api_rest):
    informers = []

    def make(kind="ConfigMap", **options):
        informer = Informer(api_rest, kind_of(kind), **{**FAST, **options}).start()
        informers.append(informer)
        assert informer.wait_synced(5)
        return informer

    yield make
    for informer in informers:
        informer.stop()


def test_list_then_watch_fills_the_cache_and_reports_each_change(api, start):
    api.write(api.store.create, cm("a", v="1"))
    api.write(api.store.create, cm("b"))
    seen = []
    informer = start(on_change=lambda kind, type_, obj: seen.append((kind, type_, obj["metadata"]["name"])))
    assert names(informer) == ["a", "b"]
    with informer.lock:
        cached = informer.items[(NS, "a")]
    assert cached["apiVersion"] == "v1" and cached["kind"] == "ConfigMap", "list items come without them; the cache has them"
    listed_at = api.store.resource_version
    api.write(api.store.create, cm("c"))
    api.write(api.store.patch, "ConfigMap", NS, "a", {"data": {"v": "2"}})
    api.write(api.store.delete, "ConfigMap", NS, "b")
    wait_until(lambda: names(informer) == ["a", "c"] and informer.items[(NS, "a")]["data"] == {"v": "2"}, what="the watch")
    assert seen == [("ConfigMap", "ADDED", "a"), ("ConfigMap", "ADDED", "b"), ("ConfigMap", "ADDED", "c"),
                    ("ConfigMap", "MODIFIED", "a"), ("ConfigMap", "DELETED", "b")]
    assert informer.lists == 1
    watch = [r for r in api.seen("GET", "/configmaps") if r.params.get("watch") == "true"][0]
    assert watch.params["allowWatchBookmarks"] == "true" and watch.params["resourceVersion"] == listed_at
    assert int(watch.params["timeoutSeconds"]) <= 300
    assert informer.resource_version == api.store.resource_version


def test_lists_are_paged(api, start):
    for i in range(5):
        api.write(api.store.create, cm(f"c{i}"))
    informer = start(page_size=2)
    assert names(informer) == [f"c{i}" for i in range(5)]
    lists = [r for r in api.seen("GET", "/configmaps") if "watch" not in r.params]
    assert [r.params.get("limit") for r in lists] == ["2", "2", "2"] and "continue" in lists[1].params


def test_bookmarks_move_the_version_on_and_count_as_heard(api, start):
    clock = {"now": 100.0}
    informer = start(clock=lambda: clock["now"])
    for i in range(3):  # other kinds move the server's version on; this watch hears nothing
        api.write(api.store.create, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": NS}})
    clock["now"] += 12.0
    assert informer.silent_for() == 12.0
    # bookmark() reaches the watches open now: ask until the informer's has heard one
    wait_until(lambda: api.bookmark() or informer.resource_version == api.store.resource_version, what="a bookmark")
    assert informer.silent_for() == 0.0 and names(informer) == []


def test_disconnected_stays_zero_while_a_quiet_watch_is_open_and_grows_while_none_is(api, start):
    """The lag figure does not grow in a quiet cluster (the time since the last word does)."""
    clock = {"now": 100.0}
    informer = start(clock=lambda: clock["now"])
    def watches() -> int:
        return sum(1 for r in api.seen("GET", "/configmaps") if r.params.get("watch"))

    wait_until(lambda: watches() > 0, what="the watch")
    for _ in range(5):  # a busy machine may see the watch end and reopen within the jump: look again
        wait_until(lambda: informer.disconnected() == 0.0, what="the watch open")
        opened, heard = watches(), informer.silent_for()
        clock["now"] += 600.0
        if watches() == opened and informer.disconnected() == 0.0:
            break
    assert informer.disconnected() == 0.0 and informer.silent_for() == heard + 600.0, "quiet is not behind"
    api.fail("GET", "/configmaps", 503, "ServiceUnavailable", times=10_000, watch=True)
    api.end_watches()
    wait_until(lambda: informer.disconnected() > 0.0 or clock.update(now=clock["now"] + 1.0), what="the watch lost")
    clock["now"] += 30.0
    assert informer.disconnected() >= 30.0
    api.faults.clear()
    wait_until(lambda: informer.disconnected() == 0.0, what="the watch back")


def test_each_event_with_a_server_time_reports_its_delivery_delay(api, start):
    delays = []
    informer = start(on_delay=lambda kind, seconds: delays.append((kind, seconds)), wall=lambda: time.time() + 2.0)
    api.write(api.store.create, cm("a"))
    wait_until(lambda: delays, what="the ADDED event's delay")
    [(kind, seconds)] = delays
    assert kind == "ConfigMap" and 2.0 <= seconds < 3.0, "created now, heard (on a clock 2 s ahead) 2 s later"
    api.write(api.store.patch, "ConfigMap", NS, "a", {"data": {"v": "2"}})
    wait_until(lambda: informer.items[(NS, "a")].get("data") == {"v": "2"}, what="the MODIFIED event")
    assert len(delays) == 1, "a change the object carries no time of is not guessed at"


def test_the_time_of_a_change_is_the_newest_server_stamp_on_the_object():
    meta = {"creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "time": "2026-01-01T00:01:00Z"}, {"manager": "tandem", "time": "2026-01-01T00:02:00Z"}]}
    assert change_time("MODIFIED", {"metadata": meta}) == change_time("ADDED", {"metadata": {"creationTimestamp": "2026-01-01T00:02:00Z"}})
    assert change_time("ADDED", {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}) == 1767225600.0
    assert change_time("MODIFIED", {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}) is None
    assert change_time("ADDED", {"metadata": {"creationTimestamp": "yesterday"}}) is None


def test_a_watch_that_ends_is_resumed_from_the_last_version_without_listing(api, start):
    informer = start()
    for i in range(3):
        api.write(api.store.create, cm(f"c{i}"))
        wait_until(lambda: len(names(informer)) == i + 1, what="the event")
        version = informer.resource_version
        api.end_watches()
        wait_until(lambda: any(r.params.get("resourceVersion") == version for r in api.seen("GET", "/configmaps") if r.params.get("watch")),
                   what="a new watch from the last version")
    assert informer.lists == 1 and names(informer) == ["c0", "c1", "c2"]


@pytest.mark.parametrize("gone_as_status", [False, True], ids=["error-event", "http-410"])
def test_a_410_lists_again_and_catches_up_with_what_the_watch_missed(api, start, gone_as_status):
    api.gone_as_status = gone_as_status
    api.write(api.store.create, cm("stays"))
    api.write(api.store.create, cm("goes"))
    seen = []
    informer = start(on_change=lambda kind, type_, obj: seen.append((type_, obj["metadata"]["name"])))
    api.fail("GET", "/configmaps", 503, "ServiceUnavailable", times=10_000, watch=True)  # the watch cannot come back ...
    api.end_watches()
    wait_until(lambda: len(api.seen("GET", "/configmaps")) > 3, what="failing watches")
    api.write(api.store.delete, "ConfigMap", NS, "goes")  # ... while the world moves on
    api.write(api.store.create, cm("new"))
    api.compact()  # and the server forgets the history in between
    api.faults.clear()
    wait_until(lambda: informer.lists == 2, what="a re-list")
    wait_until(lambda: names(informer) == ["new", "stays"], what="the re-listed cache")
    assert ("DELETED", "goes") in seen and ("ADDED", "new") in seen, "a re-list reports what it found different"


def test_resync_lists_again_every_so_often(api, start):
    api.write(api.store.create, cm("a"))
    informer = start(resync=1.0)
    wait_until(lambda: informer.lists >= 2, timeout=4.0, what="a resync")
    watches = [r for r in api.seen("GET", "/configmaps") if r.params.get("watch")]
    assert all(int(r.params["timeoutSeconds"]) <= 1 for r in watches), "a watch never outlives the next resync"
    assert names(informer) == ["a"]


def test_a_failing_list_backs_off_as_long_as_the_server_asks(api, api_rest):
    api.fail("GET", "/configmaps", 429, "TooManyRequests", headers={"Retry-After": "1"}, watch=False)
    informer = Informer(api_rest, kind_of("ConfigMap"), **FAST).start()
    try:
        assert not informer.wait_synced(0.6), "Retry-After: 1 is honoured, not the 10 ms back-off"
        assert informer.wait_synced(3)
        assert informer.silent_for() < 1.0
    finally:
        informer.stop()


def test_a_kind_the_server_does_not_serve_is_said_so_in_the_warning(api, api_rest, caplog):
    """A 404 on the list (a CRD not installed: --provisioning without cluster-autoscaler's)
    names the likely cause, not only the code; the informer keeps trying."""
    api.fail("GET", "/configmaps", 404, "NotFound", times=2, watch=False)
    informer = Informer(api_rest, kind_of("ConfigMap"), **FAST).start()
    try:
        with caplog.at_level("WARNING", logger="tandem.kube"):
            assert informer.wait_synced(3), "served again: it lists and syncs"
        said = [r.getMessage() for r in caplog.records if "ConfigMap" in r.getMessage()]
        assert said and all("is its CRD installed?" in line for line in said), said
    finally:
        informer.stop()


def test_stop_ends_a_quiet_watch_at_once(api, start):
    informer = start(watch_timeout=300.0)
    wait_until(lambda: any(r.params.get("watch") for r in api.seen("GET", "/configmaps")), what="the watch")
    time.sleep(0.05)
    began = time.monotonic()
    informer.stop()
    assert time.monotonic() - began < 1.0 and not informer.alive


def test_pods_are_cached_trimmed(api, start):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "labels": {"tandem.dev/group": "g"},
                     "managedFields": [{"manager": "kubectl"}], "annotations": {"tandem.dev/admitted": "true"}},
        "spec": {"containers": [{"name": "engine", "image": "vllm", "env": [{"name": "X", "value": "1"}],
                                 "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}],
                 "volumes": [{"name": "v", "emptyDir": {}}], "schedulingGates": [{"name": "tandem.dev/placement"}]},
    }
    api.write(api.store.create, pod)
    informer = start("Pod")
    with informer.lock:
        cached = informer.items[(NS, "p")]
    assert cached["spec"] == {"containers": [{"name": "engine", "image": "vllm",
                                              "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}],
                              "schedulingGates": [{"name": "tandem.dev/placement"}]}
    assert "managedFields" not in cached["metadata"] and cached["metadata"]["annotations"] == {"tandem.dev/admitted": "true"}
    assert cached["metadata"]["uid"] and cached["metadata"]["resourceVersion"]


def _event(informer, type_, name, version, **meta):
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "resourceVersion": version, **meta}}
    assert informer._event(json.dumps({"type": type_, "object": obj}).encode())


def _versions(informer):
    with informer.lock:
        return {name: o["metadata"]["resourceVersion"] for (_, name), o in informer.items.items()}


@pytest.fixture
def offline(api_rest):
    """An informer fed by hand, as the watch would feed it, with the changes it reports."""
    seen = []
    informer = Informer(api_rest, kind_of("Pod"), on_change=lambda kind, type_, obj: seen.append((type_, obj["metadata"]["name"])))
    informer.resource_version = "10"
    return informer, seen


def test_own_writes_are_read_back_at_once_and_their_echo_still_reports_a_change(offline):
    informer, seen = offline
    informer.wrote({"metadata": {"name": "a", "namespace": NS, "resourceVersion": "11"}})
    assert _versions(informer) == {"a": "11"} and seen == [], "read at once; the pass that wrote knows already"
    _event(informer, "ADDED", "a", "11")
    assert seen == [("ADDED", "a")], "the echo makes the next pass run"
    _event(informer, "MODIFIED", "a", "12")
    informer.wrote({"metadata": {"name": "a", "namespace": NS, "resourceVersion": "12"}})
    assert _versions(informer) == {"a": "12"}
    informer.wrote({"metadata": {"name": "b", "namespace": NS, "resourceVersion": "14"}})
    _event(informer, "MODIFIED", "b", "13")
    assert _versions(informer)["b"] == "14", "an event older than our write does not undo it"


def test_an_answer_the_watch_has_passed_already_is_not_cached_again(offline):
    informer, _ = offline
    _event(informer, "ADDED", "a", "11")
    _event(informer, "DELETED", "a", "12")
    informer.wrote({"metadata": {"name": "a", "namespace": NS, "resourceVersion": "11"}})
    assert _versions(informer) == {}, "the answer to a write the watch has already seen deleted"


def test_own_deletes_leave_at_once_and_late_modifications_do_not_bring_them_back(offline):
    informer, seen = offline
    _event(informer, "ADDED", "a", "11")
    _event(informer, "ADDED", "b", "12")
    informer.deleted(NS, "a")
    assert _versions(informer) == {"b": "12"}
    _event(informer, "MODIFIED", "a", "13")  # a status update made before our delete reached the server
    assert _versions(informer) == {"b": "12"}
    _event(informer, "MODIFIED", "a", "14", deletionTimestamp="2026-11-25T00:00:00Z")
    assert _versions(informer)["a"] == "14", "held by a finalizer: shown terminating"
    _event(informer, "DELETED", "a", "15")
    _event(informer, "ADDED", "a", "16")
    assert _versions(informer) == {"a": "16", "b": "12"}, "created again"
    informer.deleted(NS, "b")
    _event(informer, "ADDED", "b", "17")
    assert _versions(informer)["b"] == "17", "a newer ADDED after our delete: created again by someone"


VOLCANO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced", "names": {"kind": "PodGroup", "plural": "podgroups"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True}]},
}
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def test_an_optional_kind_not_served_is_synced_and_empty_says_so_once_and_looks_again(api, api_rest, caplog):
    caplog.set_level("INFO", logger="tandem.kube")
    seen = []
    informer = Informer(api_rest, kind_of("PodGroup.scheduling.volcano.sh"), optional=True, recheck=0.01,
                        on_change=lambda kind, type_, obj: seen.append((type_, obj["metadata"]["name"])), **FAST).start()
    try:
        assert informer.wait_synced(5), "a kind whose CRD is missing does not hold the start back"
        wait_until(lambda: len(api.seen("GET", "/podgroups")) >= 5, what="several looks")
        assert informer.serving is False and names(informer) == []
        said = [r.getMessage() for r in caplog.records if r.name == "tandem.kube"]
        assert len(said) == 1 and "does not serve" in said[0], said

        api_rest.request("POST", CRDS, body=VOLCANO_CRD)
        wait_until(lambda: informer.serving, what="served once its CRD is there")
        group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": NS}}
        api_rest.request("POST", "/apis/scheduling.volcano.sh/v1beta1/namespaces/serving/podgroups", body=group)
        wait_until(lambda: names(informer) == ["g"], what="its object")

        api_rest.request("DELETE", f"{CRDS}/podgroups.scheduling.volcano.sh")
        api.end_watches()  # the watch ends; watching again answers 404: list again, and that says unserved
        wait_until(lambda: informer.serving is False, what="unserved once its CRD is gone")
        assert names(informer) == [] and ("DELETED", "g") in seen
        assert informer.has_synced()
    finally:
        informer.stop()
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tandem.kube"]
    assert [level for level, _ in said] == ["INFO", "INFO", "WARNING"], said


def test_a_required_kind_not_served_is_never_synced(api_rest):
    informer = Informer(api_rest, kind_of("PodGroup.scheduling.volcano.sh"), **FAST).start()
    try:
        assert not informer.wait_synced(0.3), "a kind the process cannot do without holds the start back"
        assert informer.serving is None
    finally:
        informer.stop()


def test_an_informer_stopped_while_its_list_is_out_does_nothing_with_the_answer(caplog):
    """A 404 that comes back after `stop` (the list was sent before) is not the kind going
    unserved: no log line from a stopped informer (a test's log stream may be closed by
    then), no cache replaced."""
    import httpx2

    from tandem.errors import NotFound
    from tandem.kube.rest import Rest

    class StoppedWhileListing(Rest):
        informer: Informer

        def request(self, method, path, **kwargs):  # type: ignore[no-untyped-def,override]
            self.informer.signal_stop()
            raise NotFound("the server could not find the requested resource")

    caplog.set_level("INFO", logger="tandem.kube")
    rest = StoppedWhileListing(httpx2.Client(base_url="http://127.0.0.1:9"))
    informer = Informer(rest, kind_of("PodGroup.scheduling.volcano.sh"), optional=True, **FAST)
    rest.informer = informer
    informer._run()  # returns: stopped
    assert not informer.has_synced(), "the answer was not taken as the kind's state"
    assert [r.getMessage() for r in caplog.records if r.name == "tandem.kube"] == []
