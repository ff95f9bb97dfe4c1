"""Connecting to a cluster from a kubeconfig: one file a user gives, so whatever is wrong
with it is one line naming `--kubeconfig` (exit 2), never a traceback. Shared by every
command that takes `--kubeconfig` (the operator, the topology controller,
`tandem topology from-hypernodes`)."""

from __future__ import annotations

from typing import Callable, TypeVar

from tandem.errors import InputError, Problem

T = TypeVar("T")


def connect_kube(kubeconfig: str | None, connect: Callable[[str | None], T]) -> T:
    """`connect(kubeconfig)`; a kubeconfig that cannot be used is one line naming it."""
    import yaml
    from lightkube.core.exceptions import ConfigError

    try:
        return connect(kubeconfig)
    # A kubeconfig that is not YAML, or YAML without what a kubeconfig holds (lightkube
    # then fails on a missing key or a wrong type): the user's file, not a bug of ours.
    except (ConfigError, OSError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
        where = "--kubeconfig" if kubeconfig else "in-cluster config"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, KeyError):
            detail = f"not a kubeconfig: no {detail}"
        elif isinstance(exc, (TypeError, AttributeError)):
            detail = f"not a kubeconfig: a field has the wrong type ({detail})"
        raise InputError(Problem(where, f"cannot connect: {detail}")) from None
