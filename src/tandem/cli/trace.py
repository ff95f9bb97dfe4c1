"""`tandem trace`: fetch a public request trace (digest-checked), list the catalogue,
summarize a local trace file.

A download streams into a temporary file beside its destination, hashed while it is
written, and is renamed into place only when the digest matches: an interrupted or
tampered download never leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from tandem.cli.files import read_sources
from tandem.cli.guard import guard
from tandem.errors import InputError, Problem
from tandem.sim.traces import catalog
from tandem.sim.traces.formats import parse_trace

ENV_DIR = "TANDEM_TRACES"
_CHUNK = 1 << 20
_TIMEOUT_S = 60
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")

trace_app = typer.Typer(help="Request traces for the simulator: fetch public ones, list them, summarize a file.", no_args_is_help=True)


class TraceFormat(str, Enum):
    azure = "azure"
    mooncake = "mooncake"
    burstgpt = "burstgpt"


@trace_app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(help="A trace from `tandem trace list`.", show_default=False)],
    directory: Annotated[
        Path | None, typer.Option("--dir", help=f"Where to put it (default: ${ENV_DIR}, else ~/.cache/tandem/traces).", show_default=False)
    ] = None,
    sha256: Annotated[
        str | None, typer.Option("--sha256", help="Expect this digest (64 hex digits) instead of the catalogue's.", show_default=False)
    ] = None,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Do not check the digest at all.")] = False,
) -> None:
    """Download a public trace and check its sha256; a file already there and intact is kept."""
    guard(lambda: fetch_trace(name, directory, sha256, verify=not no_verify))


@trace_app.command("list")
def list_command() -> None:
    """The public traces `fetch` knows, with licence, digest and source."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = 200
    print_catalog(console)


@trace_app.command("info")
def info(
    file: Annotated[Path, typer.Argument(help="A trace file (Azure CSV, Mooncake JSONL or BurstGPT CSV).", show_default=False)],
    format: Annotated[TraceFormat | None, typer.Option("--format", help="Skip detection: azure, mooncake or burstgpt.", show_default=False)] = None,
) -> None:
    """Parse a local trace and print its summary: requests, span, rate, length statistics."""

    def run() -> None:
        text = read_trace_text(file)
        trace = parse_trace(text, str(file), None if format is None else format.value)
        print_summary(trace.summary(), Console(highlight=False, soft_wrap=True))

    guard(run)


# -- fetch -------------------------------------------------------------------------------


def default_directory() -> Path:
    configured = os.environ.get(ENV_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tandem" / "traces"


def fetch_trace(name: str, directory: Path | None, sha256: str | None, verify: bool = True) -> Path:
    """Make sure DIR/<file name> holds the named trace; returns its path."""
    entry = catalog.lookup(name)
    expected = _expected_digest(entry, sha256, verify)
    folder = directory if directory is not None else default_directory()
    option = "--dir" if directory is not None else ENV_DIR if os.environ.get(ENV_DIR) else "directory"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem(option, f"cannot create {str(folder)!r}: {exc.strerror or exc}")) from None
    target = folder / entry.file_name
    err = Console(stderr=True, highlight=False, soft_wrap=True)

    if target.is_file():
        if expected is None:
            err.print(f"{escape(entry.name)}: {escape(str(target))} is already there (not verified: --no-verify)")
            sys.stdout.write(f"{target}\n")
            return target
        if _file_digest(target) == expected:
            err.print(f"{escape(entry.name)}: {escape(str(target))} is already there, sha256 verified")
            sys.stdout.write(f"{target}\n")
            return target
        err.print(f"{escape(entry.name)}: {escape(str(target))} has another sha256; downloading it again")

    size, actual = _download(entry.name, entry.url, target, expected, err)
    checked = "sha256 verified" if expected is not None else f"not verified, sha256 {actual}"
    err.print(f"fetched {escape(entry.name)} ({escape(entry.licence)}) to {escape(str(target))}: {size:,} bytes, {checked}")
    sys.stdout.write(f"{target}\n")
    return target


def _expected_digest(entry: catalog.CatalogEntry, sha256: str | None, verify: bool) -> str | None:
    if sha256 is not None and not verify:
        raise InputError(Problem("--sha256", "contradicts --no-verify; give one of them"))
    if sha256 is not None:
        if not _HEX64.fullmatch(sha256):
            raise InputError(Problem("--sha256", f"must be 64 hexadecimal digits, got {sha256!r}"))
        return sha256.lower()
    if not verify:
        return None
    if entry.sha256 is None:
        raise InputError(
            Problem(
                "",
                "no sha256 is recorded for this trace, so a download cannot be checked; "
                "pass --sha256 HEX to check it against a digest you trust, or --no-verify to take it unchecked",
                entry.name,
            )
        )
    return entry.sha256


def _download(name: str, url: str, target: Path, expected: str | None, err: Console) -> tuple[int, str]:
    """Stream `url` into a temporary file beside `target`, then rename it into place if the
    digest is right; the temporary file never outlives this call."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                request = urllib.request.Request(url, headers={"User-Agent": "tandem-trace-fetch"})
                response = urllib.request.urlopen(request, timeout=_TIMEOUT_S)  # noqa: S310 - the catalogue's own URLs
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
                raise InputError(Problem("", f"cannot download {url}: {_reason(exc)}", name)) from None
            with response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
                with Progress(*columns, console=err, transient=True) as bar:
                    task = bar.add_task(f"fetching {name}", total=total)
                    while True:
                        try:
                            chunk = response.read(_CHUNK)
                        except (http.client.HTTPException, OSError) as exc:
                            raise InputError(Problem("", f"download from {url} broke off after {size:,} bytes: {_reason(exc)}", name)) from None
                        if not chunk:
                            break
                        try:
                            out.write(chunk)
                        except OSError as exc:
                            raise InputError(Problem("", f"cannot write {str(target)!r}: {exc.strerror or exc}", name)) from None
                        digest.update(chunk)
                        size += len(chunk)
                        bar.update(task, advance=len(chunk))
            if total is not None and size != total:
                raise InputError(Problem("", f"download from {url} ended after {size:,} of {total:,} bytes", name))
        actual = digest.hexdigest()
        if expected is not None and actual != expected:
            raise InputError(Problem("", f"sha256 mismatch: expected {expected}, got {actual}", name))
        os.chmod(temporary, 0o644)  # mkstemp makes it private; a downloaded public trace is not
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return size, actual


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(Problem("", f"cannot read: {exc.strerror or exc}", str(path))) from None
    return digest.hexdigest()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return getattr(reason, "strerror", None) or str(reason)
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# -- list and info -----------------------------------------------------------------------


def print_catalog(console: Console) -> None:
    table = Table(title="public request traces (tandem trace fetch NAME)", header_style="bold")
    for column in ("name", "format", "requests", "licence", "sha256", "source", "cite"):
        table.add_column(column, justify="right" if column == "requests" else "left", overflow="fold", no_wrap=column in ("name", "format"))
    for entry in catalog.CATALOG.values():
        table.add_row(
            entry.name,
            entry.format,
            f"{entry.requests:,}" if entry.requests is not None else "?",
            entry.licence,
            entry.sha256[:16] + "…" if entry.sha256 else "not recorded",
            entry.url,
            entry.citation,
        )
    console.print(table)


def read_trace_text(path: Path) -> str:
    (_, text), = read_sources([path], expected="a CSV or JSONL trace")
    return text


def print_summary(summary: dict, console: Console) -> None:
    duration = summary["duration_s"]
    rate = summary["rate_per_s"]
    rows = [
        ("trace", summary["name"]),
        ("requests", f"{summary['requests']:,}"),
        ("duration", f"{duration:,.1f} s ({duration / 60:,.1f} min)"),
        ("mean rate", f"{rate:,.3f} requests/s" if rate is not None else "n/a (all requests at one instant)"),
        ("input tokens", _lengths(summary["input_tokens"])),
        ("output tokens", _lengths(summary["output_tokens"])),
    ]
    if summary["failed_dropped"]:
        rows.append(("left out", f"{summary['failed_dropped']:,} failed requests (0 response tokens)"))
    for label, value in rows:
        console.print(f"{label:<14}{escape(value)}")


def _lengths(stats: dict) -> str:
    return f"mean {stats['mean']:,.1f}  p50 {stats['p50']:,.0f}  p99 {stats['p99']:,.0f}  max {stats['max']:,}  total {stats['total']:,}"
