"""Parsers for the public request-trace formats: text in, `Trace` out, no file I/O.

- Azure LLM inference (2023/2024) CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`, the
  timestamp a naive ISO datetime with up to 9 fractional digits (the files carry 7).
- Mooncake JSONL: one object per line with `timestamp` (milliseconds),
  `input_length`, `output_length`, and `hash_ids` when present (prefix block ids, kept
  for the serving model's prefix cache).
- BurstGPT CSV: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`,
  the timestamp in seconds. Rows with `Response tokens` 0 are requests that failed
  upstream: they are left out and counted in `Trace.failed_dropped`, because a request
  that produced nothing says nothing about how long an answer would have been.

Every parser sorts by arrival (stably, so file order breaks ties) and shifts time so the
first request arrives at 0. A bad row is one `InputError` naming its line and column.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from pathlib import PurePath
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from tandem.errors import InputError, Problem
from tandem.sim.traces.trace import Trace

FORMATS = ("azure", "mooncake", "burstgpt")

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?")


def parse_trace(text: str, source: str = "", format: str | None = None, name: str | None = None) -> Trace:
    """Parse any supported format; `format=None` detects it from the header or first record."""
    if format is None:
        format = detect_format(text, source)
    parser = _PARSERS.get(format)
    if parser is None:
        raise InputError(Problem("format", f"unknown trace format {format!r}; use one of {', '.join(FORMATS)}", source))
    return parser(text, source, name=name)


def detect_format(text: str, source: str = "") -> str:
    """`mooncake` if the first line is a JSON object, else the CSV dialect its header names."""
    first = next(((number, line) for number, line in enumerate(_lines(text), start=1) if line.strip()), None)
    if first is None:
        raise InputError(Problem("", "the trace is empty", source))
    number, line = first
    if line.lstrip().startswith("{"):
        return "mooncake"
    header = {cell.strip() for cell in next(csv.reader([line]))}
    if set(AZURE_COLUMNS) <= header:
        return "azure"
    if set(BURSTGPT_COLUMNS) <= header:
        return "burstgpt"
    raise InputError(
        Problem(
            f"line {number}",
            f"cannot tell the trace format from {_clip(line)!r}: expected an Azure header "
            f"({','.join(AZURE_COLUMNS)}), a BurstGPT header ({','.join(BURSTGPT_COLUMNS)}, ...) "
            "or a Mooncake JSON object; name the format explicitly",
            source,
        )
    )


def parse_azure_csv(text: str, source: str = "", name: str | None = None) -> Trace:
    """Azure LLM inference trace CSV; times are parsed exactly (to the nanosecond)."""
    columns, _ = _read_csv(text, source, {"TIMESTAMP": "datetime", "ContextTokens": "length", "GeneratedTokens": "length"})
    stamps = columns["TIMESTAMP"]
    nanoseconds = (stamps - stamps.min()).astype(np.int64)
    return _trace(name or _stem(source), nanoseconds / 1e9, columns["ContextTokens"], columns["GeneratedTokens"])


def parse_burstgpt_csv(text: str, source: str = "", name: str | None = None) -> Trace:
    """BurstGPT CSV; failed requests (0 response tokens) are dropped and counted."""
    columns, lines = _read_csv(text, source, {"Timestamp": "number", "Request tokens": "count", "Response tokens": "count"})
    requested, responded = columns["Request tokens"], columns["Response tokens"]
    ok = responded > 0
    bad_request = np.flatnonzero(ok & (requested < 1))
    if bad_request.size:
        row = int(bad_request[0])
        raise InputError(Problem(f"line {lines[row]}", f"Request tokens: must be at least 1, got {requested[row]}", source))
    failed = int(ok.size - np.count_nonzero(ok))
    if failed == ok.size:
        raise InputError(Problem("", f"all {failed} requests failed upstream (Response tokens 0): nothing to replay", source))
    seconds = columns["Timestamp"][ok]
    return _trace(name or _stem(source), seconds - seconds.min(), requested[ok], responded[ok], failed_dropped=failed)


def parse_mooncake_jsonl(text: str, source: str = "", name: str | None = None) -> Trace:
    """Mooncake JSONL; `timestamp` is in milliseconds."""
    stamps: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    hashes: list[tuple[int, ...]] = []
    any_hashes = False
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(Problem(where, f"not valid JSON: {exc.msg} at column {exc.colno}", source)) from None
        except ValueError:  # Python's limit on turning digits into an int
            raise InputError(Problem(where, f"not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits", source)) from None
        if not isinstance(record, dict):
            raise InputError(Problem(where, f"expected a JSON object, got {type(record).__name__}", source))
        stamps.append(_json_field(record, "timestamp", where, source, _json_number))
        inputs.append(_json_field(record, "input_length", where, source, _json_length))
        outputs.append(_json_field(record, "output_length", where, source, _json_length))
        if "hash_ids" in record:
            any_hashes = True
            hashes.append(tuple(_json_field(record, "hash_ids", where, source, _json_hash_ids)))
        else:
            hashes.append(())
    if not stamps:
        raise InputError(Problem("", "the trace has no requests", source))
    milliseconds = np.array(stamps, dtype=np.float64)
    return _trace(name or _stem(source), (milliseconds - milliseconds.min()) / 1000.0, inputs, outputs, hashes=hashes if any_hashes else None)


# -- CSV ---------------------------------------------------------------------------------

_INT64_MAX = np.iinfo(np.int64).max


def _read_csv(text: str, source: str, wanted: dict[str, str]) -> tuple[dict[str, np.ndarray], list[int]]:
    """The wanted columns converted by kind (datetime, number, length >= 1, count >= 0),
    and each data row's line number. Columns are converted whole; only when that fails
    are the cells walked one by one to name the first bad line.

    Written for million-row files: rows are consumed as they are read and only the
    wanted cells (strings, which the garbage collector does not track) are kept.
    """
    lines = _lines(text)
    numbers = [number for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbers:
        raise InputError(Problem("", "the trace is empty", source))
    if len(numbers) < len(lines):
        lines = [lines[number - 1] for number in numbers]
    header_line, header_text = numbers[0], lines[0]
    header = [cell.strip() for cell in next(csv.reader([header_text]))]
    missing = [column for column in wanted if column not in header]
    if missing:
        raise InputError(
            Problem(f"line {header_line}", f"header lacks column(s) {', '.join(missing)} (header: {_clip(header_text)!r})", source)
        )
    numbers = numbers[1:]
    if not numbers:
        raise InputError(Problem("", "the trace has a header but no requests", source))
    width = len(header)
    cells: dict[str, list[str]] = {column: [] for column in wanted}
    targets = [(header.index(column), cells[column].append) for column in wanted]
    body = lines[1:]
    reader = csv.reader(body)
    index = -1
    try:
        for index, row in enumerate(reader):
            if len(row) != width:
                number = numbers[index]
                if body[index].count('"') % 2:  # csv joined the next line into this row
                    raise InputError(Problem(f"line {number}", "a quoted field is not closed on its line", source))
                raise InputError(Problem(f"line {number}", f"expected {width} fields ({','.join(header)}), got {len(row)}", source))
            for position, append in targets:
                append(row[position])
    except csv.Error as exc:
        where = numbers[min(reader.line_num, len(numbers)) - 1]
        raise InputError(Problem(f"line {where}", f"not valid CSV: {exc}", source)) from None
    if index + 1 != len(body):  # an unclosed quote swallowed a line yet left the field count right
        raise InputError(Problem("", "a quoted field spans lines; trace rows must be one line each", source))
    columns = {column: _convert(cells[column], kind, column, numbers, source) for column, kind in wanted.items()}
    return columns, numbers


def _convert(cells: list[str], kind: str, column: str, numbers: list[int], source: str) -> np.ndarray:
    def fail(index: int, message: str) -> InputError:
        return InputError(Problem(f"line {numbers[index]}", f"{column}: {message}", source))

    def first_bad(check: Callable[[str], str | None]) -> InputError:
        for index, cell in enumerate(cells):
            problem = check(cell.strip())
            if problem is not None:
                return fail(index, problem)
        return InputError(Problem("", f"{column}: cannot be read", source))  # pragma: no cover - checks are stricter than numpy

    if kind == "datetime":
        # Checked cell by cell: numpy alone would also take '', 'NaT', a bare date or a zone suffix.
        cells = [cell.strip() for cell in cells]
        for index, cell in enumerate(cells):
            if not _DATETIME.fullmatch(cell):
                raise fail(index, f"{_clip(cell)!r} is not a date and time like 2023-11-16 18:15:46.6805900")
        try:
            return np.array([cell.replace(" ", "T") for cell in cells], dtype="datetime64[ns]")
        except ValueError:
            raise first_bad(_datetime_cell) from None
    if kind == "number":
        try:
            values = np.fromiter(map(float, cells), dtype=np.float64, count=len(cells))
        except ValueError:
            raise first_bad(_number_cell) from None
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise fail(int(bad[0]), f"{_clip(cells[int(bad[0])].strip())!r} is not a finite number")
        return values
    try:
        values = np.fromiter(map(int, cells), dtype=np.int64, count=len(cells))
    except (ValueError, OverflowError):
        raise first_bad(_integer_cell) from None
    least = 1 if kind == "length" else 0
    bad = np.flatnonzero(values < least)
    if bad.size:
        raise fail(int(bad[0]), f"must be at least {least}, got {values[int(bad[0])]}")
    return values


def _datetime_cell(cell: str) -> str | None:
    try:
        np.datetime64(cell.replace(" ", "T"), "ns")
    except ValueError:
        return f"{_clip(cell)!r} is not a valid date and time"
    return None


def _integer_cell(cell: str) -> str | None:
    if not _INTEGER.fullmatch(cell):
        return f"{_clip(cell)!r} is not an integer"
    if len(cell.lstrip("+-")) > 19 or abs(int(cell)) > _INT64_MAX:  # more digits than int64 has: never int() them
        return f"{_clip(cell)!r} is too large"
    return None


def _number_cell(cell: str) -> str | None:
    if not _NUMBER.fullmatch(cell):
        return f"{_clip(cell)!r} is not a number"
    return None


# -- JSON --------------------------------------------------------------------------------


def _json_field(record: dict[str, Any], key: str, where: str, source: str, check: Callable[[object], str | None]) -> Any:
    """The record's JSON value at `key`, once `check` finds nothing wrong with it."""
    if key not in record:
        raise InputError(Problem(where, f"{key}: required field is missing", source))
    value = record[key]
    problem = check(value)
    if problem is not None:
        raise InputError(Problem(where, f"{key}: {problem}", source))
    return value


def _json_number(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_clip(json.dumps(value))} is not a number"
    if isinstance(value, int) and abs(value) > _INT64_MAX or isinstance(value, float) and not math.isfinite(value):
        return f"{_clip(str(value))} is not a finite number in range"
    return None


def _json_hash_ids(value: object) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return f"{_clip(json.dumps(value))} is not a list of integers"
    if any(abs(v) > _INT64_MAX for v in value):
        return "an id is out of the 64-bit range"
    return None


def _json_length(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_clip(json.dumps(value))} is not an integer"
    if value < 1:
        return f"must be at least 1, got {value}"
    if value > _INT64_MAX:
        return f"{_clip(str(value))} is too large"
    return None


# -- shared ------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """The lines, without a byte-order mark; CRLF and LF both end a line."""
    return text.removeprefix("\ufeff").splitlines()


def _trace(
    name: str,
    arrival_s: npt.ArrayLike,
    input_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    failed_dropped: int = 0,
    hashes: Sequence[tuple[int, ...]] | None = None,
) -> Trace:
    arrival = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    return Trace(
        name=name,
        arrival_s=arrival[order],
        input_tokens=np.asarray(input_tokens, dtype=np.int64)[order],
        output_tokens=np.asarray(output_tokens, dtype=np.int64)[order],
        failed_dropped=failed_dropped,
        prefix_hashes=None if hashes is None else tuple(hashes[int(i)] for i in order),
    )


def _stem(source: str) -> str:
    return PurePath(source).stem if source else "trace"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_PARSERS: dict[str, Callable[..., Trace]] = {
    "azure": parse_azure_csv,
    "mooncake": parse_mooncake_jsonl,
    "burstgpt": parse_burstgpt_csv,
}
