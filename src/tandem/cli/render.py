"""`tandem render`: what a user would `kubectl apply` to run a group on another scheduler.

For each group, the backend named by `--backend` (default: the group's own
`spec.scheduler.backend`) renders, in this order: its topology objects (when `--cluster`
gives nodes; once, even for several groups), a PriorityClass when the group has a
priority, its own group objects (PodGroups, Workloads, ...) and the group's Pods, complete
and ready to apply. `--topology-only` renders just the topology objects of every
ClusterTopology given. Backend problems are `error:` lines with field paths (exit 2);
approximations are `warning:` lines (exit 0).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from tandem.api.loading import Inputs
from tandem.backends.base import Backend, BackendOptions
from tandem.backends.matrix import capability_matrix
from tandem.backends.registry import get_backend
from tandem.backends.workload_api import PROFILES
from tandem.cli.files import load_files
from tandem.cli.guard import INVALID_INPUT
from tandem.errors import InputError, Problem



def run_render(
    files: list[Path],
    backend: str | None,
    cluster: list[Path],
    topology_only: bool,
    workload_api_version: str,
    queue: str,
    capabilities: bool,
) -> None:
    if capabilities:
        sys.stdout.write(capability_matrix() + "\n")
        return
    try:
        inputs = load_files(list(cluster) + list(files))
        if workload_api_version not in PROFILES:
            raise InputError(Problem("--workload-api-version", f"must be one of {', '.join(PROFILES)}, got {workload_api_version!r}"))
        options = BackendOptions(queue=queue, workload_api_version=workload_api_version)
        objects, warnings = (_topology_objects if topology_only else _group_objects)(inputs, backend, options)
    except InputError as exc:
        _report(exc.problems, [])
        raise typer.Exit(INVALID_INPUT) from None
    _report([], warnings)
    chosen = f"backend {backend}" if backend else "each group's spec.scheduler.backend"
    header = f"# Rendered by tandem for {chosen}. Apply with: kubectl apply -f FILE\n"
    sys.stdout.write(header + yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True))


def backend_findings(inputs: Inputs, options: BackendOptions | None = None) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings) of every group against the backend it names, sourced like load errors."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for group in inputs.groups:
        backend = get_backend(group.spec.scheduler.backend, options)
        topology = inputs.topologies.get(group.spec.topology_name)
        problems += _sourced(inputs, group, backend.validate(group, topology))
        warnings += _sourced(inputs, group, backend.warnings(group, topology))
    return problems, warnings


def report_findings(problems: list[Problem], warnings: list[Problem]) -> None:
    _report(problems, warnings)


# ----------------------------------------------------------------------------- rendering


def _group_objects(inputs: Inputs, name: str | None, options: BackendOptions) -> tuple[list[dict[str, Any]], list[Problem]]:
    if not inputs.groups:
        raise InputError(Problem("", "no InferenceGroup in the input files: nothing to render (use --topology-only for topology objects)"))
    chosen: list[tuple[Any, Backend]] = [(group, get_backend(name or group.spec.scheduler.backend, options)) for group in inputs.groups]
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for group, backend in chosen:
        topology = inputs.topologies.get(group.spec.topology_name)
        problems += _sourced(inputs, group, backend.validate(group, topology) + backend.topology_problems(group, topology))
        warnings += _sourced(inputs, group, backend.warnings(group, topology))
    if problems:
        raise InputError(problems)
    objects: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str]] = set()
    for group, backend in chosen:
        topology = inputs.topologies.get(group.spec.topology_name)
        manifest = inputs.manifests.get((group.metadata.namespace, group.metadata.name))
        try:
            rendered = backend.render(group, topology, inputs.nodes, manifest)
        except InputError as exc:
            raise InputError(_sourced_topology(inputs, topology.metadata.name if topology else "", exc.problems)) from None
        for obj in rendered:
            meta = obj.get("metadata", {})
            key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta.get("name", ""))
            if key in seen:
                continue  # shared topology objects and PriorityClasses, once
            seen.add(key)
            objects.append(obj)
    return objects, warnings


def _topology_objects(inputs: Inputs, name: str | None, options: BackendOptions) -> tuple[list[dict[str, Any]], list[Problem]]:
    if name is None:
        named = {group.spec.scheduler.backend for group in inputs.groups}
        if len(named) != 1:
            raise InputError(Problem("--backend", "is required with --topology-only (no single backend is named by the groups given)"))
        name = named.pop()
    if not inputs.topologies:
        raise InputError(Problem("--cluster", "no ClusterTopology in the input files: nothing to export"))
    backend = get_backend(name, options)
    objects: list[dict[str, Any]] = []
    for topology_name in sorted(inputs.topologies):
        try:
            objects += backend.render_topology(inputs.topologies[topology_name], inputs.nodes)
        except InputError as exc:
            raise InputError(_sourced_topology(inputs, topology_name, exc.problems)) from None
    return objects, []


# ----------------------------------------------------------------------------- messages


def _sourced(inputs: Inputs, group: Any, problems: list[Problem]) -> list[Problem]:
    where, prefix = inputs.source_of(group)
    return [Problem(_join(prefix, p.path), p.message, where or f"{group.metadata.namespace}/{group.metadata.name}") for p in problems]


def _sourced_topology(inputs: Inputs, name: str, problems: list[Problem]) -> list[Problem]:
    where, prefix = inputs.sources.get(("ClusterTopology", name), ("", ""))
    return [p if p.source else Problem(_join(prefix, p.path), p.message, where) for p in problems]


def _join(prefix: str, path: str) -> str:
    if not prefix or not path:
        return prefix or path
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _report(problems: list[Problem], warnings: list[Problem]) -> None:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(str(warning))}")
    for problem in problems:
        err.print(f"[bold red]error:[/] {escape(str(problem))}")
