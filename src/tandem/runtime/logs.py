"""Logs as text for a terminal or as one JSON object per line for a log pipeline
(`--log-format json`): time, level, logger, message, and any `extra` fields (in text,
as `key=value` after the message, so a pass's figures are on its line). A record whose
message already says its fields (`IN_MESSAGE`: a change line, "group serving/llama unit
0: decode replica 1 created, placed on n-3, n-4") shows them in JSON only."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

IN_MESSAGE = "in_message"  # an `extra` key: True when the message already says the fields
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", IN_MESSAGE}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, sort_keys=False)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...`; fields that are None or empty are left out."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if getattr(record, IN_MESSAGE, False):
            return line
        fields = [f"{k}={_text(v)}" for k, v in record.__dict__.items() if k not in _STANDARD and v not in (None, "", [], (), {})]
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # a traceback stays below the line
        return f"{head} {' '.join(fields)}{newline}{rest}"


def _text(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def configure(fmt: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("tandem")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request (each watch reconnect) is noise
