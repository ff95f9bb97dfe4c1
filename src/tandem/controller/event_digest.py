"""One event per group, type and reason per pass: what many units share, said once.

A scale to 300 units on a 48-node cluster wrote 292 `Unschedulable` events, one per unit,
and as many log lines. `digest(actions)` folds a group's events of one (type, reason) into
the first of them: units that say the same are named together (`units 8-299 (292): no
block has room for ...`), distinct words are kept up to `_KINDS` of them, and the message
stays under the API's 1 KiB. The same situation gives the same words, so the world's own
aggregation (a repeat raises the Event's `count`) takes over across passes. Pure.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from tandem.cluster.writes import RecordEvent
from tandem.controller.actions import Action

_UNIT = re.compile(r"^unit (\d+): (.*)$", re.S)
_KINDS = 3  # distinct messages kept in one event
MESSAGE_LIMIT = 1024  # an Event's message, as the API server truncates it


def digest(actions: Sequence[Action]) -> list[Action]:
    """The actions with each (type, reason)'s events folded into the first one."""
    events: dict[tuple[str, str], list[RecordEvent]] = {}
    for action in actions:
        if isinstance(action, RecordEvent):
            events.setdefault((action.type, action.reason), []).append(action)
    if all(len(same) == 1 for same in events.values()):
        return list(actions)
    out: list[Action] = []
    for action in actions:
        if not isinstance(action, RecordEvent):
            out.append(action)
            continue
        same = events[(action.type, action.reason)]
        if same[0] is action:
            out.append(RecordEvent(action.involved, action.type, action.reason, fold([e.message for e in same])))
    return out


def fold(messages: Sequence[str]) -> str:
    """Messages about units (`unit N: words`) as one: units with the same words together."""
    if len(messages) == 1:
        return messages[0][:MESSAGE_LIMIT]
    by_words: dict[str, list[int]] = {}
    loose: list[str] = []
    for message in messages:
        match = _UNIT.match(message)
        if match:
            by_words.setdefault(match.group(2), []).append(int(match.group(1)))
        else:
            loose.append(message)
    parts = [f"{unit_list(units)}: {words}" for words, units in by_words.items()] + sorted(set(loose), key=loose.index)
    text = "; ".join(parts[:_KINDS])
    if len(parts) > _KINDS:
        left = sum(len(units) for units in list(by_words.values())[_KINDS:]) if len(by_words) > _KINDS else 0
        text += f"; and {len(parts) - _KINDS} more" + (f" ({left} units)" if left else "")
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def unit_list(units: Iterable[int]) -> str:
    """`unit 3`, or `units 0-2, 7 (4)`: ranges of consecutive indexes, and the count."""
    ordered = sorted(set(units))
    if len(ordered) == 1:
        return f"unit {ordered[0]}"
    runs: list[list[int]] = []
    for index in ordered:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    text = ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs[:8])
    if len(runs) > 8:
        text += ", …"
    return f"units {text} ({len(ordered)})"
