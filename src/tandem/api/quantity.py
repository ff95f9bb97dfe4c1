"""Kubernetes resource quantities, held as integer milli-units.

Integers keep capacity arithmetic exact and deterministic: "500m" CPU is 500, one GPU is
1000, "1Gi" of memory is 1073741824000. Parsing follows the Kubernetes quantity grammar
(binary suffixes Ki..Ei, decimal suffixes n u m "" k M G T P E, and decimal exponents).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, DecimalException, InvalidOperation
from functools import lru_cache

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# Kubernetes quantities stay far inside this; it keeps Decimal arithmetic finite.
_MAX_EXPONENT = 100
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


def parse_quantity(value: object) -> int:
    """Return the quantity in milli-units, rounded up (as Kubernetes rounds requests).

    Raises ValueError with a message fit for a field-path error.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a quantity such as 8, 500m or 16Gi, not {value!r}")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite quantity such as 8, 500m or 16Gi, not {value!r}")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        return _parse_text(value)
    else:
        shown = {list: "a list", dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)
        raise ValueError(f"must be a quantity such as 8, 500m or 16Gi, not {shown}")
    return _milli(number, value)


# A cluster states the same few quantities again and again ("8", "500m", "2000Gi" on every
# node and pod); a pure function of the text, so the parse is kept, not repeated.
@lru_cache(maxsize=4096)
def _parse_text(value: str) -> int:
    match = _PATTERN.match(value.strip())
    if not match:
        raise ValueError(f"must be a quantity such as 8, 500m or 16Gi, not {value!r}")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the pattern prevents it
        raise ValueError(f"not a quantity: {value!r}") from exc
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"has an exponent out of range (at most e{_MAX_EXPONENT} either way), got {value!r}")
        number = number.scaleb(exponent)
    return _milli(number, value)


def _milli(number: Decimal, value: object) -> int:
    if number < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    try:
        milli = (number * MILLI).to_integral_value(rounding=ROUND_CEILING)
    except DecimalException as exc:  # pragma: no cover - the bounds above prevent it
        raise ValueError(f"is out of range, got {value!r}") from exc
    if milli > 2**62:
        raise ValueError(f"is too large, got {value!r}")
    return int(milli)


def format_quantity(milli: int) -> str:
    """Render milli-units for people: whole numbers plainly, fractions with an m suffix."""
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli}m"
