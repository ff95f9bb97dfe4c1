"""Reading the files a user names; the only place the CLI touches the filesystem for input."""

from __future__ import annotations

import gc
import io
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from tandem.api.loading import Inputs, Reader, load_sources
from tandem.errors import InputError, Problem

# Files this large are read in pieces while they are parsed, never held whole
# (a 50,000-node dump is hundreds of megabytes); smaller ones are read first, all at once.
STREAM_ABOVE_BYTES = 8 << 20
PIECE_CHARS = 1 << 20
# What is read from a device, pipe or socket (no size to stream by) before giving up.
UNSIZED_LIMIT = 256 << 20
BINARY_PROBE = 8192  # bytes looked at for a NUL: text files have none
# Loading that takes longer than this shows a progress bar on stderr (on a terminal).
PROGRESS_AFTER_SECONDS = 1.0

Show = Callable[[str, int], None]  # (what is being read, bytes read of all the files so far)


def read_sources(paths: list[Path], expected: str = "YAML or JSON") -> list[tuple[str, str]]:
    """(name, text) of each file; every unreadable one is a problem, all reported at once."""
    sources: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            sources.append((str(path), _text(path)))
        except (OSError, UnicodeDecodeError, _NotText) as exc:
            problems.append(_unreadable(path, exc, expected))
    if problems:
        raise InputError(problems)
    return sources


class _NotText(ValueError):
    """Bytes that are no YAML or JSON text: said before the whole of them is read."""


def _text(path: Path) -> str:
    """A file's text. A regular file is read whole (large ones are streamed elsewhere); a
    device, pipe or socket is read up to UNSIZED_LIMIT bytes, so `/dev/zero` is an error,
    not all the memory; bytes with a NUL early on are binary, refused before decoding."""
    with path.open("rb") as handle:
        head = handle.read(BINARY_PROBE)
        _check_not_binary(head)
        rest = handle.read() if path.is_file() else handle.read(UNSIZED_LIMIT + 1 - len(head))
    data = head + rest
    if len(data) > UNSIZED_LIMIT and not path.is_file():
        raise _NotText(f"gives more than {UNSIZED_LIMIT >> 20} MiB and is not a regular file: save it to a file first")
    return data.decode("utf-8")


def _check_not_binary(head: bytes) -> None:
    if b"\0" in head:
        raise _NotText("is binary (a NUL byte near its start), not YAML or JSON text")


def _unreadable(path: Path, exc: OSError | UnicodeDecodeError | _NotText, expected: str) -> Problem:
    if isinstance(exc, _NotText):
        return Problem("", str(exc), str(path))
    if isinstance(exc, UnicodeDecodeError):
        return Problem("", f"is not UTF-8 text (expected {expected})", str(path))
    if isinstance(exc, IsADirectoryError):
        return Problem("", "is a directory, not a file", str(path))
    return Problem("", f"cannot read: {exc.strerror or exc}", str(path))


def load_files(paths: list[Path]) -> Inputs:
    """Every object in the files; large ones are read as they are parsed, with a progress
    bar on stderr once that takes a while (never on stdout, which `-o json` owns)."""
    sizes = [_size(path) for path in paths]
    streamed = [size > STREAM_ABOVE_BYTES for size in sizes]
    texts = iter(read_sources([path for path, big in zip(paths, streamed) if not big]))
    offsets = list(accumulate(sizes, initial=0))
    with progress_bar(offsets[-1], _stderr(), PROGRESS_AFTER_SECONDS) as show, _no_cycle_collection():
        sources = [
            (str(path), _pieces_of(path, offset, show) if big else _whole(next(texts)[1], path, offset + size, show))
            for path, size, offset, big in zip(paths, sizes, offsets, streamed)
        ]
        return load_sources(sources)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Loading makes millions of objects and no reference cycles: the cycle collector would
    only scan them again and again as they pile up (a fifth of the time for 50,000 nodes)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0  # read_sources says why


def _whole(text: str, path: Path, end: int, show: Show) -> Reader:
    def read() -> tuple[str]:
        show(f"reading {path.name}", end)
        return (text,)

    return read


def _pieces_of(path: Path, offset: int, show: Show) -> Reader:
    return lambda: _pieces(path, offset, show)


def _pieces(path: Path, offset: int, show: Show) -> Iterator[str]:
    """The file's text in pieces, as it is read; a file that cannot be read is a problem of its own."""
    try:
        with path.open("rb") as raw:
            _check_not_binary(raw.read(BINARY_PROBE))
        with path.open("rb") as raw, io.TextIOWrapper(raw, encoding="utf-8") as handle:  # as path.open(encoding=...) builds it
            while piece := handle.read(PIECE_CHARS):
                show(f"reading {path.name}", offset + raw.tell())
                yield piece
    except (OSError, UnicodeDecodeError, _NotText) as exc:
        raise InputError(_unreadable(path, exc, "YAML or JSON")) from None


def _stderr() -> Console:
    return Console(stderr=True)


@contextmanager
def progress_bar(total: int, console: Console, after: float = PROGRESS_AFTER_SECONDS) -> Iterator[Show]:
    """A transient progress bar on `console` that appears only once `after` seconds have
    passed, and only on a terminal: quick loads and pipes see nothing."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=False,  # stdout is the output's alone, even while the bar shows
        redirect_stderr=False,
    )
    task = progress.add_task("reading", total=total)

    def show(description: str, completed: int) -> None:
        progress.update(task, description=description, completed=completed)

    timer = threading.Timer(after, progress.start)
    timer.daemon = True
    if total and console.is_terminal:
        timer.start()
    try:
        yield show
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join()
        if progress.live.is_started:
            progress.stop()
