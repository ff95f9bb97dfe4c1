"""Every failure the API (or the road to it) can answer, as tandem's error, with the right
retryable flag and wait, chained to the client's own error."""

from __future__ import annotations

import asyncio
import socket
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import httpx2
import kmock
import pytest
from lightkube.core.exceptions import ApiError as LightkubeApiError

from tandem.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
)
from tandem.kube.errors import retry_after, status_error, translate
from tandem.kube.rest import Rest
from tandem.kube.writer import KubeWriter

NS = "serving"
PODS = f"/api/v1/namespaces/{NS}/pods"


def status(code: int, reason: str, message: str = "", **details) -> dict:
    body = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": code, "reason": reason,
            "message": message or f"{reason} ({code})"}
    if details:
        body["details"] = details
    return body


def pod(name="p"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": {"containers": [{"name": "c"}]}}


@pytest.mark.parametrize(
    "code, reason, expected, retryable",
    [
        (403, "Forbidden", Forbidden, False),
        (404, "NotFound", NotFound, False),
        (409, "AlreadyExists", AlreadyExists, False),
        (409, "Conflict", Conflict, True),
        (410, "Expired", Gone, True),
        (422, "Invalid", Invalid, False),
        (500, "InternalError", InternalError, True),
        (503, "ServiceUnavailable", ServiceUnavailable, True),
    ],
)
def test_status_answers_map_to_tandem_errors(mock, mock_rest, code, reason, expected, retryable):
    mock.on_loop(lambda h: h[f"post {PODS}"] << code << status(code, reason, "told by the server"))
    with pytest.raises(expected) as caught:
        KubeWriter(mock_rest).create(pod())
    error = caught.value
    assert type(error) is expected and error.code == code and error.retryable is retryable
    assert error.message == "told by the server"
    assert isinstance(error.__cause__, httpx2.HTTPStatusError), "the client's error is chained"


def test_429_carries_the_retry_after_header(mock, mock_rest):
    KubeWriter(mock_rest).create(pod())  # kmock's emulator answers 404 for a missing object before any reaction
    mock.on_loop(lambda h: h[f"patch {PODS}/p"] << 429 << kmock.headers({"Retry-After": "7"}) << status(429, "TooManyRequests"))
    with pytest.raises(TooManyRequests) as caught:
        KubeWriter(mock_rest).patch("Pod", NS, "p", {"metadata": {"labels": {"a": "b"}}})
    assert caught.value.retryable and caught.value.retry_after == 7.0


def test_503_with_an_http_date_and_a_text_body(mock, mock_rest):
    later = datetime.now(timezone.utc) + timedelta(seconds=30)
    headers = {"Retry-After": format_datetime(later, usegmt=True), "Content-Type": "text/plain"}
    KubeWriter(mock_rest).create(pod())
    mock.on_loop(lambda h: h[f"delete {PODS}/p"] << 503 << kmock.headers(headers) << b"upstream connect error")
    with pytest.raises(ServiceUnavailable) as caught:
        KubeWriter(mock_rest).delete("Pod", NS, "p")
    assert caught.value.retryable and 20 < caught.value.retry_after <= 30
    assert "upstream connect error" in caught.value.message


def test_retry_after_seconds_in_the_status_details(mock, mock_rest):
    mock.on_loop(lambda h: h[f"post {PODS}"] << 429 << status(429, "TooManyRequests", retryAfterSeconds=3))
    with pytest.raises(TooManyRequests) as caught:
        KubeWriter(mock_rest).create(pod())
    assert caught.value.retry_after == 3.0


def test_an_unlisted_status_code_keeps_its_code_and_class(mock, mock_rest):
    mock.on_loop(lambda h: h[f"post {PODS}"] << 502 << status(502, "BadGateway"))
    with pytest.raises(InternalError) as caught:
        KubeWriter(mock_rest).create(pod())
    assert caught.value.code == 502 and caught.value.retryable


def test_a_time_out_is_a_retryable_server_time_out(mock):
    mock.on_loop(lambda h: h[f"post {PODS}"] << (lambda: asyncio.sleep(2)))
    rest = Rest.connect(mock.url, timeout=0.3, trust_env=False)
    try:
        with pytest.raises(ServerTimeout) as caught:
            KubeWriter(rest).create(pod())
    finally:
        rest.close()
    assert caught.value.retryable and caught.value.code == 504
    assert isinstance(caught.value.__cause__, httpx2.TimeoutException)


def test_no_server_at_all_is_retryable():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rest = Rest.connect(f"http://127.0.0.1:{port}", timeout=1.0, trust_env=False)
    try:
        with pytest.raises(ServiceUnavailable) as caught:
            KubeWriter(rest).create(pod())
    finally:
        rest.close()
    assert caught.value.retryable and isinstance(caught.value.__cause__, httpx2.ConnectError)


def test_lightkube_api_errors_translate_too():
    request = httpx2.Request("POST", "https://k8s/api/v1/namespaces/x/pods")
    response = httpx2.Response(409, json=status(409, "AlreadyExists", 'pods "p" already exists'), request=request)
    error = translate(LightkubeApiError(request=request, response=response))
    assert isinstance(error, AlreadyExists) and not error.retryable and error.message == 'pods "p" already exists'
    response = httpx2.Response(429, json=status(429, "TooManyRequests"), headers={"Retry-After": "2"}, request=request)
    error = translate(LightkubeApiError(request=request, response=response))
    assert isinstance(error, TooManyRequests) and error.retry_after == 2.0


def test_watch_error_events_and_odd_inputs():
    assert isinstance(status_error(status(410, "Expired", "too old resource version: 1 (9)")), Gone)
    assert isinstance(status_error({"kind": "Status"}), InternalError)
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}, {"retryAfterSeconds": 0}) is None
    assert isinstance(translate(ValueError("x")), ApiError)
