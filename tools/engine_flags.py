"""The command-line flags of a serving engine or router, read from its own argument parser.

Runs inside a virtual environment that holds the engine's package (standard library only
besides it, so it runs where tandem is not installed):

    python tools/engine_flags.py dump ENGINE          # the flag table, JSON, to stdout
    python tools/engine_flags.py parse ENGINE < argvs  # parse each argv (a JSON list of lists)

ENGINE is one of sglang, vllm, sglang-router, vllm-router. `dump` writes what
tests/examples/engine_flags/<engine>.json holds: every option string, how many values it
takes and its choices, with the package's version and the upstream file that builds the
parser. `parse` runs the real parser (and the router's own check of its arguments) on each
argv and prints, per argv, null or the parser's error. `make engine-flags` builds the
environments and runs both through tests/examples/test_engine_flags.py.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any

# Where each parser is built upstream (the path inside the package, at the version installed).
SOURCES = {
    "sglang": ("sglang", "sglang/srt/server_args.py (ServerArgs.add_cli_args)"),
    "vllm": ("vllm", "vllm/entrypoints/common/cli_args.py (make_arg_parser, as `vllm serve` builds it)"),
    "sglang-router": ("sglang-router", "sglang_router/launch_router.py (parse_router_args)"),
    "vllm-router": ("vllm-router", "vllm_router/launch_router.py (parse_router_args)"),
}


def _sglang() -> tuple[argparse.ArgumentParser, Callable[[list[str]], object]]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser, parser.parse_args


def _vllm() -> tuple[argparse.ArgumentParser, Callable[[list[str]], object]]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU here: the parser only needs a platform
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    return parser, parser.parse_args


def _router(module: str) -> tuple[argparse.ArgumentParser, Callable[[list[str]], object]]:
    launch = __import__(f"{module}.launch_router", fromlist=["parse_router_args"])
    args_module = __import__(f"{module}.router_args", fromlist=["RouterArgs"])
    parser = argparse.ArgumentParser(prog=f"{module}.launch_router")
    args_module.RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser, launch.parse_router_args


PARSERS: dict[str, Callable[[], tuple[argparse.ArgumentParser, Callable[[list[str]], object]]]] = {
    "sglang": _sglang,
    "vllm": _vllm,
    "sglang-router": lambda: _router("sglang_router"),
    "vllm-router": lambda: _router("vllm_router"),
}


def _values(action: argparse.Action) -> str:
    """How many values the flag takes: none, one, optional (0 or 1) or many."""
    if action.nargs == 0:
        return "none"
    if action.nargs is None or action.nargs == 1:
        return "one"
    if action.nargs == "?":
        return "optional"
    return "many"


def _choices(action: argparse.Action) -> list[str] | None:
    if action.choices is None:
        return None
    return sorted({str(getattr(choice, "value", choice)) for choice in action.choices})


def flag_table(engine: str) -> dict[str, Any]:
    parser, _ = PARSERS[engine]()
    package, source = SOURCES[engine]
    flags: dict[str, Any] = {}
    positionals = 0
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            positionals += 1 if action.nargs in (None, "?") else 2
            continue
        for option in action.option_strings:
            flags[option] = {"values": _values(action), "choices": _choices(action)}
    return {
        "engine": engine,
        "package": package,
        "version": importlib.metadata.version(package),
        "source": f"{package} {importlib.metadata.version(package)}: {source}",
        "positionals": positionals,
        "flags": dict(sorted(flags.items())),
    }


def dump_text(table: dict[str, Any]) -> str:
    """The table as JSON with one flag a line, so a new engine version reads as a small diff."""
    head = {key: value for key, value in table.items() if key != "flags"}
    lines = [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in sorted(head.items())]
    flags = [f"  {json.dumps(flag)}: {json.dumps(spec, sort_keys=True)}" for flag, spec in table["flags"].items()]
    return "{\n" + "\n".join(lines) + '\n "flags": {\n' + ",\n".join(flags) + "\n }\n}\n"


def parse_all(engine: str, argvs: list[list[str]]) -> list[str | None]:
    _, parse = PARSERS[engine]()
    results: list[str | None] = []
    for argv in argvs:
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                parse(argv)
        except SystemExit:
            results.append(errors.getvalue().strip()[-2000:] or "exit")
        except Exception as exc:  # the router's own check of its arguments raises
            results.append(f"{type(exc).__name__}: {exc}")
        else:
            results.append(None)
    return results


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("dump", "parse") or argv[1] not in PARSERS:
        print(f"usage: engine_flags.py dump|parse {'|'.join(PARSERS)}", file=sys.stderr)
        return 2
    command, engine = argv
    if command == "dump":
        sys.stdout.write(dump_text(flag_table(engine)))
    else:
        json.dump(parse_all(engine, json.load(sys.stdin)), sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
