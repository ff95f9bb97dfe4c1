"""Reading the files a user names; the only place the CLI touches the filesystem for input."""

from __future__ import annotations

from pathlib import Path

from tandem.api.loading import Inputs, load_texts
from tandem.errors import InputError, Problem


def read_sources(paths: list[Path], expected: str = "YAML or JSON") -> list[tuple[str, str]]:
    """(name, text) of each file; every unreadable one is a problem, all reported at once."""
    sources: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            sources.append((str(path), path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            problems.append(Problem("", f"is not UTF-8 text (expected {expected})", str(path)))
        except IsADirectoryError:
            problems.append(Problem("", "is a directory, not a file", str(path)))
        except OSError as exc:
            problems.append(Problem("", f"cannot read: {exc.strerror or exc}", str(path)))
    if problems:
        raise InputError(problems)
    return sources


# About a second of reading: below it no progress display, above it one on stderr.
PROGRESS_ABOVE_BYTES = 8 << 20


def load_files(paths: list[Path]) -> Inputs:
    sources = read_sources(paths)
    size = sum(len(text) for _, text in sources)
    if size < PROGRESS_ABOVE_BYTES:
        return load_texts(sources)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
        progress.add_task(f"reading {len(sources)} file{'s' if len(sources) > 1 else ''} ({size / 2**20:.0f} MB)", total=None)
        return load_texts(sources)
