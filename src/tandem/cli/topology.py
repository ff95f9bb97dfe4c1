"""`tandem topology from-hypernodes`: the ClusterTopology that HyperNodes Volcano already built describe.

Reads HyperNodes and Nodes from files (what `kubectl get hypernodes,nodes -o yaml`
prints) or from a cluster (`--kubeconfig`), derives the ClusterTopology with
`tandem.backends.volcano_adopt` and prints it for `kubectl apply -f -`. Levels that no
existing node label matches need tandem's tier labels on the nodes: `--label-nodes`
writes them (a merge patch per node, idempotent), `--labels-out` writes them as a
`kubectl label` script; otherwise stderr says how many nodes need which label.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from tandem.api.base import _dns1123_label
from tandem.api.kube import Node
from tandem.api.loading import load_documents, validation_problems
from tandem.backends.volcano import HYPERNODE_API_VERSION
from tandem.backends.volcano_adopt import Adoption, adopt_hypernodes, level_counts
from tandem.cli.files import read_sources
from tandem.cli.guard import guard, needs_extra
from tandem.cli.kubeconfig import connect_kube
from tandem.errors import ApiError, InputError, Problem

topology_app = typer.Typer(help="Work with cluster topologies.", no_args_is_help=True)

HYPERNODES_PATH = f"/apis/{HYPERNODE_API_VERSION}/hypernodes"
NODES_PATH = "/api/v1/nodes"
PAGE = 500  # objects per list request


@topology_app.command("from-hypernodes")
def from_hypernodes(
    files: Annotated[list[Path], typer.Argument(help="HyperNode and Node files (YAML or JSON, kubectl Lists too).", show_default=False)] = [],  # noqa: B006
    file: Annotated[list[Path], typer.Option("--file", "-f", help="A HyperNode or Node file (repeatable).", show_default=False)] = [],  # noqa: B006
    kubeconfig: Annotated[Path | None, typer.Option(help="Read HyperNodes and Nodes from this cluster instead of files.", show_default=False)] = None,
    name: Annotated[str, typer.Option(help="metadata.name of the ClusterTopology.")] = "default",
    label_nodes: Annotated[bool, typer.Option("--label-nodes", help="Write the tier labels the levels need on the nodes (with --kubeconfig).")] = False,
    labels_out: Annotated[
        Path | None, typer.Option("--labels-out", help="Write the tier labels the levels need as a `kubectl label` script.", show_default=False)
    ] = None,
) -> None:
    """Print the ClusterTopology that Volcano's existing HyperNodes describe, ready for `kubectl apply -f -`."""

    def run() -> None:
        paths = list(files) + list(file)
        try:
            _dns1123_label(name)
        except ValueError as exc:
            raise InputError(Problem("--name", str(exc))) from None
        if kubeconfig is not None and paths:
            raise InputError(Problem("--kubeconfig", "read from a cluster or from files, not both"))
        if kubeconfig is None and not paths:
            raise InputError(Problem("", "give HyperNode and Node files, or --kubeconfig to read them from a cluster"))
        if label_nodes and kubeconfig is None:
            raise InputError(Problem("--label-nodes", "needs --kubeconfig (the nodes are labelled in the cluster); with files, use --labels-out"))
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        if kubeconfig is None:
            hypernodes, nodes = read_files(paths)
            adoption = adopt_hypernodes(hypernodes, nodes, name)
        else:
            with needs_extra("operator", "tandem topology from-hypernodes --kubeconfig"):
                from tandem.kube.rest import Rest
            rest = connect_kube(str(kubeconfig), Rest.connect)
            try:
                hypernodes, nodes = read_cluster(rest)
                adoption = adopt_hypernodes(hypernodes, nodes, name)
                if label_nodes:
                    _label(rest, adoption, err)
            finally:
                rest.close()
        for warning in adoption.warnings:
            err.print(f"[yellow]warning:[/] {escape(warning)}")
        if labels_out is not None:
            try:
                labels_out.write_text(labels_script(adoption, name), encoding="utf-8")
            except OSError as exc:
                raise InputError(Problem("--labels-out", f"cannot write {str(labels_out)!r}: {exc.strerror or exc}")) from None
        if adoption.node_labels and not label_nodes:
            then = f"run {labels_out} before applying it" if labels_out else "label them with --label-nodes or --labels-out FILE"
            err.print(f"note: the ClusterTopology needs labels on {len(adoption.node_labels)} node(s) "
                      f"({escape(_summary(adoption))}); {escape(then)}")
        sys.stdout.write(yaml.safe_dump(adoption.topology, sort_keys=False))

    guard(run)


# ----------------------------------------------------------------------------- reading


def read_files(paths: list[Path]) -> tuple[list[dict[str, Any]], list[Node]]:
    """HyperNodes (as written) and Nodes (typed) of the files; anything else is a problem."""
    hypernodes: list[dict[str, Any]] = []
    nodes: list[Node] = []
    problems: list[Problem] = []
    for source, text in read_sources(paths):
        documents = [doc for doc in load_documents(source, text) if doc is not None]
        if not documents:
            problems.append(Problem("", "no documents: the file is empty", source))
        for number, doc in enumerate(documents, start=1):
            where = source if len(documents) == 1 else f"{source} (document {number})"
            for path, obj in _objects(doc):
                at = f"{path}." if path else ""
                if not isinstance(obj, dict):
                    problems.append(Problem(path, "must be a mapping (an object)", where))
                elif (obj.get("apiVersion"), obj.get("kind")) == (HYPERNODE_API_VERSION, "HyperNode"):
                    hypernodes.append(obj)
                elif (obj.get("apiVersion"), obj.get("kind")) == ("v1", "Node"):
                    try:
                        nodes.append(Node.model_validate(obj))
                    except ValidationError as exc:
                        problems += validation_problems(obj, exc, where, path)
                else:
                    problems.append(Problem(f"{at}kind", f"unsupported {obj.get('apiVersion')}/{obj.get('kind')} "
                                                         f"(expected {HYPERNODE_API_VERSION}/HyperNode or v1/Node)", where))
    if problems:
        raise InputError(problems)
    return hypernodes, nodes


def _objects(doc: Any) -> list[tuple[str, Any]]:
    """(path, object) of a document: a List's items (typed lists give their kind to items), else the document."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        items = doc["items"]
        if kind != "List":  # HyperNodeList, NodeList: the API server leaves apiVersion and kind off the items
            items = [{"apiVersion": doc.get("apiVersion") or "v1", "kind": kind[: -len("List")], **i} if isinstance(i, dict) else i for i in items]
        return [(f"items[{index}]", item) for index, item in enumerate(items)]
    return [("", doc)]


def read_cluster(rest: Any) -> tuple[list[dict[str, Any]], list[Node]]:
    """Every HyperNode and Node of the cluster (names and labels are all a Node needs here)."""
    try:
        raw_hypernodes = _list(rest, HYPERNODES_PATH)
    except ApiError as exc:
        if exc.code == 404:
            raise InputError(Problem("--kubeconfig", "the cluster serves no HyperNodes (404): is Volcano's HyperNode CRD installed?")) from None
        raise InputError(Problem("--kubeconfig", f"cannot list HyperNodes: {exc}")) from None
    if not raw_hypernodes:
        raise InputError(Problem("--kubeconfig", "the cluster has no HyperNode: nothing to adopt (the topology controller can write them instead)"))
    try:
        raw_nodes = _list(rest, NODES_PATH)
    except ApiError as exc:
        raise InputError(Problem("--kubeconfig", f"cannot list Nodes: {exc}")) from None
    hypernodes = [{"apiVersion": HYPERNODE_API_VERSION, "kind": "HyperNode", **h} for h in raw_hypernodes]
    nodes = [
        Node.model_validate({"apiVersion": "v1", "kind": "Node", "status": {"allocatable": {}},
                             "metadata": {"name": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {}}})
        for n in raw_nodes
    ]
    return hypernodes, nodes


def _list(rest: Any, path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        answer = rest.request("GET", path, params={"limit": PAGE, "continue": token}) or {}
        items += answer.get("items") or []
        token = (answer.get("metadata") or {}).get("continue") or None
        if token is None:
            return items


# ----------------------------------------------------------------------------- labels


def _label(rest: Any, adoption: Adoption, err: Console) -> None:
    """One merge patch of metadata.labels per node that needs one; idempotent, so a run
    stopped half-way is finished by running it again."""
    done = 0
    for node, labels in adoption.node_labels.items():
        try:
            rest.request("PATCH", f"{NODES_PATH}/{node}", body={"metadata": {"labels": labels}}, content_type="application/merge-patch+json")
        except ApiError as exc:
            raise InputError(Problem("--label-nodes", f"node {node!r}: {exc} (labelled {done} of {len(adoption.node_labels)}; "
                                                      "run again to finish)")) from None
        done += 1
    if done:
        err.print(f"labelled {done} node(s): {escape(_summary(adoption))}")


def _summary(adoption: Adoption) -> str:
    """`topology.tandem.dev/tier-2 on 4 node(s), ...`: which labels go to how many nodes."""
    counts = level_counts(adoption)
    removed = sum(1 for writes in adoption.node_labels.values() if None in writes.values())
    parts = [f"{key} on {count} node(s)" for key, count in sorted(counts.items())]
    if removed:
        parts.append(f"a stale tier label off {removed} node(s)")
    return ", ".join(parts)


def labels_script(adoption: Adoption, name: str) -> str:
    """A shell script of `kubectl label node ... --overwrite` lines, one per node, sorted."""
    lines = [
        "#!/bin/sh",
        f"# Node labels ClusterTopology {name!r} needs (tandem topology from-hypernodes): each level that",
        "# no existing node label matches is a tandem tier label naming the node's HyperNode of that tier.",
        "set -e",
    ]
    for node, labels in adoption.node_labels.items():
        args = [f"{key}={value}" if value is not None else f"{key}-" for key, value in labels.items()]
        lines.append(" ".join(["kubectl", "label", "node", shlex.quote(node), *map(shlex.quote, args), "--overwrite"]))
    if not adoption.node_labels:
        lines.append("# nothing to label: every level uses a label the nodes already carry")
    return "\n".join(lines) + "\n"
