"""Backend name -> backend, with exactly the names `spec.scheduler.backend` allows."""

from __future__ import annotations

from typing import get_args

from tandem.api.resources import Backend as BackendName
from tandem.backends.base import Backend, BackendOptions
from tandem.backends.kai import KaiBackend
from tandem.backends.koordinator import KoordinatorBackend
from tandem.backends.kueue import KueueBackend
from tandem.backends.native import NativeBackend
from tandem.backends.volcano import VolcanoBackend
from tandem.backends.workload_api import PROFILES, WorkloadApiBackend
from tandem.errors import InputError, Problem

BACKENDS: dict[str, type[Backend]] = {
    backend.name: backend
    for backend in (NativeBackend, VolcanoBackend, KoordinatorBackend, KaiBackend, KueueBackend, WorkloadApiBackend)
}
NAMES: tuple[str, ...] = tuple(get_args(BackendName))
assert set(NAMES) == set(BACKENDS), "every name spec.scheduler.backend allows has a backend, and only those"


def get_backend(name: str, options: BackendOptions | None = None) -> Backend:
    """The backend called `name`; an unknown name is the user's mistake (InputError)."""
    backend = BACKENDS.get(name)
    if backend is None:
        raise InputError(Problem("--backend", f"must be one of {', '.join(NAMES)}, got {name!r}"))
    return backend(options)


def matrix_backends() -> list[Backend]:
    """Every backend once, and the Workload API once per version (newest first)."""
    out = [BACKENDS[name]() for name in NAMES if name != WorkloadApiBackend.name]
    out += [WorkloadApiBackend(BackendOptions(workload_api_version=version)) for version in PROFILES]
    return out
