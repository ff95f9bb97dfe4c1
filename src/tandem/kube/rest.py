"""JSON over the Kubernetes REST API, on the connection lightkube sets up.

lightkube finds and authenticates the cluster (in-cluster service account, `KUBECONFIG`,
`~/.kube/config`; token files re-read on rotation, exec plugins, client certificates) and
builds the `httpx2` client; tandem sends its requests through that client itself, because
the ports need what lightkube's `Client` verbs do not offer: a DeleteOptions body with
preconditions, watches with `allowWatchBookmarks` and a re-list (not a blind restart) on
410, and plain dicts in and out (lightkube's generic resources register one class per
(apiVersion, kind) process-wide, and would clash with its typed core models).

Every failure leaves here as a `tandem.errors.ApiError` chained to the client's error.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any, Iterator, Mapping

import httpx2
import msgspec
from lightkube import Client as LightkubeClient
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster as ClusterConfig
from lightkube.config.models import User

from tandem.kube.errors import from_response, translate

JSON = "application/json"
FIELD_MANAGER = "tandem"

Source = LightkubeClient | KubeConfig | SingleConfig | str | None


def _current(kubeconfig: KubeConfig) -> SingleConfig:
    """The kubeconfig's current context. lightkube's `get()` is typed Optional, but without a
    `default` it raises ConfigError rather than return None."""
    config = kubeconfig.get()
    assert config is not None
    return config


class Rest:
    """One connection to one API server; safe to share between threads (httpx2 pools)."""

    def __init__(self, http: httpx2.Client, *, field_manager: str = FIELD_MANAGER):
        self.http = http
        self.field_manager = field_manager

    @classmethod
    def connect(cls, source: Source = None, *, timeout: float = 10.0, trust_env: bool = True, field_manager: str = FIELD_MANAGER) -> "Rest":
        """Connect as lightkube would. `source`: None for the in-cluster ServiceAccount (as
        `tandem operator` without --kubeconfig); a kubeconfig file's path (its current
        context); an `http(s)://` URL for an unauthenticated server (the local `tandem
        apiserver`); a lightkube `KubeConfig` (`KubeConfig.from_env()` tries in-cluster,
        then KUBECONFIG, then ~/.kube/config), `SingleConfig`, or `Client` (its configuration)."""
        config: SingleConfig
        if source is None:
            config = _current(KubeConfig.from_service_account())
        elif isinstance(source, str) and source.startswith(("http://", "https://")):
            config = _current(KubeConfig.from_one(cluster=ClusterConfig(server=source), user=User()))
        elif isinstance(source, str):
            config = _current(KubeConfig.from_file(source))
        elif isinstance(source, KubeConfig):
            config = _current(source)
        elif isinstance(source, LightkubeClient):
            config = source.config
        else:
            config = source
        params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=trust_env)
        return cls(client_adapter.Client(config, params), field_manager=field_manager)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer (None when there is none)."""
        headers = {"Accept": JSON}
        content = None
        if body is not None:
            content = msgspec.json.encode(body)
            headers["Content-Type"] = content_type
        try:
            response = self.http.request(
                method,
                path,
                params={k: v for k, v in (params or {}).items() if v is not None},
                content=content,
                headers=headers,
                timeout=timeout if timeout is not None else httpx2.USE_CLIENT_DEFAULT,
            )
        except httpx2.HTTPError as exc:
            raise translate(exc) from exc
        _raise_for_status(response)
        return msgspec.json.decode(response.content) if response.content else None

    @contextlib.contextmanager
    def stream(self, path: str, params: Mapping[str, Any], *, read_timeout: float | None) -> Iterator["Stream"]:
        """A long-lived GET (a watch), read line by line; `Stream.abort` ends it from another thread."""
        timeout = httpx2.Timeout(self.http.timeout.connect or 10.0, read=read_timeout)
        try:
            with self.http.stream("GET", path, params=dict(params), headers={"Accept": JSON}, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_status(response)
                yield Stream(response)
        except httpx2.HTTPError as exc:
            raise translate(exc) from exc

    def close(self) -> None:
        self.http.close()


class Stream:
    def __init__(self, response: httpx2.Response):
        self.response = response
        self._aborted = threading.Event()

    def lines(self) -> Iterator[bytes]:
        for line in self.response.iter_lines():
            if self._aborted.is_set():
                return
            if line.strip():
                yield line.encode() if isinstance(line, str) else line

    def abort(self) -> None:
        """Unblock a reader waiting on this stream: closing a response from another thread
        does not wake a blocked read, shutting its socket down does."""
        self._aborted.set()
        stream = self.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()


def _raise_for_status(response: httpx2.Response) -> None:
    if response.status_code < 400:
        return
    try:
        response.raise_for_status()
    except httpx2.HTTPStatusError as exc:
        raise from_response(response) from exc


def as_rest(connection: "Rest | httpx2.Client") -> Rest:
    """A `Rest` over an `httpx2.Client` already pointed at the API (its `base_url`), or the `Rest` itself."""
    return connection if isinstance(connection, Rest) else Rest(connection)
