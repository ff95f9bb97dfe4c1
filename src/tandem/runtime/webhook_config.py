"""Registering a process's own ValidatingWebhookConfiguration (`--manage-webhook-config`):
once the API server answers, and again whenever the CA bundle on disk changes. Each
process names its own configuration (`tandem-operator`, `tandem-topology-controller`), so
one running alone never leaves the other's rules in place."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

from tandem.cluster.ports import AlreadyExists, Cluster
from tandem.errors import ApiError


@dataclass(frozen=True)
class Webhook:
    """A further webhook of a configuration, served at the same URL: its own rules, and
    `matchConditions` (CEL) narrowing which of the writes they match are sent at all."""

    name: str
    rules: tuple[dict[str, Any], ...]
    match_conditions: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class Registration:
    name: str  # the ValidatingWebhookConfiguration's metadata.name
    rules: tuple[dict[str, Any], ...]  # admissionregistration rules: which kinds and operations come here
    webhook: str = "validate.tandem.dev"  # the webhook's name inside the configuration
    also: tuple[Webhook, ...] = ()  # further webhooks, after the first

    def webhooks(self) -> list[dict[str, Any]]:
        """The webhooks without their client configuration: names, rules, match conditions."""
        out: list[dict[str, Any]] = [{"name": self.webhook, "rules": [dict(rule) for rule in self.rules]}]
        for hook in self.also:
            out.append({"name": hook.name, "rules": [dict(rule) for rule in hook.rules],
                        **({"matchConditions": [dict(c) for c in hook.match_conditions]} if hook.match_conditions else {})})
        return out

    def body(self, url: str, ca_bundle: str) -> dict[str, Any]:
        """The configuration: every webhook fail closed, 5 s."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/managed-by": "tandem"}},
            "webhooks": [
                {
                    **hook,
                    "clientConfig": {"url": url, "caBundle": ca_bundle},
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "timeoutSeconds": 5,
                    "admissionReviewVersions": ["v1"],
                }
                for hook in self.webhooks()
            ],
        }


def register_webhook(cluster: Cluster, registration: Registration, url: str, ca_bundle: str, log: logging.Logger) -> None:
    """Create or update the configuration."""
    body = registration.body(url, ca_bundle)
    try:
        cluster.create(body)
    except AlreadyExists:
        cluster.patch("ValidatingWebhookConfiguration", None, registration.name, {"webhooks": body["webhooks"]})
    log.info("registered the admission webhook at %s", url)


def register_when_reachable(cluster: Cluster, registration: Registration, url: str, ca_bundle: str, stop: threading.Event, log: logging.Logger,
                            first_delay: float = 0.5, most: float = 30.0) -> bool:
    """Register the webhook configuration, again and again while the API server cannot be
    reached (it may not be up yet) or answers a retryable error, with a doubling delay
    (each attempt's failure logged); a terminal answer (403, 422) is logged once as an
    error. Whether it was registered."""
    delay = first_delay
    while not stop.is_set():
        try:
            register_webhook(cluster, registration, url, ca_bundle, log)
            return True
        except ApiError as exc:
            if not exc.retryable:
                log.error("cannot register the admission webhook configuration: %s", exc.message)
                return False
            log.warning("cannot register the admission webhook configuration yet (%s); retrying in %.1f s", exc.message, delay)
        stop.wait(delay)
        delay = min(delay * 2, most)
    return False


def keep_registered(cluster: Cluster, registration: Registration, url: str, bundle: Callable[[], str], stop: threading.Event,
                    log: logging.Logger, every: float = 5.0) -> None:
    """Register the configuration once the API server answers, and again whenever the CA
    bundle on disk changes (a renewed certificate with a new CA), so the API server keeps
    trusting what the webhook serves."""
    registered: str | None = None
    while not stop.is_set():
        current: str | None
        try:
            current = bundle()
        except OSError:
            current = registered  # caught mid-rotation: look again later
        if current is not None and current != registered:
            if not register_when_reachable(cluster, registration, url, current, stop, log):
                return
            if registered is not None:
                log.info("the webhook's CA changed: registered the new bundle")
            registered = current
        stop.wait(every)
