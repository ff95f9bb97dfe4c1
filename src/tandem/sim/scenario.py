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
  changes:
    - {at: 900, group: serving/llama-70b, patch: {spec: {replicas: 3}}}
  faults:
    - {at: 1800, rack: rack-5, recoverAfterSeconds: 600}  # any domain name; or nodes: [...]
```
Pure: `load_scenario` takes texts; the CLI reads the files.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from tandem.api.base import StrictModel
from tandem.api.loading import load_texts
from tandem.errors import InputError, Problem
from tandem.sim.kubelet import Startup
from tandem.sim.runner import Change, Fault, Scenario
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


class ScenarioSpec(StrictModel):
    seed: int = 0
    duration_seconds: float = Field(gt=0)
    cluster: ClusterSpec
    bind_latency_seconds: float = Field(1.0, ge=0)
    resync_seconds: float = Field(10.0, gt=0)
    startup: dict[str, StartupSpec] = Field(default_factory=dict)
    groups: list[GroupArrival] = Field(min_length=1)
    changes: list[ChangeSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)


class ScenarioFile(StrictModel):
    api_version: Literal["tandem.dev/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: ScenarioSpec


def load_scenario(source: str, text: str, read: Callable[[str], tuple[str, str]]) -> Scenario:
    """A runnable Scenario from the scenario text; `read(path)` returns (name, text) of a
    file the scenario names. Raises InputError with field paths on any mistake."""
    try:
        raw = yaml.safe_load(text)
        parsed = ScenarioFile.model_validate(raw)
    except yaml.YAMLError as exc:
        raise InputError(Problem("", f"not valid YAML: {str(exc).splitlines()[0]}", source)) from None
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        path = ".".join(str(part) for part in error["loc"])
        raise InputError(Problem(path, error["msg"].removeprefix("Value error, "), source)) from None
    spec = parsed.spec
    if spec.cluster.shape is not None:
        try:
            topology, nodes = generate_cluster(parse_shape(spec.cluster.shape), spec.cluster.gpus)
        except ValueError as exc:
            raise InputError(Problem("spec.cluster.shape", str(exc), source)) from None
        cluster = [topology, *nodes]
    else:
        inputs = load_texts([read(path) for path in spec.cluster.files])
        cluster = [t.model_dump(by_alias=True, exclude_none=True) for t in inputs.topologies.values()]
        cluster += [n.model_dump(by_alias=True, exclude_none=True) for n in inputs.nodes]
    arrivals = []
    for index, arrival in enumerate(spec.groups):
        if arrival.file is not None:
            name, body = read(arrival.file)
            documents = [d for d in yaml.safe_load_all(body) if d]
        else:
            name, documents = f"{source} spec.groups[{index}]", [arrival.group]
        load_texts([(name, yaml.safe_dump_all(documents))])  # validate the groups as `tandem validate` would
        arrivals += [(arrival.at, doc) for doc in documents if doc.get("kind") == "InferenceGroup"]
    racks = _racks(cluster)
    faults = []
    for index, fault in enumerate(spec.faults):
        nodes = tuple(fault.nodes) if fault.nodes else tuple(racks.get(fault.rack or "", ()))
        if not nodes:
            raise InputError(Problem(f"spec.faults[{index}].rack", f"no rack {fault.rack!r} in the cluster", source))
        faults.append(Fault(fault.at, nodes, fault.recover_after_seconds))
    changes = [Change(c.at, *c.group.split("/"), c.patch) for c in spec.changes]  # type: ignore[misc]
    startup = {
        role: Startup(s.image_pull_seconds, s.model_load_median_seconds, s.model_load_sigma) for role, s in spec.startup.items()
    }
    return Scenario(
        cluster=cluster,
        arrivals=arrivals,
        duration_s=spec.duration_seconds,
        changes=changes,
        faults=faults,
        seed=spec.seed,
        bind_latency_s=spec.bind_latency_seconds,
        startup=startup,
        resync_s=spec.resync_seconds,
    )


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
