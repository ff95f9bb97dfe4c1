"""Calling validating webhooks: an AdmissionReview v1 over HTTPS each, and what the answers
mean, worded as kube-apiserver words them (k8s.io/apiserver's webhook dispatcher).

- The server certificate is verified against the webhook's `caBundle` (the system's roots
  without one), host name included; the URL gets `?timeout=<n>s`, and `timeoutSeconds`
  bounds each phase of the call. A `service` reference cannot be routed from here: it is a
  failure to call, as an unreachable Service would be.
- Several webhooks are called at once; when more than one refuses, the first in order
  (configurations by name, webhooks in order) is the answer, so it is the same every run.
- Allowed: the response's `warnings` go back to the client as Warning headers. Denied: the
  webhook's Status, its code kept when 400 or more (else 400), its message prefixed
  `admission webhook "NAME" denied the request: `. A failure to call (refused, timed out,
  certificate not trusted, an answer that is not 200 with this request's AdmissionReview
  v1) is 500 `Internal error occurred: failed calling webhook "NAME": ...` with
  failurePolicy Fail; with Ignore the write is admitted.
- A dry run goes only to webhooks whose sideEffects are None or NoneOnDryRun; another is
  400 `admission webhook "NAME" does not support dry run`. A webhook whose
  admissionReviewVersions lack v1 cannot be called: this server speaks only v1.
No lock is held here: the caller made the object under the state's lock and commits it after.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tandem.apiserver.error_status import Refused, StatusError
from tandem.apiserver.webhooks import Attributes, Invocation, admission_request, ca_bundle
from tandem.errors import ApiError, BadRequest

log = logging.getLogger("tandem.apiserver.review")
REVIEW_API, REVIEW_KIND = "admission.k8s.io/v1", "AdmissionReview"
MAX_RESPONSE = 3 * 1024 * 1024


class CallFailed(Exception):
    """The webhook could not be called, or did not answer as one must (`str`: why, Go's words)."""


def admit(invocations: list[Invocation], attributes: Attributes) -> list[str]:
    """Call every webhook; the warnings they gave, or the error that refuses the write."""
    if not invocations:
        return []
    if len(invocations) == 1:
        outcomes = [_outcome(invocations[0], attributes)]
    else:
        with ThreadPoolExecutor(max_workers=len(invocations), thread_name_prefix="admission") as pool:
            outcomes = list(pool.map(lambda i: _outcome(i, attributes), invocations))
    warnings = [w for found, _ in outcomes for w in found]
    refusal = next((error for _, error in outcomes if error is not None), None)
    if refusal is not None:
        raise Refused(refusal, warnings)
    return warnings


def _outcome(invocation: Invocation, attributes: Attributes) -> tuple[list[str], ApiError | None]:
    hook = invocation.hook
    if attributes.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
        return [], BadRequest(f'admission webhook "{hook.name}" does not support dry run')
    try:
        response = call(invocation, attributes)
    except CallFailed as exc:
        failure = f'failed calling webhook "{hook.name}": {exc}'
        if hook.fails_open:
            log.info("failed calling webhook, failing open %s: %s", hook.name, failure)
            return [], None
        log.info("failed calling webhook, failing closed %s: %s", hook.name, failure)
        return [], StatusError(500, "InternalError", f"Internal error occurred: {failure}", {"causes": [{"message": failure}]})
    warnings = [str(w) for w in response.get("warnings") or [] if isinstance(w, str)]
    if response.get("allowed") is True:
        return warnings, None
    return warnings, denial(hook.name, response.get("status"))


def denial(name: str, result: Any) -> StatusError:
    """A webhook's refusal as the API answers it (webhookerrors.ToStatusErr)."""
    result = result if isinstance(result, dict) else {}
    code = result.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) and code >= 400 else 400
    denied = f'admission webhook "{name}" denied the request'
    if result.get("message"):
        message = f"{denied}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied}: {result['reason']}"
    else:
        message = f"{denied} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return StatusError(code, str(result.get("reason") or ""), message, details)


def call(invocation: Invocation, attributes: Attributes) -> dict[str, Any]:
    """One review, over HTTPS: the response's `response` (CallFailed when there is none to read)."""
    hook = invocation.hook
    if "v1" not in hook.review_versions:
        raise CallFailed(f"webhook accepts AdmissionReview versions {list(hook.review_versions)}; this server sends only v1")
    url = hook.client.get("url")
    if not url:
        service = hook.client.get("service") or {}
        raise CallFailed(f'failed to call webhook: service "{service.get("namespace")}/{service.get("name")}" cannot be reached '
                         "from the local API server: give the webhook a clientConfig.url")
    body = json.dumps(admission_review(invocation, attributes)).encode()
    status, data = _post(str(url), body, hook.client, hook.timeout_s)
    if status != 200:
        raise CallFailed(f"failed to call webhook: {_unexpected(status, data)}")
    try:
        answer = json.loads(data)
    except ValueError as exc:
        raise CallFailed(f"failed to call webhook: couldn't get version/kind; json parse error: {exc}") from None
    if not isinstance(answer, dict):
        raise CallFailed("failed to call webhook: couldn't get version/kind; json parse error: not an object")
    if (answer.get("apiVersion"), answer.get("kind")) != (REVIEW_API, REVIEW_KIND):
        raise CallFailed(f"received invalid webhook response: expected webhook response of {REVIEW_API}, Kind={REVIEW_KIND}, "
                         f"got {answer.get('apiVersion')}, Kind={answer.get('kind')}")
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallFailed("received invalid webhook response: webhook response was absent")
    if response.get("uid") != invocation.uid:
        raise CallFailed(f"received invalid webhook response: expected response.uid={json.dumps(invocation.uid)}, "
                         f"got {json.dumps(response.get('uid'))}")
    return response


def admission_review(invocation: Invocation, attributes: Attributes) -> dict[str, Any]:
    """The AdmissionReview v1 a webhook is sent."""
    request = {"uid": invocation.uid, **admission_request(invocation, attributes), "object": invocation.object, "oldObject": invocation.old_object}
    return {"apiVersion": REVIEW_API, "kind": REVIEW_KIND, "request": request}


def _post(url: str, body: bytes, client: dict[str, Any], timeout_s: int) -> tuple[int, bytes]:
    """POST `body` to `url` (with `?timeout=`), verified against the caBundle: the status and the body."""
    parts = urlsplit(url)
    target = urlunsplit((parts.scheme, parts.netloc, parts.path or "/", f"timeout={timeout_s}s", ""))
    host, port = parts.hostname or "", parts.port or 443
    where = f'Post "{target}"'
    try:
        context = _context(client)
    except ssl.SSLError:
        raise CallFailed("could not get REST client: unable to load root certificates: unable to parse bytes as PEM block") from None
    deadline = time.monotonic() + timeout_s
    connection = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=context)
    try:
        connection.connect()
        sock = connection.sock  # the response keeps reading from it once the connection lets go
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        connection.request("POST", f"{parts.path or '/'}?timeout={timeout_s}s", body,
                           {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "tandem-apiserver-admission"})
        response = connection.getresponse()
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        data = response.read(MAX_RESPONSE + 1)
    except (socket.timeout, TimeoutError):
        raise CallFailed(f"failed to call webhook: {where}: context deadline exceeded") from None
    except ssl.SSLCertVerificationError as exc:
        raise CallFailed(f"failed to call webhook: {where}: tls: failed to verify certificate: x509: {_x509(exc, host)}") from None
    except ssl.SSLError as exc:
        raise CallFailed(f"failed to call webhook: {where}: tls: {exc.reason or exc}") from None
    except ConnectionRefusedError:
        raise CallFailed(f"failed to call webhook: {where}: dial tcp {host}:{port}: connect: connection refused") from None
    except http.client.RemoteDisconnected:
        raise CallFailed(f"failed to call webhook: {where}: EOF") from None
    except socket.gaierror:
        raise CallFailed(f"failed to call webhook: {where}: dial tcp: lookup {host}: no such host") from None
    except (OSError, http.client.HTTPException) as exc:
        raise CallFailed(f"failed to call webhook: {where}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc or type(exc).__name__}") from None
    finally:
        connection.close()
    if len(data) > MAX_RESPONSE:
        raise CallFailed(f"failed to call webhook: {where}: the response is over {MAX_RESPONSE} bytes")
    return response.status, data


def _x509(error: ssl.SSLCertVerificationError, host: str) -> str:
    """OpenSSL's verification failure in Go's words, where they differ."""
    if error.verify_code in (7, 18, 19, 20, 21):  # a bad signature, self-signed, or an issuer the bundle lacks
        return "certificate signed by unknown authority"
    if error.verify_code in (62, 64):  # host name or IP address mismatch
        return f"certificate is not valid for {host}"
    return str(error.verify_message)


def _context(client: dict[str, Any]) -> ssl.SSLContext:
    pem = ca_bundle(client)
    if pem is None:
        raise ssl.SSLError("caBundle is not base64")
    context = ssl.create_default_context(cadata=pem.decode("utf-8", "replace")) if pem else ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _unexpected(status: int, data: bytes) -> str:
    """A status other than 200, in the words of client-go's REST client."""
    text = data[:1024].decode("utf-8", "replace").strip()
    if status >= 500:
        return f"an error on the server ({json.dumps(text)}) has prevented the request from succeeding"
    if status == 400:
        return "the server rejected our request for an unknown reason"
    if status == 404:
        return "the server could not find the requested resource"
    return f"the server responded with the status code {status} but did not return more information"
