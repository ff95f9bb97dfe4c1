"""Is a group, as it stands in the cluster, one the controller can act on?

The same checks as `tandem validate`: the model (field types, names, enums), the pod
templates against Kubernetes' PodTemplateSpec schema (`api/pod_templates.py`), the
cross-field rules, the ClusterTopology it names and that topology's levels, and what its
`scheduler.backend` can honour. A group that fails any of them gets the problems, with
field paths, in an `Accepted=False` condition and a Warning event; its running pods are
left alone and the other groups go on.

One more, the controller's own: counts beyond `MAX_COUNT` (units, or replicas of a role).
A pass builds a unit's state for every unit and tries a role's replicas one by one, so a
group asking for two billion units would stall every group behind it; the webhook refuses
such counts against the cluster's capacity (`placement/bounds.py`), and this is the
backstop when the webhook is not installed.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import ValidationError

from tandem.api.loading import validation_problems
from tandem.api.pod_templates import group_template_problems, merged
from tandem.api.resources import ClusterTopology, InferenceGroup
from tandem.api.validation import check_group, check_topology
from tandem.backends.registry import get_backend
from tandem.cluster.ports import Object
from tandem.errors import Problem


def topologies_of(raws: Iterable[Object]) -> tuple[dict[str, ClusterTopology], list[Problem]]:
    """The ClusterTopologies that parse, by name, and the problems of those that do not."""
    out: dict[str, ClusterTopology] = {}
    problems: list[Problem] = []
    for raw in raws:
        try:
            topology = ClusterTopology.model_validate(raw)
        except ValidationError as exc:
            problems += validation_problems(raw, exc, f"ClusterTopology {raw['metadata'].get('name', '?')}")
            continue
        out[topology.metadata.name] = topology
    return out, problems


def group_problems(raw: Object, topologies: dict[str, ClusterTopology]) -> tuple[InferenceGroup | None, list[Problem]]:
    """The typed group (None if it does not parse) and every problem found, at field paths."""
    body: dict[str, Any] = {k: v for k, v in raw.items() if k != "status"}
    templates = group_template_problems(body)
    try:
        group = InferenceGroup.model_validate(body)
    except ValidationError as exc:
        return None, merged(validation_problems(body, exc, ""), templates)
    topology = topologies.get(group.spec.topology_name)
    problems = templates + list(check_group(group, topology)) + _too_many(group)
    if topology is None:
        problems.append(Problem("spec.topologyName", f"ClusterTopology {group.spec.topology_name!r} not found"))
    else:
        # A topology stored before its rules were checked (or past a webhook that was away): the group
        # waits until it is fixed, and its scheduler is not asked about levels that are wrong anyway.
        invalid = [Problem("spec.topologyName", f"ClusterTopology {topology.metadata.name!r} is invalid: {p}") for p in check_topology(topology)]
        problems += invalid or get_backend(group.spec.scheduler.backend).validate(group, topology)
    return group, problems


MAX_COUNT = 100_000  # units per group, replicas per role: far beyond any cluster's GPUs


def _too_many(group: InferenceGroup) -> list[Problem]:
    counts = [("spec.replicas", group.spec.replicas, "units")]
    counts += [(f"spec.roles[{i}].replicas", role.replicas, f"replicas of role {role.name}") for i, role in enumerate(group.spec.roles)]
    return [Problem(path, f"{count:,} {what} is more than the controller plans ({MAX_COUNT:,})") for path, count, what in counts if count > MAX_COUNT]
