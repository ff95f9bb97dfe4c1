"""Kubernetes quantities: parsed to integer milli-units, rounded up; bad ones rejected."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tandem.api.quantity import format_quantity, parse_quantity

KI = 2**10


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        # plain numbers
        ("0", 0),
        ("1", 1_000),
        ("8", 8_000),
        ("+3", 3_000),
        ("-0", 0),
        ("1.5", 1_500),
        (".5", 500),
        ("5.", 5_000),
        (" 2 ", 2_000),
        # decimal suffixes
        ("1n", 1),  # 1e-6 milli, rounded up
        ("1u", 1),  # 1e-3 milli, rounded up
        ("1000u", 1),
        ("1001u", 2),
        ("1m", 1),
        ("500m", 500),
        ("191450m", 191_450),
        ("1k", 1_000_000),
        ("1M", 10**9),
        ("1G", 10**12),
        ("1T", 10**15),
        ("1P", 10**18),
        ("1.5G", 15 * 10**11),
        # binary suffixes
        ("1Ki", KI * 1_000),
        ("1Mi", KI**2 * 1_000),
        ("16Gi", 16 * KI**3 * 1_000),
        ("2Ti", 2 * KI**4 * 1_000),
        ("4Pi", 4 * KI**5 * 1_000),
        ("1.5Gi", 3 * KI**3 // 2 * 1_000),
        ("2097152000Ki", 2_097_152_000 * KI * 1_000),
        # decimal exponents
        ("1e3", 10**6),
        ("1E3", 10**6),
        ("2e0", 2_000),
        ("1e-3", 1),
        ("1.5e-3", 2),  # 1.5 milli, rounded up
        ("12e+2", 1_200_000),
        ("1e-9", 1),  # anything above zero is at least one milli
        # rounding up to a whole milli
        ("0.0001", 1),
        ("0.5m", 1),
        ("1.0001m", 2),
        # numbers as YAML gives them
        (8, 8_000),
        (0, 0),
        (0.5, 500),
        (0.1, 100),
        (2.25, 2_250),
        (10**12, 10**15),
    ],
)
def test_parse(text: object, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must be a quantity"),
        ("8x", "must be a quantity"),
        ("1.5.2", "must be a quantity"),
        ("1K", "must be a quantity"),  # kilo is a lower-case k
        ("1 Gi", "must be a quantity"),
        ("Gi", "must be a quantity"),
        ("1e", "must be a quantity"),
        ("1e1.5", "must be a quantity"),
        ("1Gi2", "must be a quantity"),
        ("0x10", "must be a quantity"),
        ("one", "must be a quantity"),
        ("1,5", "must be a quantity"),
        ("-1", "must not be negative"),
        ("-500m", "must not be negative"),
        (-1, "must not be negative"),
        (-0.5, "must not be negative"),
        ("1Ei", "is too large"),  # 2**60 * 1000 milli does not fit the int64-safe bound
        ("5E", "is too large"),
        ("1e400", "has an exponent out of range"),
        ("1e-400", "has an exponent out of range"),
        ("1e99999999999", "has an exponent out of range"),
        (10**30, "is too large"),
        (float("nan"), "must be a finite quantity"),
        (float("inf"), "must be a finite quantity"),
        (True, "must be a quantity"),
        (None, "not null"),
        ([1], "not a list"),
        ({"a": 1}, "not a mapping"),
    ],
)
def test_rejects(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_quantity(value)


def test_largest_accepted() -> None:
    """2**62 milli-units (about 4.6e15 whole units, 4 PiB of memory) keeps int64 sums exact."""
    assert parse_quantity(f"{2**62}m") == 2**62
    assert parse_quantity("4Pi") == 4 * KI**5 * 1000
    with pytest.raises(ValueError, match="is too large"):
        parse_quantity(f"{2**62 + 1}m")
    with pytest.raises(ValueError, match="is too large"):
        parse_quantity("5Pi")


@pytest.mark.parametrize(("milli", "text"), [(0, "0"), (1_000, "1"), (8_000, "8"), (1, "1m"), (500, "500m"), (1_500, "1500m")])
def test_format(milli: int, text: str) -> None:
    assert format_quantity(milli) == text


# ----------------------------------------------------------------------------- properties


@given(st.integers(min_value=0, max_value=10**15))
def test_formatted_integer_round_trips(n: int) -> None:
    assert parse_quantity(str(n)) == n * 1000
    assert parse_quantity(n) == n * 1000
    assert format_quantity(parse_quantity(str(n))) == str(n)


@given(st.integers(min_value=0, max_value=10**15))
def test_formatted_milli_round_trips(milli: int) -> None:
    assert parse_quantity(format_quantity(milli)) == milli
    assert parse_quantity(f"{milli}m") == milli


@given(st.integers(min_value=0, max_value=4000), st.sampled_from(["Ki", "Mi", "Gi", "Ti"]))
def test_binary_suffixes_are_powers_of_two(n: int, suffix: str) -> None:
    power = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4}[suffix]
    assert parse_quantity(f"{n}{suffix}") == n * KI**power * 1000


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["k", "M", "G", "T"]), st.integers(min_value=0, max_value=3))
def test_decimal_suffix_equals_exponent(n: int, suffix: str, extra: int) -> None:
    exponent = {"k": 3, "M": 6, "G": 9, "T": 12}[suffix]
    assume(n * 10 ** (exponent + extra) * 1000 <= 2**62)
    assert parse_quantity(f"{n}{suffix}") == parse_quantity(f"{n}e{exponent}") == n * 10**exponent * 1000
    assert parse_quantity(f"{n}e{exponent + extra}") == n * 10 ** (exponent + extra) * 1000


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=9))
def test_fractions_round_up_never_down(whole: int, digits: int) -> None:
    """A quantity is never parsed below its value: requests are rounded up, as Kubernetes does."""
    text = f"{whole}.{'0' * (digits - 1)}1"  # just above `whole`
    milli = parse_quantity(text)
    assert milli >= whole * 1000 + 1
    assert milli == whole * 1000 + (1 if digits >= 3 else 10 ** (3 - digits))


@given(st.text(alphabet="0123456789.eEkKmMGiT+- ", max_size=12))
def test_any_text_is_a_quantity_or_a_value_error(text: str) -> None:
    """Never another exception: whatever the text, a number or a one-line ValueError."""
    try:
        milli = parse_quantity(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(milli, int) and 0 <= milli <= 2**62
