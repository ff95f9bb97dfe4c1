"""`tandem` commands. Exit status: 0 on valid input (even when nothing fits), 2 on invalid input."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape

# typer 0.29 (pinned) carries its own copy of click; its usage errors live here.
from typer._click.exceptions import NoArgsIsHelpError, UsageError

from tandem.api.base import _dns1123_subdomain
from tandem.api.crds import crds as generate_crds, file_name as crd_file_name, render as render_crds
from tandem.api.loading import load_texts
from tandem.cli.explain import explain_group
from tandem.cli.files import load_files
from tandem.cli.guard import INVALID_INPUT, guard, needs_extra
from tandem.cli.kubeconfig import connect_kube
from tandem.cli.output import print_table, render_json, render_yaml
from tandem.errors import InputError, Problem
from tandem.placement.from_inputs import plan_inputs
from tandem.topology.generate import generate_cluster, parse_shape

app = typer.Typer(
    name="tandem",
    help="Place, roll out and scale prefill/decode-disaggregated inference as one thing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
cluster_app = typer.Typer(help="Work with cluster files.", no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")
from tandem.cli.trace import trace_app  # noqa: E402 - kept beside the other sub-app

app.add_typer(trace_app, name="trace")
from tandem.cli.profile import profile_app  # noqa: E402 - kept beside the other sub-apps

app.add_typer(profile_app, name="profile")
from tandem.cli.topology import topology_app  # noqa: E402 - kept beside the other sub-apps

app.add_typer(topology_app, name="topology")


class Output(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"




@app.command()
def plan(
    files: Annotated[list[Path], typer.Argument(help="InferenceGroup files (and any other input files).", show_default=False)],
    cluster: Annotated[
        list[Path], typer.Option("--cluster", "-c", help="Nodes, bound Pods and ClusterTopology (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
) -> None:
    """Decide where every pod of the given InferenceGroups goes, or say why it cannot."""

    def run() -> None:
        outcome = plan_inputs(load_files(list(cluster) + list(files)))
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for warning in outcome.warnings:
            err.print(f"[yellow]warning:[/] {escape(warning)}")
        if output is Output.json:
            sys.stdout.write(render_json(outcome) + "\n")
        elif output is Output.yaml:
            sys.stdout.write(render_yaml(outcome))
        else:
            console = Console(highlight=False)
            if not console.is_terminal:
                console.width = 140
            print_table(outcome, console)

    guard(run)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Files to check: Nodes, Pods, ClusterTopology, InferenceGroup.", show_default=False)],
) -> None:
    """Check files; print every problem with its field path (exit 2) or a summary (exit 0)."""
    try:
        inputs = load_files(files)
    except InputError as exc:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for problem in exc.problems:
            err.print(f"[bold red]error:[/] {escape(str(problem))}")
        raise typer.Exit(INVALID_INPUT) from None
    from tandem.cli.render import backend_findings, report_findings

    problems, warnings = backend_findings(inputs)  # each group against the backend it names
    report_findings(problems, warnings)
    if problems:
        raise typer.Exit(INVALID_INPUT)
    console = Console(highlight=False, soft_wrap=True)
    for group in inputs.groups:
        if group.spec.topology_name not in inputs.topologies:
            console.print(
                f"note: {group.metadata.namespace}/{group.metadata.name}: ClusterTopology "
                f"{group.spec.topology_name!r} not among these files; its level names were not checked"
            )
    console.print(
        f"ok: {len(inputs.nodes)} node(s), {len(inputs.pods)} pod(s), "
        f"{len(inputs.topologies)} topology(ies), {len(inputs.groups)} group(s)"
    )


EXPLAIN_MAX_REPLICAS = 10_000  # explain's step tables grow with a role's count


@app.command()
def explain(
    files: Annotated[list[Path], typer.Argument(help="InferenceGroup files.", show_default=False)],
    scale_from: Annotated[
        str | None, typer.Option("--scale-from", help="Counts the scaling table starts from, e.g. prefill=1,decode=1 (default: the minimums).")
    ] = None,
) -> None:
    """Print the step tables a group goes through: rollout, scaling and rolling update."""

    def run() -> None:
        inputs = load_files(files)
        if not inputs.groups:
            raise InputError(Problem("", "no InferenceGroup in the input files: nothing to explain"))
        start = None
        if scale_from:
            start = {}
            for part in scale_from.split(","):
                role, sep, count = part.strip().partition("=")
                if not sep or not count.strip().isdigit():
                    raise InputError(Problem("--scale-from", f"{part.strip()!r} is not ROLE=COUNT"))
                start[role.strip()] = int(count)
        console = Console(highlight=False)
        if not console.is_terminal:
            console.width = 140
        too_many = [Problem("--scale-from", f"{role}={count:,} is more than explain's tables show ({EXPLAIN_MAX_REPLICAS:,} replicas per role)")
                    for role, count in (start or {}).items() if count > EXPLAIN_MAX_REPLICAS]
        for group in inputs.groups:
            where, prefix = inputs.source_of(group)
            too_many += [
                Problem(f"{prefix}.spec.roles[{i}].replicas" if prefix else f"spec.roles[{i}].replicas",
                        f"{role.replicas:,} is more than explain's tables show ({EXPLAIN_MAX_REPLICAS:,} replicas per role)", where)
                for i, role in enumerate(group.spec.roles) if role.replicas > EXPLAIN_MAX_REPLICAS
            ]
        if too_many:  # a step table per replica: refused before a row is built
            raise InputError(too_many)
        for group in inputs.groups:
            names = {r.name for r in group.spec.roles}
            if start is not None and set(start) != names:
                raise InputError(Problem("--scale-from", f"must name every role of {group.metadata.name} once: {', '.join(sorted(names))}"))
            explain_group(group, start, console)

    guard(run)


@app.command()
def render(
    files: Annotated[list[Path], typer.Argument(help="InferenceGroup files (and any other input files).", show_default=False)] = [],  # noqa: B006
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="native, volcano, koordinator, kai, kueue or workload-api (default: each group's spec.scheduler.backend).")
    ] = None,
    cluster: Annotated[
        list[Path], typer.Option("--cluster", "-c", help="Nodes and ClusterTopology (repeatable); with nodes, the backend's topology objects are rendered too.")
    ] = [],  # noqa: B006 - typer reads the default
    topology_only: Annotated[bool, typer.Option("--topology-only", help="Only the ClusterTopology, as the backend's own topology objects.")] = False,
    workload_api_version: Annotated[
        str, typer.Option("--workload-api-version", help="scheduling.k8s.io version for workload-api: v1alpha3, v1beta1, v1alpha2 or v1alpha1.")
    ] = "v1alpha3",
    queue: Annotated[str, typer.Option("--queue", help="Volcano/KAI queue or Kueue LocalQueue the pods go to, for groups without spec.scheduler.queue (a group's own queue wins).")] = "default",
    capabilities: Annotated[bool, typer.Option("--capabilities", help="Print the capability matrix (docs/capabilities.md) and exit.")] = False,
) -> None:
    """Print the YAML to `kubectl apply` to run groups on another scheduler (see docs/backends.md)."""
    from tandem.cli.render import run_render

    run_render(files, backend, cluster, topology_only, workload_api_version, queue, capabilities)


@app.command("crds")
def crds_command(
    out: Annotated[
        Path | None, typer.Option("--out", help="Write one file per CRD into this directory (created if missing) instead of stdout.", show_default=False)
    ] = None,
) -> None:
    """Print the CustomResourceDefinitions of ClusterTopology and InferenceGroup, generated from the models."""

    def run() -> None:
        objects = generate_crds()
        if out is None:
            sys.stdout.write(render_crds(objects))
            return
        try:
            out.mkdir(parents=True, exist_ok=True)
            for crd in objects:
                (out / crd_file_name(crd)).write_text(render_crds([crd]), encoding="utf-8")
        except OSError as exc:
            raise InputError(Problem("--out", f"cannot write {str(out)!r}: {exc.strerror or exc}")) from None
        names = ", ".join(crd_file_name(crd) for crd in objects)
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"wrote {escape(names)} to {escape(str(out))}")

    guard(run)


@app.command("certs")
def certs_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for ca.crt, tls.crt and tls.key (created if missing).", show_default=False)],
    dns: Annotated[list[str], typer.Option("--dns", help="A name the serving certificate is for (repeatable).")] = [],  # noqa: B006 - typer's list default
    days: Annotated[int, typer.Option(help="Days the certificates are valid.", min=1, max=3650)] = 365,
) -> None:
    """Make a CA and a serving certificate for the admission webhook (local use and tests)."""

    def run() -> None:
        from datetime import datetime, timezone

        with needs_extra("operator", "tandem certs"):
            from tandem.runtime.certs import make_certificates

        certificates = make_certificates(dns or ["localhost"], datetime.now(timezone.utc), days)
        try:
            written = certificates.write(out)
        except OSError as exc:
            raise InputError(Problem("--out", f"cannot write {str(out)!r}: {exc.strerror or exc}")) from None
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"wrote {escape(', '.join(p.name for p in written))} to {escape(str(out))}")

    guard(run)


class LogFormat(str, Enum):
    text = "text"
    json = "json"


class MetricsSource(str, Enum):
    """Where `tandem operator`'s autoscaler reads the groups' signals."""

    pods = "pods"  # each Ready replica's own /metrics (tandem.operator.pod_metrics)
    prometheus = "prometheus"  # a Prometheus server's query API (tandem.operator.prometheus_metrics, --prometheus-url)
    none = "none"  # nowhere: autoscaled groups keep their counts and say so (ScalingActive=False)


# The flags both process commands take, declared once (the same name, help and bounds in each).
KubeconfigFlag = Annotated[Path | None, typer.Option(help="Kubeconfig to use; without it, the in-cluster ServiceAccount.", show_default=False)]
LeaderElectFlag = Annotated[bool, typer.Option("--leader-elect", help="Elect one writer among replicas with a Lease.")]
LeaseNamespaceFlag = Annotated[str, typer.Option(help="Namespace of the Lease.")]
LeaseDurationFlag = Annotated[float, typer.Option(help="Seconds a standby waits after the last renewal it saw.", min=2.0)]
IdentityFlag = Annotated[str | None, typer.Option(help="Holder identity in the Lease (default: host and pid).", show_default=False)]
MetricsPortFlag = Annotated[int, typer.Option(help="Port of /metrics (0: off).", min=0, max=65535)]
HealthPortFlag = Annotated[int, typer.Option(help="Port of /healthz and /readyz (0: off).", min=0, max=65535)]
ResyncFlag = Annotated[float, typer.Option(help="A pass at least this often, in seconds.", min=1.0)]
WebhookCertDirFlag = Annotated[Path | None, typer.Option(help="tls.crt and tls.key; a directory without them gets a fresh self-signed pair.", show_default=False)]
WebhookHostFlag = Annotated[str, typer.Option(help="Host the API server reaches the webhook by (with --manage-webhook-config).")]
LogFormatFlag = Annotated[LogFormat, typer.Option(help="Log lines as text or JSON objects.")]


def _process_fields(kubeconfig: Path | None, leader_elect: bool, lease_namespace: str, lease_duration: float, identity: str | None, metrics_port: int,
                    health_port: int, resync: float, webhook_port: int, webhook_cert_dir: Path | None, manage_webhook_config: bool,
                    webhook_host: str) -> dict[str, Any]:
    """The shared flags as the fields of a process's config (runtime/process.ProcessConfig);
    no --identity: the config's own default, host and pid."""
    return {
        "kubeconfig": str(kubeconfig) if kubeconfig else None,
        "leader_elect": leader_elect,
        "lease_namespace": lease_namespace,
        "lease_duration": lease_duration,
        "metrics_port": metrics_port,
        "health_port": health_port,
        "resync": resync,
        "webhook_port": webhook_port,
        "webhook_cert_dir": str(webhook_cert_dir) if webhook_cert_dir else None,
        "manage_webhook_config": manage_webhook_config,
        "webhook_host": webhook_host,
        **({"identity": identity} if identity else {}),
    }


@app.command("operator")
def operator_command(
    kubeconfig: KubeconfigFlag = None,
    namespace: Annotated[list[str], typer.Option("--namespace", help="Watch and write groups only in this namespace (repeatable; default: all); pods are read everywhere.")] = [],  # noqa: B006
    leader_elect: LeaderElectFlag = False,
    lease_namespace: LeaseNamespaceFlag = "tandem-system",
    lease_duration: LeaseDurationFlag = 15.0,
    identity: IdentityFlag = None,
    metrics_port: MetricsPortFlag = 8080,
    health_port: HealthPortFlag = 8081,
    resync: ResyncFlag = 300.0,
    webhook_port: Annotated[int, typer.Option(help="Serve validating admission on this HTTPS port (0: off).", min=0, max=65535)] = 0,
    webhook_cert_dir: WebhookCertDirFlag = None,
    manage_webhook_config: Annotated[bool, typer.Option("--manage-webhook-config", help="Create and keep the ValidatingWebhookConfiguration pointing here.")] = False,
    webhook_host: WebhookHostFlag = "127.0.0.1",
    log_format: LogFormatFlag = LogFormat.text,
    provisioning: Annotated[
        bool, typer.Option("--provisioning", help="Units that do not fit ask for nodes with ProvisioningRequests, in groups that name a class.")
    ] = False,
    provisioning_class: Annotated[
        str | None,
        typer.Option("--provisioning-class", help="Implies --provisioning; the class for groups that name none (e.g. best-effort-atomic-scale-up.autoscaling.x-k8s.io).",
                     show_default=False),
    ] = None,
    backends: Annotated[
        list[str],
        typer.Option("--backends", help="Hand groups naming these schedulers to them: volcano, kai, koordinator, kueue, workload-api (comma list, or repeated; default: none, every group is placed by tandem's engine)."),
    ] = [],  # noqa: B006 - typer reads the default
    queue: Annotated[
        str, typer.Option("--queue", help="Volcano/KAI queue or Kueue LocalQueue for a delegated group without spec.scheduler.queue.")
    ] = "default",
    metrics_source: Annotated[
        MetricsSource,
        typer.Option("--metrics-source", help="Where the autoscaler reads signals by default: pods (each Ready replica's /metrics), "
                     "prometheus (a Prometheus server's query API, --prometheus-url) or none (groups with spec.autoscaling that name "
                     "no source in spec.autoscaling.metrics keep their counts; their ScalingActive condition says why)."),
    ] = MetricsSource.pods,
    prometheus_url: Annotated[
        str | None,
        typer.Option("--prometheus-url", help="The Prometheus server, http(s)://host[:port] (its scrape job relabelled as "
                     "examples/prometheus/prometheus.yml does): required by --metrics-source prometheus; with another source, "
                     "the server of groups whose spec.autoscaling.metrics.source is prometheus and names none.", show_default=False),
    ] = None,
    metrics_window: Annotated[
        float,
        typer.Option("--metrics-window", help="Seconds of metrics the autoscaler reads at each decision: rates, means and p90s over "
                     "this window (Knative's stable window).", min=1.0),
    ] = 60.0,
) -> None:
    """Run the controller against a Kubernetes API: informers, passes, leader election, metrics."""

    def run() -> None:
        with needs_extra("operator", "tandem operator"):
            from tandem.cluster.unit_autoscalers import UNIT_AUTOSCALER_KINDS
            from tandem.controller import OBSERVED_KINDS, ProvisioningSettings
            from tandem.kube.cluster import KubeCluster
            from tandem.runtime.logs import configure
            from tandem.operator.process import OperatorConfig, run as run_operator
            from tandem.operator.scope import informer_scopes
        if provisioning_class is not None:
            try:
                _dns1123_subdomain(provisioning_class)
            except ValueError as exc:
                raise InputError(Problem("--provisioning-class", str(exc))) from None
        settings = ProvisioningSettings(enabled=provisioning or provisioning_class is not None, default_class=provisioning_class)
        delegation = _delegation_settings(backends, queue)
        configure(log_format.value)
        shared = _process_fields(kubeconfig, leader_elect, lease_namespace, lease_duration, identity, metrics_port, health_port, resync, webhook_port,
                                 webhook_cert_dir, manage_webhook_config, webhook_host)
        defaults = _metrics_source(metrics_source, prometheus_url, metrics_window)
        config = OperatorConfig(namespaces=tuple(namespace), provisioning=settings, delegation=delegation, metrics=defaults, **shared)

        def connect(cfg: OperatorConfig, changed):  # type: ignore[no-untyped-def]
            # the informers re-list on their own period; --resync is how often a pass runs; a
            # delegated backend's kinds are optional: watched once the API server serves them;
            # so are HPAs and KEDA's ScaledObjects (one autoscaler per group: admission, the autoscaler pass)
            kinds = OBSERVED_KINDS + cfg.provisioning.kinds
            optional = cfg.delegation.kinds + UNIT_AUTOSCALER_KINDS
            return connect_kube(cfg.kubeconfig, lambda source: KubeCluster.connect(source, kinds=kinds, optional_kinds=optional,
                                                                                  namespaces=cfg.namespaces, scopes=informer_scopes(cfg.namespaces),
                                                                                  on_change=changed))

        raise typer.Exit(run_operator(config, connect))

    guard(run)


def _metrics_source(choice: MetricsSource, prometheus_url: str | None, window_s: float = 60.0) -> Any:
    """The operator's metrics defaults (`SourceDefaults`); a group's spec.autoscaling.metrics
    overrides them. A bad `--prometheus-url` is refused before anything connects."""
    from tandem.autoscaling.metrics_source import SourceDefaults

    if choice is MetricsSource.prometheus and prometheus_url is None:
        raise InputError(Problem("--prometheus-url", "--metrics-source prometheus needs the server's URL"))
    if prometheus_url is not None:
        from tandem.operator.prometheus_metrics import server_url

        try:
            server_url(prometheus_url)  # checked now, not at the first decision
        except ValueError as exc:
            raise InputError(Problem("--prometheus-url", str(exc).removeprefix("--prometheus-url: "))) from None
    return SourceDefaults(source=choice.value, prometheus_url=prometheus_url, window_s=window_s)


@app.command("topology-controller")
def topology_controller_command(
    kubeconfig: KubeconfigFlag = None,
    backends: Annotated[
        list[str],
        typer.Option("--backends", help="Keep these schedulers' topology objects too: volcano, kai, kueue, koordinator (comma list, or repeated; default: none, ClusterTopology status only)."),
    ] = [],  # noqa: B006 - typer reads the default
    leader_elect: LeaderElectFlag = False,
    lease_name: Annotated[str, typer.Option(help="Name of the Lease (not the operator's).")] = "tandem-topology-controller",
    lease_namespace: LeaseNamespaceFlag = "tandem-system",
    lease_duration: LeaseDurationFlag = 15.0,
    identity: IdentityFlag = None,
    metrics_port: MetricsPortFlag = 8080,
    health_port: HealthPortFlag = 8081,
    resync: ResyncFlag = 300.0,
    batch_window: Annotated[float, typer.Option(help="Seconds from the first change to the pass that sees it: a burst of node events is one pass.",
                                                min=0.0, max=60.0)] = 0.2,
    webhook_port: Annotated[int, typer.Option(help="Serve ClusterTopology admission on this HTTPS port (0: off).", min=0, max=65535)] = 0,
    webhook_cert_dir: WebhookCertDirFlag = None,
    manage_webhook_config: Annotated[bool, typer.Option("--manage-webhook-config", help="Create and keep the ValidatingWebhookConfiguration tandem-topology-controller pointing here.")] = False,
    webhook_host: WebhookHostFlag = "127.0.0.1",
    log_format: LogFormatFlag = LogFormat.text,
) -> None:
    """Keep every ClusterTopology's status, and the schedulers' topology objects (--backends), in step with the nodes."""

    def run() -> None:
        with needs_extra("operator", "tandem topology-controller"):
            from tandem.kube.cluster import KubeCluster
            from tandem.runtime.logs import configure
            from tandem.topology_controller.process import TopologyControllerConfig, register_backend_kinds, run as run_controller
        settings = _topology_settings(backends)
        try:
            _dns1123_subdomain(lease_name)
        except ValueError as exc:
            raise InputError(Problem("--lease-name", str(exc))) from None
        configure(log_format.value)
        shared = _process_fields(kubeconfig, leader_elect, lease_namespace, lease_duration, identity, metrics_port, health_port, resync, webhook_port,
                                 webhook_cert_dir, manage_webhook_config, webhook_host)
        config = TopologyControllerConfig(settings=settings, lease_name=lease_name, batch_window=batch_window, **shared)

        def connect(cfg: TopologyControllerConfig, changed):  # type: ignore[no-untyped-def]
            from tandem.topology_controller.reconcile import watched_kinds

            register_backend_kinds(cfg.settings)
            return connect_kube(cfg.kubeconfig, lambda source: KubeCluster.connect(source, kinds=watched_kinds(cfg.settings), on_change=changed))

        raise typer.Exit(run_controller(config, connect))

    guard(run)


def _delegation_settings(backends: list[str], queue: str):  # type: ignore[no-untyped-def]
    """`--backends` (`_backend_names`): delegated backends only; `--queue` a DNS-1123 subdomain."""
    from tandem.backends.delegated_kinds import DELEGATED_BACKENDS
    from tandem.controller import DelegationSettings

    names = _backend_names(backends, DELEGATED_BACKENDS, "; 'native' needs no flag")
    try:
        _dns1123_subdomain(queue)
    except ValueError as exc:
        raise InputError(Problem("--queue", str(exc))) from None
    return DelegationSettings(backends=names, queue=queue)


def _backend_names(values: list[str], known: tuple[str, ...] | list[str], hint: str = "") -> tuple[str, ...]:
    """The names of `--backends volcano,kai` or `--backends volcano --backends kai` (a
    kustomize component adds one each): each once, sorted; an unknown one is refused."""
    names: set[str] = set()
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if name not in known:
                raise InputError(Problem("--backends", f"unknown backend {name!r} (known: {', '.join(known)}{hint})"))
            names.add(name)
    return tuple(sorted(names))


def _topology_settings(backends: list[str]):  # type: ignore[no-untyped-def]
    """`--backends` (`_backend_names`) of the topology controller; kai and kueue together
    refused (their `Topology` kinds share a name)."""
    from tandem.topology_controller.kinds import BACKEND_KINDS
    from tandem.topology_controller.reconcile import TopologySettings, check_settings

    settings = TopologySettings(backends=_backend_names(backends, sorted(BACKEND_KINDS)))
    problems = check_settings(settings)
    if problems:
        raise InputError(problems)
    return settings


@app.command("apiserver")
def apiserver_command(
    kubeconfig: Annotated[Path, typer.Option(help="Write a kubeconfig pointing at this server here.", show_default=False)],
    cluster: Annotated[
        list[Path], typer.Option("--cluster", "-c", help="Nodes, bound Pods, ClusterTopology and InferenceGroups to start with (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).", min=0, max=65535)] = 0,
    ready_after: Annotated[float, typer.Option(help="Seconds from a pod's start to Ready.", min=0.0)] = 0.0,
    bind_latency: Annotated[float, typer.Option(help="Seconds from a pod's last scheduling gate going to its binding.", min=0.0)] = 0.0,
    crds: Annotated[bool, typer.Option("--crds/--no-crds", help="Start with tandem's CRDs installed.")] = True,
    default_toleration_seconds: Annotated[
        int, typer.Option(help="Seconds a pod stays on a node that is not Ready (or unreachable) unless it says otherwise.", min=0)
    ] = 300,
    provisioner: Annotated[
        bool, typer.Option("--provisioner", help="Serve ProvisioningRequests and answer them as a node autoscaler would, with new nodes.")
    ] = False,
    provision_after: Annotated[float, typer.Option(help="With --provisioner: seconds from accepting a request to its nodes.", min=0.0)] = 0.0,
    workload_api: Annotated[
        bool,
        typer.Option("--workload-api", help="Serve the Workload API (scheduling.k8s.io/v1alpha3), as kube-apiserver with "
                     "--feature-gates=GenericWorkload=true,CompositePodGroup=true --runtime-config=scheduling.k8s.io/v1alpha3=true."),
    ] = False,
    engines: Annotated[
        bool, typer.Option("--engines", help="Run an engine stand-in (SGLang or vLLM, timed by the serving model) for every pod whose container is one.")
    ] = False,
    engine_time_scale: Annotated[
        float, typer.Option(help="With --engines: multiply every duration a stand-in waits (model load, prefill, decode, preStop, grace period).", min=0.0)
    ] = 1.0,
    engine_lifecycle_scale: Annotated[
        float | None,
        typer.Option(help="With --engines: multiply the model load, preStop and grace period by this instead (requests keep --engine-time-scale).",
                     min=0.0, show_default=False),
    ] = None,
) -> None:
    """Serve a local Kubernetes API (plain HTTP, in memory, simulated kubelets) for kubectl and the operator."""

    def run() -> None:
        import signal
        import threading

        from tandem.cli.files import read_sources

        with needs_extra("apiserver", "tandem apiserver"):
            from tandem.apiserver.kubeconfig import write_kubeconfig
            from tandem.apiserver.pod_network import NoFreeBlock
            from tandem.apiserver.seed import cluster_objects
            from tandem.apiserver.server import ApiServer

        objects = cluster_objects(read_sources(list(cluster)))
        try:
            server = ApiServer(port=port, objects=objects, crds=crds, ready_after=ready_after, bind_latency=bind_latency,
                               default_toleration_seconds=default_toleration_seconds, provisioner=provisioner, provision_after=provision_after, workload_api=workload_api,
                               engines=engines, engine_time_scale=engine_time_scale,
                               engine_lifecycle_scale=engine_lifecycle_scale)
        except NoFreeBlock as exc:  # before the port: the stand-ins' pod addresses
            raise InputError(Problem("--engines", f"no pod address block for the engine stand-ins: {exc}")) from None
        except OSError as exc:
            raise InputError(Problem("--port", f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")) from None
        try:
            write_kubeconfig(kubeconfig, server.url)
        except OSError as exc:
            raise InputError(Problem("--kubeconfig", f"cannot write {str(kubeconfig)!r}: {exc.strerror or exc}")) from None
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        server.start()
        sys.stdout.write(f"tandem apiserver: serving on {server.url} (kubeconfig {kubeconfig})\n")
        sys.stdout.flush()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            server.stop()

    guard(run)


class Policy(str, Enum):
    tandem = "tandem"
    independent = "independent"
    sequential = "sequential"


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (see docs/controller.md).", show_default=False)],
    policy: Annotated[Policy, typer.Option(help="Placement policy the controller uses.")] = Policy.tandem,
    compare: Annotated[
        bool, typer.Option("--compare", help="Run the scenario's `compare:` list side by side (default: tandem and both placement baselines).")
    ] = False,
    out: Annotated[Path, typer.Option("--out", help="Directory for summary.json, the plots and index.html.")] = Path("out/simulate"),
    traces: Annotated[
        Path | None, typer.Option("--traces", help="Folder of fetched traces (default: $TANDEM_TRACES, else ~/.cache/tandem/traces).", show_default=False)
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            min=1,
            help="Run every run this many times (seed, seed+1, ...; traces replayed from other offsets) and report means and 95% intervals (default: the scenario's seeds).",
            show_default=False,
        ),
    ] = None,
    only: Annotated[
        list[str] | None, typer.Option("--run", help="Only this run of the compare list (repeatable).", show_default=False)
    ] = None,
) -> None:
    """Run a scenario in the simulated cluster with the real controller; write a report."""
    from tandem.cli.simulate import run_simulation

    def run() -> None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console.width = 180
        run_simulation(scenario, policy.value, compare, out, console, traces, seeds, only)

    guard(run)


@cluster_app.command("generate")
def cluster_generate(
    shape: Annotated[str, typer.Option(help="Levels, broadest first, the last being hosts: block=4,rack=4,host=8.")],
    gpus: Annotated[int, typer.Option(min=0, help="GPUs per node.")] = 8,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    topology_name: Annotated[str, typer.Option(help="metadata.name of the ClusterTopology.")] = "default",
) -> None:
    """Write Nodes (a v1 List) and a matching ClusterTopology as YAML."""

    def run() -> None:
        levels = parse_shape(shape, "--shape")
        topology, nodes = generate_cluster(levels, gpus, topology_name=topology_name)
        # Never write a file that `tandem validate` would reject: level and topology names
        # must be DNS-1123 labels. Problems are named after the option that caused them.
        _check_generated(topology)
        text = yaml.safe_dump_all(
            [topology, {"apiVersion": "v1", "kind": "List", "items": nodes}], sort_keys=False
        )
        if output is None:
            sys.stdout.write(text)
        else:
            try:
                output.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise InputError(Problem("--output", f"cannot write {str(output)!r}: {exc.strerror or exc}")) from None
            Console(stderr=True, highlight=False, soft_wrap=True).print(
                f"wrote {len(nodes)} nodes and ClusterTopology {topology_name!r} to {escape(str(output))}"
            )

    guard(run)


def _check_generated(topology: dict) -> None:
    """Raise InputError naming --shape or --topology-name if the ClusterTopology is invalid."""
    try:
        load_texts([("", json.dumps(topology))])
    except InputError as exc:
        problems = []
        for problem in exc.problems:
            option = "--topology-name" if problem.path.startswith("metadata") else "--shape"
            problems.append(Problem(option, problem.message))
        raise InputError(problems) from None


def main(argv: list[str] | None = None) -> int:
    """The console entry point: like `app()`, but a usage mistake is one `error:` line, exit 2."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        result = app(args=argv, standalone_mode=False)
    except NoArgsIsHelpError as exc:
        if exc.ctx is not None:
            typer.echo(exc.ctx.get_help())
        return INVALID_INPUT
    except UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        err.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(hint)}")
        return INVALID_INPUT
    except typer.Abort:
        return 130
    return result if isinstance(result, int) else 0


def entry() -> None:  # pragma: no cover - installed as the `tandem` command
    sys.exit(main())

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
