"""The operator's log lines: in text, a record's fields follow its message; in JSON, they are keys."""

from __future__ import annotations

import json
import logging
import sys

from tandem.runtime.logs import JsonFormatter, TextFormatter


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


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def info(self, since: int = 0) -> list[str]:
        return [r.getMessage() for r in self.records[since:] if r.levelno >= logging.INFO]


def test_the_operator_logs_a_line_per_decision_and_nothing_when_settled():
    """A replica's pods created and placed are one line naming group, unit and nodes; a
    scale-up says what it made; a settled cluster's passes say nothing at INFO."""
    from support.controller_world import design_group, kubelet, world
    from tandem.operator.runner import Operator

    store, now = world(design_group()), [1_764_000_000.0]
    operator = Operator(store, lambda: now[0])
    handler = Records()
    logger = logging.getLogger("tandem.operator")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # not `logger.level =`: setLevel clears the loggers' cached isEnabledFor answers

    def run(ticks: int) -> None:
        for _ in range(ticks):
            operator.tick(now[0])
            if kubelet(store):
                operator.changed()
            now[0] += 0.5

    try:
        run(60)
        first = handler.info()
        assert "group serving/llama unit 0: decode replica 0 created, placed on n-000, n-001" in first
        assert not any("llama-0-decode-0-1" in line for line in first), "no line per pod"
        settled = len(handler.records)
        operator.schedule.changed(now[0])  # a pass with nothing to do (a resync)
        run(4)
        assert operator.passes and handler.info(settled) == [], "a settled cluster logs nothing at INFO"
        store.patch("InferenceGroup", "serving", "llama", {"spec": {"replicas": 2}})
        operator.changed()
        before = len(handler.records)
        run(60)
        scaled = [line for line in handler.info(before) if line.startswith("group serving/llama unit 1: ")]
        created = [line for line in scaled if " created" in line]
        assert created == [
            "group serving/llama unit 1: peers file created",
            "group serving/llama unit 1: prefill replica 0 created, placed on n-010",
            "group serving/llama unit 1: decode replica 0 created, placed on n-008, n-009",
            "group serving/llama unit 1: prefill replica 1 created, placed on n-011",
            "group serving/llama unit 1: prefill replica 2 created, placed on n-014",
            "group serving/llama unit 1: decode replica 1 created, placed on n-012, n-013",
            "group serving/llama unit 1: prefill replica 3 created, placed on n-015",
        ], "4 prefill and 2 decode replicas of 1 and 2 pods: 6 lines, not 8"
        change = next(r for r in handler.records[before:] if r.getMessage() == created[1])
        assert TextFormatter().format(change).endswith("INFO tandem.operator: " + created[1]), "the fields are in the message"
        assert json.loads(JsonFormatter().format(change))["nodes"] == ["n-010"] and "in_message" not in json.loads(JsonFormatter().format(change))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
