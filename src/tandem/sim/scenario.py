"""Scenario files for `tandem simulate`: a cluster, groups arriving, changes and faults over time.

```yaml
apiVersion: tandem.dev/v1alpha1
kind: Scenario
metadata: {name: demo}
spec:
  seed: 7
  durationSeconds: 3600
  cluster: {shape: "block=4,rack=4,host=8", gpus: 8}      # or {files: [nodes.yaml, ...]}
  bindLatencySeconds: 1
  startup:                                               # per role; "*" for the rest
    "*": {imagePullSeconds: 20, modelLoadMedianSeconds: 60, modelLoadSigma: 0.3}
  groups:
    - {at: 0, file: llama-70b.yaml}                      # relative to the scenario file
    - {at: 60, file: llama-70b.yaml, name: llama-70b-2}  # the same manifest again, under another name
  changes:
    - {at: 900, group: serving/llama-70b, patch: {spec: {replicas: 3}}}
  faults:
    - {at: 1800, rack: rack-5, recoverAfterSeconds: 600}  # any domain name; or nodes: [...]
  serving:                                               # request load per group (docs/serving.md)
    - group: serving/llama-70b
      # engine behaviour, defaults shown (docs/serving.md):
      # kvCache: {blockTokens: 16, preemption: recompute, swapSpaceGib: 4, swapGbPerSecond: 25}
      # prefixCaching: true, chunkedPrefill: false, maxNumBatchedTokens: 8192
      # coldStart: {loadGbPerSecond: 2, engineStartSeconds: 30}   # or {modelLoadSeconds: 120}
      # drain: {enabled: true}                                    # gracePeriodSeconds: pod's, else 30
      model: llama-3.1-70b                               # a built-in profile, or a file beside the scenario
      gpu: h100-sxm
      slo: {ttftSeconds: 2, itlSeconds: 0.1}
      trace: {name: azure-conv-2023, rate: 4, startSeconds: 0, endSeconds: 1800}   # or file: ...
      # synthetic: {rate: 5, arrivals: gamma, burstiness: 3, input: {...}, output: {...}}
  seeds: 5                                               # repetitions (seed, seed+1, ...; --seeds overrides)
  speedFactor: 1.0                                       # serving GPUs' speed (0.7: every engine cost 1/0.7 as long)
  compare:                                               # the runs `tandem simulate --compare` puts side by side
    - {name: fixed-ratio, autoscaling: FixedRatio}
    - {name: band-raise, autoscaling: PreferredBand, autoscalingPatch: {ratioEnforcement: raiseShort}}
    - {name: fixed-ratio-slow, autoscaling: FixedRatio, speedFactor: 0.7}
    - {name: no-affinity, affinity: drop}
```
Pure: `load_scenario` takes texts; the CLI reads the files (and the traces).

Repetitions (`replicate` k of `seeds`): seed k runs everything random with `seed + k` (model
load times, synthetic arrivals and lengths), and replays each recorded trace from a
different point of its window: the window is rotated by frac(k × 0.618...) of its span
(the golden-ratio sequence spreads any number of offsets evenly, and k = 0 is the
unrotated replay), the requests before that point following those after it one mean gap
later. So every seed serves the same requests at the same rate, in another order in time.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Literal

import numpy as np
import yaml
from pydantic import Field, ValidationError, model_validator

from tandem.api.base import StrictModel
from tandem.api.loading import load_documents, load_texts
from tandem.api.merge import merge_patch
from tandem.api.resources import InferenceGroup
from tandem.api.validation import check_group
from tandem.errors import InputError, Problem
from tandem.sim.load import ServingLoad
from tandem.sim.pod_lifecycle import Startup
from tandem.sim.runner import Change, Fault, Scenario, Variant
from tandem.sim.serving import GpuProfile, ModelProfile, gpu_profile, model_profile
from tandem.sim.serving.cold_start import ENGINE_START_SECONDS, LOAD_GB_PER_SECOND, load_seconds
from tandem.sim.serving.profiles import parse_profile
from tandem.sim.traces import Lengths, Trace, parse_trace, replay, synthetic
from tandem.topology.generate import generate_cluster, parse_shape


class StartupSpec(StrictModel):
    image_pull_seconds: float = Field(20.0, ge=0)
    model_load_median_seconds: float = Field(60.0, gt=0)
    model_load_sigma: float = Field(0.3, ge=0, le=3)


class ClusterSpec(StrictModel):
    shape: str | None = None
    gpus: int = Field(8, ge=0)
    files: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> "ClusterSpec":
        if (self.shape is None) == (not self.files):
            raise ValueError("give either shape (with gpus) or files")
        return self


class GroupArrival(StrictModel):
    at: float = Field(ge=0)
    file: str | None = None
    group: dict[str, Any] | None = None
    # The group under another name: one manifest deployed several times (one group per arrival).
    name: str | None = Field(default=None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

    @model_validator(mode="after")
    def _one_source(self) -> "GroupArrival":
        if (self.file is None) == (self.group is None):
            raise ValueError("give either file or group")
        return self


class ChangeSpec(StrictModel):
    at: float = Field(ge=0)
    group: str = Field(pattern=r"^[a-z0-9-]+/[a-z0-9-]+$")  # namespace/name
    patch: dict[str, Any]


class FaultSpec(StrictModel):
    at: float = Field(ge=0)
    nodes: list[str] = Field(default_factory=list)
    rack: str | None = None
    recover_after_seconds: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _target(self) -> "FaultSpec":
        if bool(self.nodes) == (self.rack is not None):
            raise ValueError("give either nodes or rack")
        return self


class SloSpec(StrictModel):
    ttft_seconds: float = Field(gt=0)
    itl_seconds: float = Field(gt=0)


class TraceSpec(StrictModel):
    """A recorded trace: a catalogue name (`tandem trace list`) or a file beside the scenario."""

    name: str | None = None
    file: str | None = None
    format: Literal["azure", "mooncake", "burstgpt"] | None = None
    rate: float = Field(1.0, gt=0)  # replay at this multiple of the recorded request rate
    start_seconds: float = Field(0.0, ge=0)
    end_seconds: float | None = Field(None, gt=0)
    limit: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> "TraceSpec":
        if (self.name is None) == (self.file is None):
            raise ValueError("give either name or file")
        if self.end_seconds is not None and self.end_seconds <= self.start_seconds:
            raise ValueError("endSeconds must be after startSeconds")
        return self


class LengthSpec(StrictModel):
    distribution: Literal["lognormal", "fixed"] = "lognormal"
    median: float = Field(gt=0)
    sigma: float = Field(1.0, ge=0)
    maximum: int = Field(16_384, ge=1)


class SyntheticSpec(StrictModel):
    """A seeded synthetic load (docs/traces.md); the scenario's seed drives it."""

    rate: float = Field(gt=0)  # requests per second on average
    arrivals: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = Field(1.0, gt=0, le=20)  # coefficient of variation of gamma inter-arrival times
    input: LengthSpec = Field(default_factory=lambda: LengthSpec(median=1024, sigma=1.0, maximum=16_384))
    output: LengthSpec = Field(default_factory=lambda: LengthSpec(median=128, sigma=0.9, maximum=4_096))

    def generate(self, seed: int, duration_s: float) -> Trace:
        lengths = [Lengths(x.distribution, x.median, x.sigma, x.maximum) for x in (self.input, self.output)]
        return synthetic(seed, duration_s, self.rate, self.arrivals, self.burstiness, lengths[0], lengths[1], name="synthetic")


class KvCacheSpec(StrictModel):
    """Decode KV paging (vLLM): blocks allocated as tokens are produced, preemption when out of them."""

    # `default=` by keyword, here and in the two specs below: type checkers take only that
    # as a default, and ServingSpec makes these three with no arguments (default_factory).
    block_tokens: int = Field(default=16, ge=1, le=1024)  # vLLM's --block-size default
    preemption: Literal["recompute", "swap"] = "recompute"  # vLLM's default is recompute
    swap_space_gib: float = Field(default=4.0, ge=0, le=1024)  # host memory per GPU for swapped KV (vLLM v0 --swap-space)
    swap_gb_per_second: float = Field(default=25.0, gt=0, le=1000)  # HBM <-> host copy per GPU (PCIe)


class ColdStartSpec(StrictModel):
    """Time from a pod being bound to serving: image pull (spec.startup), then loading the
    weights each node holds at `loadGbPerSecond` (GB/s per node) plus a fixed engine start
    (CUDA graphs, NCCL, memory profiling); `modelLoadSeconds` replaces that computation."""

    load_gb_per_second: float = Field(default=LOAD_GB_PER_SECOND, gt=0, le=1000)
    engine_start_seconds: float = Field(default=ENGINE_START_SECONDS, ge=0, le=3600)
    model_load_seconds: float | None = Field(default=None, gt=0, le=86400)


class DrainSpec(StrictModel):
    """Scale-down and rolling updates drain replicas: no new requests, in-flight work
    finishes, for at most the grace period (default: the pod's terminationGracePeriodSeconds)."""

    enabled: bool = True
    grace_period_seconds: float | None = Field(default=None, ge=0, le=86400)


class ServingSpec(StrictModel):
    group: str = Field(pattern=r"^[a-z0-9-]+/[a-z0-9-]+$")  # namespace/name
    model: str
    gpu: str
    # Default: the group's spec.autoscaling.prefillRole/decodeRole, else prefill/decode.
    prefill_role: str | None = None
    decode_role: str | None = None
    slo: SloSpec
    trace: TraceSpec | None = None
    synthetic: SyntheticSpec | None = None
    start_at: float = Field(0.0, ge=0)  # when the first request arrives, in scenario time
    metrics_window_seconds: float = Field(60.0, gt=0)
    cluster_bandwidth_gbps: float = Field(100.0, gt=0)  # between nodes sharing no domain
    kv_cache: KvCacheSpec = Field(default_factory=KvCacheSpec)
    prefix_caching: bool = True  # vLLM V1's default; needs a trace with prefix hashes (Mooncake)
    chunked_prefill: bool = False
    max_num_batched_tokens: int = Field(8192, ge=16, le=1_048_576)  # prefill tokens per iteration
    cold_start: ColdStartSpec = Field(default_factory=ColdStartSpec)
    drain: DrainSpec = Field(default_factory=DrainSpec)

    @model_validator(mode="after")
    def _one_source(self) -> "ServingSpec":
        if (self.trace is None) == (self.synthetic is None):
            raise ValueError("give either trace or synthetic")
        return self


class VariantSpec(StrictModel):
    """One run of `--compare`: the same scenario with a placement policy, an autoscaling
    policy (and any other autoscaling setting, as a merge patch) for every group that
    autoscales, the groups' affinity rules dropped, or slower serving GPUs."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    placement: Literal["tandem", "independent", "sequential"] = "tandem"
    autoscaling: Literal["FixedRatio", "PreferredBand", "SLO", "Independent"] | None = None
    # JSON merge patch of spec.autoscaling (after `autoscaling`), e.g. the Independent
    # baseline's targets or ratioEnforcement, so every variant can be tuned on its own.
    autoscaling_patch: dict[str, Any] | None = None
    affinity: Literal["keep", "drop"] = "keep"
    speed_factor: float = Field(1.0, gt=0, le=10)  # times the scenario's speedFactor


class ScenarioSpec(StrictModel):
    seed: int = 0
    duration_seconds: float = Field(gt=0)
    cluster: ClusterSpec
    bind_latency_seconds: float = Field(1.0, ge=0)
    resync_seconds: float = Field(60.0, gt=0)
    startup: dict[str, StartupSpec] = Field(default_factory=dict)
    groups: list[GroupArrival] = Field(min_length=1)
    changes: list[ChangeSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)
    serving: list[ServingSpec] = Field(default_factory=list)
    autoscale_tick_seconds: float = Field(5.0, gt=0)
    compare: list[VariantSpec] = Field(default_factory=list)
    seeds: int = Field(1, ge=1, le=1000)  # repetitions `tandem simulate` runs (--seeds overrides)
    # The serving GPUs' speed against their profiles: FLOP/s and memory and NVLink bandwidth
    # times this, fixed engine overheads divided by it (0.7: a pessimistic, 30% slower engine).
    speed_factor: float = Field(1.0, gt=0, le=10)

    @model_validator(mode="after")
    def _unique(self) -> "ScenarioSpec":
        names = [v.name for v in self.compare]
        if len(set(names)) != len(names):
            raise ValueError(f"compare: names must be unique, got {', '.join(names)}")
        groups = [s.group for s in self.serving]
        if len(set(groups)) != len(groups):
            raise ValueError("serving: one entry per group")
        return self


class ScenarioFile(StrictModel):
    api_version: Literal["tandem.dev/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: ScenarioSpec


def load_scenario(
    source: str,
    text: str,
    read: Callable[[str], tuple[str, str]],
    read_trace: Callable[[str], tuple[str, str]] | None = None,
    replicate: int = 0,
) -> Scenario:
    """A runnable Scenario from the scenario text; `read(path)` returns (name, text) of a
    file the scenario names, `read_trace(name)` that of a catalogue trace; `replicate` k
    is the k-th repetition (see the module docstring). Raises InputError with field paths
    on any mistake."""
    documents = load_documents(source, text)  # the hardened reader: duplicate keys, alias bombs, depth, huge numbers
    if len(documents) != 1:
        raise InputError(Problem("", f"a scenario file holds one YAML document, not {len(documents)}", source))
    try:
        parsed = ScenarioFile.model_validate(documents[0])
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        path = ".".join(str(part) for part in error["loc"])
        raise InputError(Problem(path, error["msg"].removeprefix("Value error, "), source)) from None
    spec = parsed.spec
    if spec.cluster.shape is not None:
        topology, nodes = generate_cluster(parse_shape(spec.cluster.shape, "spec.cluster.shape", source), spec.cluster.gpus)
        cluster = [topology, *nodes]
    else:
        inputs = load_texts([read(path) for path in spec.cluster.files])
        cluster = [t.model_dump(by_alias=True, exclude_none=True) for t in inputs.topologies.values()]
        cluster += [n.model_dump(by_alias=True, exclude_none=True) for n in inputs.nodes]
    arrivals: list[tuple[float, dict[str, Any]]] = []
    for index, arrival in enumerate(spec.groups):
        if arrival.file is not None:
            name, body = read(arrival.file)
            documents = [d for d in load_documents(name, body) if d]
        else:
            name, documents = f"{source} spec.groups[{index}]", [arrival.group]
        load_texts([(name, yaml.safe_dump_all(documents))])  # validate the groups as `tandem validate` would
        found = [doc for doc in documents if doc.get("kind") == "InferenceGroup"]
        if arrival.name is not None:
            if len(found) != 1:
                raise InputError(Problem(f"spec.groups[{index}].name", f"renames one group; {name} holds {len(found)}", source))
            found = [{**found[0], "metadata": {**found[0]["metadata"], "name": arrival.name}}]
        for doc in found:
            key = f"{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}"
            if any(f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}" == key for _, g in arrivals):
                raise InputError(Problem(f"spec.groups[{index}]", f"group {key} arrives twice (give each arrival its own name)", source))
        arrivals += [(arrival.at, doc) for doc in found]
    racks = _racks(cluster)
    faults = []
    for index, fault in enumerate(spec.faults):
        fault_nodes = tuple(fault.nodes) if fault.nodes else tuple(racks.get(fault.rack or "", ()))
        if not fault_nodes:
            raise InputError(Problem(f"spec.faults[{index}].rack", f"no rack {fault.rack!r} in the cluster", source))
        faults.append(Fault(fault.at, fault_nodes, fault.recover_after_seconds))
    changes = []
    for c in spec.changes:
        group_namespace, group_name = c.group.split("/")  # ChangeSpec's pattern: exactly one "/"
        changes.append(Change(c.at, group_namespace, group_name, c.patch))
    startup = {
        role: Startup(s.image_pull_seconds, s.model_load_median_seconds, s.model_load_sigma) for role, s in spec.startup.items()
    }
    groups = {f"{g['metadata'].get('namespace', 'default')}/{g['metadata']['name']}": g for _, g in arrivals}
    seed = spec.seed + replicate
    serving = [
        _serving_load(index, entry, groups, seed, spec.duration_seconds, source, read, read_trace, replicate, spec.speed_factor)
        for index, entry in enumerate(spec.serving)
    ]
    offsets = {load.key: offset for load, offset in serving}
    for (load, _), entry in zip(serving, spec.serving):
        # the serving roles' pods become Ready only once their engine has loaded the model
        for role in (load.prefill_role, load.decode_role):
            base = startup.get(role) or startup.get("*") or Startup()
            startup[f"{load.key}/{role}"] = Startup(
                base.image_pull_s, cold_start_seconds(load.model, load.pods_per_replica.get(role, 1), entry.cold_start), base.model_load_sigma
            )
    variants = [Variant(v.name, v.placement, v.autoscaling, v.affinity, v.autoscaling_patch, v.speed_factor) for v in spec.compare]
    for index, variant in enumerate(variants):
        _check_variant(index, variant, arrivals, source)
    return Scenario(
        serving=[load for load, _ in serving],
        autoscale_tick_s=spec.autoscale_tick_seconds,
        variants=variants,
        cluster=cluster,
        arrivals=arrivals,
        duration_s=spec.duration_seconds,
        changes=changes,
        faults=faults,
        seed=seed,
        seeds=spec.seeds,
        replicate=replicate,
        trace_offsets_s=offsets,
        bind_latency_s=spec.bind_latency_seconds,
        startup=startup,
        resync_s=spec.resync_seconds,
    )


def cold_start_seconds(model: ModelProfile, pods_per_replica: int, spec: ColdStartSpec) -> float:
    """Seconds from an engine's start to serving: the weights one node holds (the replica's
    weights over its pods; tensor parallelism within a node, pipeline stages across nodes)
    read at the node's load bandwidth, plus the fixed engine start; or the stated override."""
    if spec.model_load_seconds is not None:
        return spec.model_load_seconds
    return load_seconds(model, pods_per_replica, load_gb_per_second=spec.load_gb_per_second, engine_start_seconds=spec.engine_start_seconds)


def _racks(cluster: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Nodes per domain name, for every level of the cluster's topologies but the node level."""
    labels = [
        level["nodeLabel"]
        for obj in cluster
        if obj.get("kind") == "ClusterTopology"
        for level in obj["spec"]["levels"][:-1]
    ]
    out: dict[str, list[str]] = {}
    for obj in cluster:
        if obj.get("kind") == "Node":
            node_labels = obj["metadata"].get("labels", {})
            for label in labels:
                if label in node_labels:
                    out.setdefault(node_labels[label], []).append(obj["metadata"]["name"])
    return out


def with_variant(scenario: Scenario, variant: Variant) -> Scenario:
    """The scenario as `variant` runs it: every autoscaling group on the variant's policy
    and settings, the groups' affinity rules dropped if it says so, the serving GPUs at
    the variant's speed. The placement policy is the caller's to choose (it is code, not data)."""
    arrivals = []
    for at, group in scenario.arrivals:
        group = copy.deepcopy(group)
        if group["spec"].get("autoscaling"):
            if variant.autoscaling:
                group["spec"]["autoscaling"]["policy"] = variant.autoscaling
            if variant.autoscaling_patch:
                group["spec"]["autoscaling"] = merge_patch(group["spec"]["autoscaling"], variant.autoscaling_patch)
        if variant.affinity == "drop":
            group["spec"].pop("affinity", None)
        arrivals.append((at, group))
    serving = scenario.serving
    if variant.speed_factor != 1.0:
        serving = [dataclasses.replace(load, gpu=scaled_gpu(load.gpu, variant.speed_factor)) for load in serving]
    return dataclasses.replace(scenario, arrivals=arrivals, serving=serving)


# GpuProfile fields that are speeds (scaled by the factor) and fixed engine times (divided by
# it), so that every compute, memory and NVLink cost of prefill and decode takes 1/factor as
# long. The NICs (KV transfer between replicas) and the memory sizes are left as they are:
# the factor is about the engine's speed, which is what a calibration can get wrong.
SPEED_FIELDS = ("peak_tflops", "hbm_bandwidth_tbps", "nvlink_gbps")
TIME_FIELDS = ("layer_overhead_us", "prefill_layer_overhead_us", "iteration_overhead_us", "all_reduce_latency_us", "all_reduce_step_latency_us")


def scaled_gpu(gpu: GpuProfile, factor: float) -> GpuProfile:
    """`gpu` running `factor` times as fast (0.7: a pessimistic profile, 30% slower)."""
    if factor == 1.0:
        return gpu
    update = {name: getattr(gpu, name) * factor for name in SPEED_FIELDS}
    update.update({name: getattr(gpu, name) / factor for name in TIME_FIELDS})
    return gpu.model_copy(update=update)


# frac(k × GOLDEN) for k = 0, 1, 2, ... spreads any number of offsets evenly over [0, 1).
GOLDEN = (5**0.5 - 1) / 2


def rotated(trace: Trace, replicate: int) -> tuple[Trace, float]:
    """The replay started frac(replicate × 0.618...) of the way into its span, wrapping around
    (one mean gap between its last request and its first); and that offset in seconds."""
    count = len(trace)
    if replicate == 0 or count < 2 or trace.duration_s <= 0:
        return trace, 0.0
    period = trace.duration_s * count / (count - 1)  # the span plus one mean gap
    offset = (replicate * GOLDEN) % 1.0 * period
    shifted = (trace.arrival_s - offset) % period
    order = np.argsort(shifted, kind="stable")
    return trace.take(order, shifted[order]), round(offset, 3)


def _check_variant(index: int, variant: Variant, arrivals: list[tuple[float, dict[str, Any]]], source: str) -> None:
    """A variant must leave every group valid (a policy whose settings a group lacks would
    otherwise run silently without autoscaling)."""
    for _, group in with_variant(Scenario(cluster=[], arrivals=arrivals, duration_s=1.0), variant).arrivals:
        key = f"{group['metadata'].get('namespace', 'default')}/{group['metadata']['name']}"
        try:
            problems = check_group(InferenceGroup.model_validate(group), None)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            problems = [Problem(".".join(str(part) for part in error["loc"]), error["msg"])]
        if problems:
            field = (
                "autoscalingPatch" if variant.autoscaling_patch
                else "autoscaling" if variant.autoscaling
                else "affinity" if variant.affinity == "drop"
                else "name"
            )
            raise InputError(Problem(f"spec.compare[{index}].{field}", f"makes {key} invalid: {problems[0].path}: {problems[0].message}", source))


def _serving_load(
    index: int,
    entry: ServingSpec,
    groups: dict[str, dict[str, Any]],
    seed: int,
    duration_s: float,
    source: str,
    read: Callable[[str], tuple[str, str]],
    read_trace: Callable[[str], tuple[str, str]] | None,
    replicate: int,
    speed_factor: float,
) -> tuple[ServingLoad, float]:
    """The group's load and where its trace replay starts (0 for synthetic load, which is reseeded)."""
    where = f"spec.serving[{index}]"
    group = groups.get(entry.group)
    if group is None:
        raise InputError(Problem(f"{where}.group", f"no group {entry.group!r} arrives in this scenario", source))
    roles = [r["name"] for r in group["spec"]["roles"]]
    autoscaling = group["spec"].get("autoscaling") or {}
    # The autoscaler reads the signals by the role names its own settings give.
    prefill_role = entry.prefill_role or autoscaling.get("prefillRole", "prefill")
    decode_role = entry.decode_role or autoscaling.get("decodeRole", "decode")
    for field_name, role, key in (("prefillRole", prefill_role, "prefillRole"), ("decodeRole", decode_role, "decodeRole")):
        if role not in roles:
            raise InputError(Problem(f"{where}.{field_name}", f"{entry.group} has no role {role!r} (roles: {', '.join(roles)})", source))
        if autoscaling and role != autoscaling.get(key, key.removesuffix("Role")):
            raise InputError(
                Problem(f"{where}.{field_name}", f"{role!r} differs from the group's spec.autoscaling.{key} ({autoscaling.get(key, key.removesuffix('Role'))!r})", source)
            )
    model = _profile(ModelProfile, model_profile, entry.model, f"{where}.model", source, read)
    gpu = scaled_gpu(_profile(GpuProfile, gpu_profile, entry.gpu, f"{where}.gpu", source, read), speed_factor)
    offset = 0.0
    if entry.trace is not None:
        t = entry.trace
        if t.file is not None:
            name, body = read(t.file)
        elif read_trace is None:
            raise InputError(Problem(f"{where}.trace.name", "catalogue traces need a trace folder (tandem simulate --traces DIR)", source))
        else:
            try:
                name, body = read_trace(t.name or "")
            except InputError as exc:  # an unknown name, or a trace not fetched yet
                raise InputError(Problem(f"{where}.trace.name", exc.problems[0].message, source)) from None
        recorded = parse_trace(body, name, t.format)  # a bad line is named in the trace file
        try:
            trace = replay(recorded, rate=t.rate, start_s=t.start_seconds, end_s=t.end_seconds, limit=t.limit)
        except InputError as exc:  # e.g. a window the trace does not reach
            raise InputError(Problem(f"{where}.trace", exc.problems[0].message, source)) from None
        trace, offset = rotated(trace, replicate)
    else:
        try:
            trace = entry.synthetic.generate(seed, max(duration_s - entry.start_at, 1.0))  # type: ignore[union-attr]
        except InputError as exc:
            problem = exc.problems[0]
            names = {"duration_s": "rate", "input_lengths": "input", "output_lengths": "output"}
            head, _, rest = problem.path.partition(".")
            field = names.get(head, head) + (f".{rest}" if rest else "")
            raise InputError(Problem(f"{where}.synthetic.{field}", problem.message, source)) from None
    namespace, name = entry.group.split("/")
    load = ServingLoad(
        namespace=namespace,
        name=name,
        model=model,
        gpu=gpu,
        prefill_role=prefill_role,
        decode_role=decode_role,
        ttft_slo_s=entry.slo.ttft_seconds,
        itl_slo_s=entry.slo.itl_seconds,
        trace=trace.take(np.arange(len(trace)), trace.arrival_s + entry.start_at),
        window_s=entry.metrics_window_seconds,
        cluster_bandwidth_gbps=entry.cluster_bandwidth_gbps,
        pods_per_replica={r["name"]: int(r.get("podsPerReplica", 1)) for r in group["spec"]["roles"]},
        kv_block_tokens=entry.kv_cache.block_tokens,
        preemption=entry.kv_cache.preemption,
        swap_space_gib=entry.kv_cache.swap_space_gib,
        swap_gbps=entry.kv_cache.swap_gb_per_second,
        prefix_caching=entry.prefix_caching,
        chunked_prefill=entry.chunked_prefill,
        max_num_batched_tokens=entry.max_num_batched_tokens,
        drain=entry.drain.enabled,
        drain_grace_s=entry.drain.grace_period_seconds,
    )
    return load, offset


def _profile(kind: type, by_name: Callable[[str], Any], value: str, path: str, source: str, read: Callable[[str], tuple[str, str]]) -> Any:
    """A built-in profile by name, or a profile file beside the scenario."""
    if value.endswith((".yaml", ".yml", ".json")):
        name, body = read(value)
        return parse_profile(kind, name, body)  # its problems name that file
    try:
        return by_name(value)
    except InputError as exc:
        problem = exc.problems[0]
        raise InputError(Problem(f"{path}{('.' + problem.path) if problem.path else ''}", problem.message, source)) from None
