"""Request traces for the simulator: parse public traces, replay them, or synthesize one.

See docs/traces.md. Everything here is a pure function of its arguments; reading and
downloading files is the CLI's job (tandem.cli.trace).
"""

from tandem.sim.traces.catalog import CATALOG, CatalogEntry, lookup
from tandem.sim.traces.formats import (
    FORMATS,
    detect_format,
    parse_azure_csv,
    parse_burstgpt_csv,
    parse_mooncake_jsonl,
    parse_trace,
)
from tandem.sim.traces.synthetic import DEFAULT_INPUT, DEFAULT_OUTPUT, Lengths, synthetic
from tandem.sim.traces.trace import Trace
from tandem.sim.traces.transform import replay

__all__ = [
    "CATALOG",
    "CatalogEntry",
    "DEFAULT_INPUT",
    "DEFAULT_OUTPUT",
    "FORMATS",
    "Lengths",
    "Trace",
    "detect_format",
    "lookup",
    "parse_azure_csv",
    "parse_burstgpt_csv",
    "parse_mooncake_jsonl",
    "parse_trace",
    "replay",
    "synthetic",
]
