"""Shared pydantic bases: camelCase on the wire, snake_case in Python.

Two strictness levels: tandem's own resources reject unknown fields (a typo must not be
silently ignored), while Kubernetes objects (`Node`, `Pod`, pod templates) ignore fields
tandem does not use, because `kubectl get -o yaml` prints many of them.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tandem.api.quantity import parse_quantity

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class StrictModel(BaseModel):
    """tandem's own resources: unknown fields are errors."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        strict=False,
        allow_inf_nan=False,  # an infinite bandwidth or a NaN rate is a mistake, refused at its field
    )


class KubeModel(BaseModel):
    """Kubernetes objects as kubectl prints them: unknown fields are ignored."""

    model_config = ConfigDict(
        extra="ignore",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


def _dns1123_label(value: str) -> str:
    if len(value) > 63:
        raise ValueError(f"must be at most 63 characters, got {len(value)}")
    if not _DNS1123_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit)"
        )
    return value


def _dns1123_subdomain(value: str) -> str:
    if len(value) > 253:
        raise ValueError(f"must be at most 253 characters, got {len(value)}")
    if not _DNS1123_SUBDOMAIN.match(value):
        raise ValueError(f"{value!r} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')")
    return value


def _quantity(value: object) -> int:
    return parse_quantity(value)


DNSLabel = Annotated[str, Field(strict=True), AfterValidator(_dns1123_label)]
DNSSubdomain = Annotated[str, Field(strict=True), AfterValidator(_dns1123_subdomain)]
# A quantity is accepted as a string or a number and stored in milli-units: an int once
# validated, which is what the type checker sees.
if TYPE_CHECKING:
    Quantity = int
else:
    Quantity = Annotated[object, AfterValidator(_quantity)]
# Counts, timeouts and priorities are int32 in Kubernetes (replicas, PriorityClass.value);
# the bound also keeps a typo such as 10**20 replicas from stalling the planner.
MAX_INT32 = 2**31 - 1
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_INT32, strict=True)]
PositiveInt = Annotated[int, Field(ge=1, le=MAX_INT32, strict=True)]
Int32 = Annotated[int, Field(ge=-MAX_INT32 - 1, le=MAX_INT32, strict=True)]


def _timestamp(value: object) -> object:
    """RFC 3339 text; a YAML timestamp a hand-written file left unquoted is turned back into it."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return f"{value.isoformat()}T00:00:00Z"
    return value


Timestamp = Annotated[str, BeforeValidator(_timestamp)]
