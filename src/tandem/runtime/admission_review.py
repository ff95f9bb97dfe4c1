"""An AdmissionReview v1 envelope: read a request, answer a verdict. The checks belong to
each process's own reviewer (the operator's groups and topologies, the topology
controller's topologies); this is only the wire format, a function of its input."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_BODY = 3 * 1024 * 1024  # the API server's own request limit
REVIEW_API = "admission.k8s.io/v1"


class Malformed(ValueError):
    """Not an AdmissionReview this webhook can answer (the server answers 400)."""


@dataclass(frozen=True)
class Verdict:
    uid: str
    allowed: bool
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def response(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if not self.allowed:
            answer["status"] = {"code": 422, "reason": "Invalid", "message": "\n".join(self.problems)}
        if self.warnings:
            answer["warnings"] = list(self.warnings)
        return {"apiVersion": REVIEW_API, "kind": "AdmissionReview", "response": answer}


def parse(body: bytes) -> dict[str, Any]:
    """The review's `request`, or Malformed with what is wrong."""
    if len(body) > MAX_BODY:
        raise Malformed(f"request body of {len(body)} bytes is over the {MAX_BODY}-byte limit")
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"not JSON: {exc}") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview" or review.get("apiVersion") != REVIEW_API:
        raise Malformed(f"expected an {REVIEW_API} AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise Malformed("request.uid is missing")
    if not isinstance(request.get("operation"), str):
        raise Malformed("request.operation is missing")
    for key in ("object", "oldObject", "kind"):
        if request.get(key) is not None and not isinstance(request[key], dict):
            raise Malformed(f"request.{key} must be an object")
    return request
