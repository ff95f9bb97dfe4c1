"""Measured serving rows, as `tandem profile fit` reads them from the files tools write.

Three formats, told apart by their content:

- a plain CSV whose header names columns among `model,gpu,tp,pp,prompt,batch,context,
  ttft_ms,itl_ms,tokens_per_s`: one replica configuration per row, `ttft_ms` the prefill
  of `batch` prompts of `prompt` tokens together, `itl_ms` one decode step of `batch`
  requests of `context` KV tokens each (default: `prompt`), `tokens_per_s` that step's
  tokens/s (read as `batch / tokens_per_s` seconds when `itl_ms` is empty);
- `vllm bench serve --save-result` JSON (`mean_ttft_ms`, `mean_tpot_ms`, `max_concurrency`,
  `total_input_tokens`, ...; the TP degree from `--metadata tp=N` or `--tp`);
- genai-perf's `profile_export_genai_perf` JSON (`time_to_first_token.avg`, ...,
  `input_config` with its concurrency) or CSV (`Metric,avg,...` rows).

A serving benchmark run at concurrency B is read as decode steps of B requests whose
context is the mean prompt plus half the mean output; its TTFT is a lone prefill only at
concurrency 1 (above it, a first token also waits for other requests' steps), so it is
used there only. Every mistake is an `InputError` naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from tandem.errors import InputError, Problem

Metric = Literal["ttft", "itl"]
PLAIN_COLUMNS = ("model", "gpu", "tp", "pp", "prompt", "batch", "context", "ttft_ms", "itl_ms", "tokens_per_s")
_COUNTS = ("tp", "pp", "prompt", "batch", "context")
_MEASURES = ("ttft_ms", "itl_ms", "tokens_per_s")
GENAI_PERF_CSV = {
    "Time To First Token (ms)": "ttft_ms",
    "Inter Token Latency (ms)": "itl_ms",
    "Input Sequence Length (tokens)": "input",
    "Output Sequence Length (tokens)": "output",
}


@dataclass(frozen=True)
class Observation:
    """One measured time: a prefill of `batch` prompts of `prompt` tokens together
    (`ttft`), or one decode step of `batch` requests of `context` KV tokens each (`itl`)."""

    metric: Metric
    tp: int
    pp: int
    prompt: int
    batch: int
    context: int
    seconds: float
    where: str  # file and row, for messages

    @property
    def config(self) -> tuple[str, int, int, int, int, int]:
        """What the prediction depends on (repetitions of one configuration share it)."""
        context = self.context if self.metric == "itl" else 0
        return (self.metric, self.tp, self.pp, self.prompt, self.batch, context)


def parse_measured(source: str, text: str, *, tp: int | None = None, concurrency: int | None = None) -> list[Observation]:
    """The observations of one file (`source` names it in messages). `tp` and `concurrency`
    stand in for what a benchmark's file does not record."""
    body = text.lstrip("\ufeff")
    if not body.strip():
        raise InputError(Problem("", f"empty: needs a CSV header naming columns among {','.join(PLAIN_COLUMNS)}, or a benchmark's JSON", source))
    if body.lstrip().startswith("{"):
        try:
            document = json.loads(body)
        except json.JSONDecodeError as exc:
            raise InputError(Problem("", f"not valid JSON: {exc.msg} (line {exc.lineno})", source)) from None
        if isinstance(document, dict) and "mean_tpot_ms" in document:
            return _vllm(source, document, tp, concurrency)
        if isinstance(document, dict) and isinstance(document.get("inter_token_latency"), dict):
            return _genai_perf_json(source, document, tp, concurrency)
        raise InputError(Problem("", "a JSON file must be a `vllm bench serve --save-result` result (mean_tpot_ms, ...) or a genai-perf profile export (inter_token_latency.avg, ...)", source))
    rows = list(csv.reader(io.StringIO(body)))
    if rows and rows[0] and rows[0][0].strip() == "Metric":
        return _genai_perf_csv(source, rows, tp, concurrency)
    return _plain(source, rows)


# ------------------------------------------------------------------ plain CSV


def _plain(source: str, rows: list[list[str]]) -> list[Observation]:
    header = [cell.strip() for cell in rows[0]]
    for index, name in enumerate(header):
        if name not in PLAIN_COLUMNS:
            raise InputError(Problem(f"line 1, column {index + 1}", f"{name!r} is not one of {','.join(PLAIN_COLUMNS)}", source))
        if header.index(name) != index:
            raise InputError(Problem(f"line 1, column {index + 1}", f"{name!r} appears twice", source))
    for required in ("tp", "prompt"):
        if required not in header:
            raise InputError(Problem("line 1", f"needs a {required!r} column (columns: {','.join(header)})", source))
    if not any(name in header for name in _MEASURES):
        raise InputError(Problem("line 1", "needs a measured column: ttft_ms, itl_ms or tokens_per_s", source))
    out: list[Observation] = []
    seen: dict[str, tuple[str, int]] = {}
    for number, cells in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue  # a blank line
        if len(cells) != len(header):
            raise InputError(Problem(f"line {number}", f"has {len(cells)} cells, the header {len(header)}", source))
        row = {name: cell.strip() for name, cell in zip(header, cells)}
        for name in ("model", "gpu"):
            if name in row:
                first = seen.setdefault(name, (row[name], number))
                if row[name] != first[0]:
                    raise InputError(Problem(f"line {number}, {name}", f"{row[name]!r} differs from {first[0]!r} (line {first[1]}): a profile is fitted to one {name}", source))
        counts = {name: _count(source, number, name, row.get(name, "")) for name in _COUNTS}
        for name, default in (("pp", 1), ("batch", 1)):
            counts[name] = counts[name] or default
        for name in ("tp", "prompt"):
            if counts[name] is None:
                raise InputError(Problem(f"line {number}, {name}", "is empty", source))
        tp_, pp_, prompt, batch = (int(counts[n] or 0) for n in ("tp", "pp", "prompt", "batch"))
        context = counts["context"] or prompt
        values = {name: _positive(source, number, name, row.get(name, "")) for name in _MEASURES}
        where = f"{source}: line {number}"
        if values["ttft_ms"] is not None:
            out.append(Observation("ttft", tp_, pp_, prompt, batch, context, values["ttft_ms"] / 1e3, where))
        itl = values["itl_ms"] / 1e3 if values["itl_ms"] is not None else None
        if itl is None and values["tokens_per_s"] is not None:
            itl = batch / values["tokens_per_s"]
        if itl is not None:
            out.append(Observation("itl", tp_, pp_, prompt, batch, context, itl, where))
        if values["ttft_ms"] is None and itl is None:
            raise InputError(Problem(f"line {number}", "measures nothing: ttft_ms, itl_ms and tokens_per_s are all empty", source))
    if not out:
        raise InputError(Problem("", "has a header but no rows", source))
    return out


def _count(source: str, number: int, name: str, cell: str) -> int | None:
    if not cell:
        return None
    try:
        value = int(cell)
    except ValueError:
        raise InputError(Problem(f"line {number}, {name}", f"must be a whole number, got {cell!r}", source)) from None
    if value < 1:
        raise InputError(Problem(f"line {number}, {name}", f"must be >= 1, got {value}", source))
    return value


def _positive(source: str, number: int, name: str, cell: str) -> float | None:
    if not cell:
        return None
    try:
        value = float(cell)
    except ValueError:
        raise InputError(Problem(f"line {number}, {name}", f"must be a number, got {cell!r}", source)) from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(Problem(f"line {number}, {name}", f"must be a positive number, got {cell!r}", source))
    return value


# ------------------------------------------------------------------ benchmark tools


def _number(source: str, document: dict[str, Any], path: str) -> float:
    """A positive number at a dotted `path` of the document."""
    value: Any = document
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        shown = "missing" if value is None else f"got {value!r}"
        raise InputError(Problem(path, f"must be a positive number, {shown}", source))
    return float(value)


def _whole(source: str, path: str, value: Any, given: int | None, option: str, hint: str) -> int:
    """A count the file records at `path` (a number or a numeric string), else the option's."""
    if value is None or value == "":
        if given is None:
            raise InputError(Problem(path, f"not in the file ({hint}) and no {option} given", source))
        return given
    try:
        number = int(str(value))
    except ValueError:
        raise InputError(Problem(path, f"must be a whole number, got {value!r}", source)) from None
    if number < 1:
        raise InputError(Problem(path, f"must be >= 1, got {number}", source))
    return number


def _run(source: str, tp: int, concurrency: int, prompt: float, output: float, ttft_ms: float, itl_ms: float) -> list[Observation]:
    """A benchmark run as observations: decode steps at the concurrency, and at
    concurrency 1 the TTFT as a lone prefill."""
    mean_prompt = max(1, round(prompt))
    context = mean_prompt + max(0, round(output / 2))
    out = []
    if concurrency == 1:
        out.append(Observation("ttft", tp, 1, mean_prompt, 1, mean_prompt, ttft_ms / 1e3, source))
    out.append(Observation("itl", tp, 1, mean_prompt, concurrency, context, itl_ms / 1e3, source))
    return out


def _vllm(source: str, document: dict[str, Any], tp: int | None, concurrency: int | None) -> list[Observation]:
    completed = _number(source, document, "completed")
    degree = _whole(source, "tp", document.get("tp", document.get("tensor_parallel_size")), tp, "--tp", "vllm bench serve --metadata tp=N")
    batch = _whole(source, "max_concurrency", document.get("max_concurrency"), concurrency, "--concurrency", "vllm bench serve --max-concurrency N")
    return _run(
        source,
        degree,
        batch,
        _number(source, document, "total_input_tokens") / completed,
        _number(source, document, "total_output_tokens") / completed,
        _number(source, document, "mean_ttft_ms"),
        _number(source, document, "mean_tpot_ms"),
    )


def _genai_perf_json(source: str, document: dict[str, Any], tp: int | None, concurrency: int | None) -> list[Observation]:
    for metric in ("time_to_first_token", "inter_token_latency"):
        unit = document[metric].get("unit", "ms") if isinstance(document.get(metric), dict) else "ms"
        if unit != "ms":
            raise InputError(Problem(f"{metric}.unit", f"must be 'ms', got {unit!r}", source))
    config: dict[str, Any] = document["input_config"] if isinstance(document.get("input_config"), dict) else {}
    loadgen: dict[str, Any] = config["loadgen"] if isinstance(config.get("loadgen"), dict) else {}
    recorded = config.get("concurrency", loadgen.get("concurrency"))
    batch = _whole(source, "input_config.concurrency", recorded, concurrency, "--concurrency", "genai-perf --concurrency N")
    degree = _whole(source, "tp", None, tp, "--tp", "genai-perf does not record it")
    return _run(
        source,
        degree,
        batch,
        _number(source, document, "input_sequence_length.avg"),
        _number(source, document, "output_sequence_length.avg"),
        _number(source, document, "time_to_first_token.avg"),
        _number(source, document, "inter_token_latency.avg"),
    )


def _genai_perf_csv(source: str, rows: list[list[str]], tp: int | None, concurrency: int | None) -> list[Observation]:
    header = [cell.strip() for cell in rows[0]]
    if "avg" not in header:
        raise InputError(Problem("line 1", "a genai-perf CSV's first table needs an 'avg' column", source))
    column = header.index("avg")
    found: dict[str, float] = {}
    for number, cells in enumerate(rows[1:], start=2):
        if not cells or not any(c.strip() for c in cells):
            break  # the end of the first table
        key = GENAI_PERF_CSV.get(cells[0].strip())
        if key is None:
            continue
        cell = cells[column].strip().replace(",", "") if len(cells) > column else ""
        value = _positive(source, number, "avg", cell)
        if value is None:
            raise InputError(Problem(f"line {number}, avg", f"{cells[0].strip()} is empty", source))
        found[key] = value
    for name, key in GENAI_PERF_CSV.items():
        if key not in found:
            raise InputError(Problem("", f"no {name!r} row", source))
    degree = _whole(source, "tp", None, tp, "--tp", "genai-perf does not record it")
    batch = _whole(source, "concurrency", None, concurrency, "--concurrency", "a genai-perf CSV does not record it")
    return _run(source, degree, batch, found["input"], found["output"], found["ttft_ms"], found["itl_ms"])
