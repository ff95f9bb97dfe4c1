"""Watches: initial events, from a resourceVersion, selectors, bookmarks, time-outs, 410."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from apiserver.helpers import NS, Client, pod
from tandem.apiserver.server import ApiServer

PODS = f"/api/v1/namespaces/{NS}/pods"


def _types(events):
    return [(e["type"], e["object"]["metadata"].get("name")) for e in events]


def test_a_watch_without_a_version_starts_with_what_exists_then_follows_changes(client):
    client.post(PODS, pod("a"))
    events: list = []

    def read() -> None:
        events.extend(client.watch(f"{PODS}?watch=true&timeoutSeconds=1"))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    client.post(PODS, pod("b"))
    client.delete(f"{PODS}/a")
    reader.join(5)
    assert _types(events) == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert events[0]["object"]["kind"] == "Pod" and events[0]["object"]["apiVersion"] == "v1"
    deleted_version = int(events[2]["object"]["metadata"]["resourceVersion"])
    assert deleted_version > int(events[1]["object"]["metadata"]["resourceVersion"]), "a deletion carries its own version"


def test_a_watch_from_a_version_sends_only_later_changes_and_ends_on_its_time_out(client):
    client.post(PODS, pod("a"))
    version = client.get(PODS).body["metadata"]["resourceVersion"]
    client.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}})
    client.post(PODS, pod("b"))
    started = time.monotonic()
    events = client.watch(f"{PODS}?watch=1&resourceVersion={version}&timeoutSeconds=1")
    assert 0.9 <= time.monotonic() - started < 4
    assert _types(events) == [("MODIFIED", "a"), ("ADDED", "b")]


def test_selectors_turn_objects_leaving_and_entering_them_into_deleted_and_added(client):
    client.post(PODS, pod("a", labels={"team": "x"}))
    client.post(PODS, pod("b"))
    version = client.get(PODS).body["metadata"]["resourceVersion"]
    client.patch(f"{PODS}/a", {"metadata": {"labels": {"team": None}}})
    client.patch(f"{PODS}/b", {"metadata": {"labels": {"team": "x"}}})
    client.patch(f"{PODS}/b", {"metadata": {"labels": {"more": "y"}}})
    events = client.watch(f"{PODS}?watch=true&labelSelector=team%3Dx&resourceVersion={version}&timeoutSeconds=1")
    assert _types(events) == [("DELETED", "a"), ("ADDED", "b"), ("MODIFIED", "b")]
    by_name = client.watch(f"{PODS}?watch=true&fieldSelector=metadata.name%3Db&timeoutSeconds=1")
    assert _types(by_name) == [("ADDED", "b")]


def test_bookmarks_carry_the_current_version_when_nothing_happens(client):
    client.post(PODS, pod("a"))
    version = client.get(PODS).body["metadata"]["resourceVersion"]
    client.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "elsewhere"}})
    events = client.watch(f"{PODS}?watch=true&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds=1")
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and all(e["type"] == "BOOKMARK" for e in events)
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) > int(version), "past the unrelated write"
    assert bookmarks[0]["object"]["kind"] == "Pod"


def test_a_too_old_version_gets_an_error_event_with_a_410_status():
    with ApiServer(crds=False, kubelet=False, history=5) as server:
        client = Client(server.url)
        for index in range(10):
            client.post(PODS, pod(f"p{index}"))
        events = client.watch(f"{PODS}?watch=true&resourceVersion=1&timeoutSeconds=5")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert "too old resource version" in status["message"]


def test_a_bad_selector_is_a_400_before_the_stream_starts(client):
    reply = client.get(f"{PODS}?watch=true&labelSelector=%3D%3D")
    assert reply.code == 400 and reply.body["kind"] == "Status"


def test_watches_end_when_the_server_stops():
    server = ApiServer(crds=False, kubelet=False).start()
    stream = Client(server.url).stream(f"{PODS}?watch=true")
    time.sleep(0.1)
    stopped = time.monotonic()
    server.stop()
    assert stream.read() == b"" and time.monotonic() - stopped < 3
    stream.close()


def test_a_table_watch_sends_rows(client):
    client.post(PODS, pod("a"))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    request = urllib.request.Request(client.url + f"{PODS}?watch=true&timeoutSeconds=1", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=5) as response:
        events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert events[0]["object"]["kind"] == "Table" and events[0]["object"]["rows"][0]["cells"][0] == "a"


def test_answers_are_http_1_1_and_a_watch_is_chunked_on_a_kept_alive_connection(server, client):
    """Chunked encoding exists only in HTTP/1.1: a watch sent chunked in an HTTP/1.0 answer
    is read by Go's client (kubectl) as raw bytes, chunk sizes and all."""
    import http.client
    from urllib.parse import urlsplit

    client.post(PODS, pod("a"))
    where = urlsplit(server.url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    connection.request("GET", PODS)
    listed = connection.getresponse()
    assert listed.version == 11 and listed.getheader("Content-Length")
    version = json.loads(listed.read())["metadata"]["resourceVersion"]
    connection.request("GET", f"{PODS}?watch=true&timeoutSeconds=1&resourceVersion=0")  # the same connection, kept alive
    watched = connection.getresponse()
    assert watched.version == 11 and watched.getheader("Transfer-Encoding") == "chunked"
    events = [json.loads(line) for line in watched.read().splitlines() if line.strip()]
    assert [e["object"]["metadata"]["name"] for e in events] == ["a"] and version
    connection.close()
