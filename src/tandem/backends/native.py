"""tandem's own engine: the reference every other backend is measured against.

The user applies the InferenceGroup (and the ClusterTopology); tandem's controller
creates the pods, each with tandem's scheduling gate, chooses their nodes and lifts
only its own gate. So rendering gives back the group itself, and a pod needs only the gate.
"""

from __future__ import annotations

import copy
from typing import Any, Collection, Mapping, Sequence

from tandem.api.kube import Node
from tandem.api.naming import GATE
from tandem.api.resources import API_VERSION, ClusterTopology, InferenceGroup
from tandem.backends.base import Backend, Full, Manifest, Replicas, Support
from tandem.backends.features import FEATURE_IDS
from tandem.backends.pods import modelled_template
from tandem.errors import Problem


class NativeBackend(Backend):
    name = "native"
    renders_priority_class = False

    def capabilities(self) -> Mapping[str, Support]:
        return {feature_id: Full() for feature_id in FEATURE_IDS}

    def applied_objects(self, group: InferenceGroup, topology: ClusterTopology | None, manifest: Manifest | None) -> list[dict[str, Any]]:
        return self.group_objects(group, topology, manifest)  # no pods: tandem's controller creates them

    def group_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, manifest: Manifest | None = None
    ) -> list[dict[str, Any]]:
        if manifest is not None:
            out = copy.deepcopy(dict(manifest))
            out.pop("status", None)
            return [out]
        dumped = group.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"status"})
        for raw, role in zip(dumped["spec"]["roles"], group.spec.roles):
            raw["template"] = modelled_template(role.template)  # quantities as written, not milli-units
            if role.worker_template is not None:
                raw["workerTemplate"] = modelled_template(role.worker_template)
        return [dumped]

    def unit_objects(
        self, group: InferenceGroup, topology: ClusterTopology | None, unit: int, manifest: Manifest | None = None,
        replicas: Replicas | None = None, alone: Collection[tuple[str, int]] = (),
    ) -> list[dict[str, Any]]:
        return []  # tandem's controller places the group itself

    def topology_problems(self, group: InferenceGroup, topology: ClusterTopology | None) -> list[Problem]:
        return []  # the group is applied as written; tandem's controller reads the topology itself

    def render_topology(self, topology: ClusterTopology, nodes: Sequence[Node]) -> list[dict[str, Any]]:
        assert topology.api_version == API_VERSION
        return [topology.model_dump(mode="json", by_alias=True, exclude_none=True)]

    def _decorate(self, pod: dict[str, Any], group: InferenceGroup, topology: ClusterTopology | None) -> None:
        gates = pod["spec"].setdefault("schedulingGates", [])
        if not any(gate.get("name") == GATE for gate in gates):
            gates.append({"name": GATE})
