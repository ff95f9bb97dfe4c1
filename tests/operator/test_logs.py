"""The operator's log lines: in text, a record's fields follow its message; in JSON, they are keys."""

from __future__ import annotations

import json
import logging
import sys

from tandem.operator.logs import JsonFormatter, TextFormatter


def record(message: str, exc_info=None, **fields) -> logging.LogRecord:
    entry = logging.LogRecord("tandem.operator", logging.INFO, __file__, 1, message, (), exc_info)
    entry.__dict__.update(fields)
    return entry


def test_a_pass_line_in_text_carries_its_figures_and_leaves_out_what_is_empty():
    line = TextFormatter().format(record("pass", seconds=0.0123, writes=16, placed=16, errors=[], requeue_after=None))
    assert line.endswith(" INFO tandem.operator: pass seconds=0.0123 writes=16 placed=16")
    failed = TextFormatter().format(record("pass", writes=1, errors=["create Pod a: 409", "patch Pod b: 500"]))
    assert failed.endswith("pass writes=1 errors=create Pod a: 409,patch Pod b: 500")
    assert TextFormatter().format(record("operator started")).endswith("INFO tandem.operator: operator started")


def test_a_traceback_stays_below_the_line_with_its_fields():
    try:
        raise ValueError("boom")
    except ValueError:
        text = TextFormatter().format(record("pass failed", exc_info=sys.exc_info(), group="serving/llama"))
    first, *rest = text.splitlines()
    assert first.endswith("pass failed group=serving/llama") and rest[0] == "Traceback (most recent call last):"


def test_json_keeps_every_field_as_a_key():
    entry = json.loads(JsonFormatter().format(record("pass", seconds=0.5, writes=2)))
    assert entry["message"] == "pass" and entry["seconds"] == 0.5 and entry["writes"] == 2 and entry["level"] == "info"
