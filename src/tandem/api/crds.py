"""The CustomResourceDefinitions of ClusterTopology and InferenceGroup, generated from the models.

Never written by hand (DESIGN.md §5): `tandem crds` prints them, deploy/crds/ holds them,
and a test fails when those files are stale. Two steps:

1. pydantic writes each model's JSON Schema (`model_json_schema(by_alias=True)`), with a
   generator subclass that knows what tandem's validator functions mean (a DNS label's
   pattern, an int-or-percentage's range) and stops at pod templates, which the API
   server keeps as they are (`x-kubernetes-preserve-unknown-fields`); apiVersion, kind
   and metadata are put in as every CRD has them;
2. `_structural` rewrites that into the structural OpenAPI v3 subset Kubernetes requires:
   `$defs` inlined, `Optional[X]` as a plain X (null is pruned, so it reads as absent),
   `int | str` as `x-kubernetes-int-or-string`, numeric exclusive bounds in OpenAPI 3.0's
   boolean form, and a description on every field (`DESCRIPTIONS`, else the docstring of
   the field's model). Anything it does not know stops generation rather than being lost.

Cross-field rules (minReplicas <= replicas, level names of the topology, ...) stay in
`tandem.api.validation`, which the admission webhook runs; the schema holds field-local ones.
Pure: models in, dicts and text out.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from tandem.api import autoscaling, base, group_status, resources, topology_status
from tandem.api.kube import PodTemplateSpec
from tandem.api.naming import HOSTNAME_LABEL
from tandem.api.validation import RESERVED_LEVEL

GROUP = "tandem.dev"
VERSION = "v1alpha1"
REGENERATE = "tandem crds --out deploy/crds"
HEADER = f"# Generated from tandem's models by `{REGENERATE}`; do not edit.\n"
_INT32 = (-(2**31), 2**31 - 1)

# What a validator function means as schema keywords. A described field whose validator is
# not here stops generation: a new rule must be mapped (or mapped to {} on purpose), never dropped.
_VALIDATORS: dict[Any, dict[str, Any]] = {
    base._dns1123_label: {"maxLength": 63, "pattern": base._DNS1123_LABEL.pattern},
    base._dns1123_subdomain: {"maxLength": 253, "pattern": base._DNS1123_SUBDOMAIN.pattern},
    resources._label_key: {"maxLength": 316, "pattern": resources._LABEL_KEY.pattern},
    resources._queue_name: {"maxLength": 63, "pattern": base._DNS1123_SUBDOMAIN.pattern},
    resources._int_or_percent_type: {},  # only narrows the error message; the union is the type
    # 0 or more, or one to three digits worth 0..100 and "%", exactly as _PERCENT and its check.
    resources._int_or_percent: {"minimum": 0, "pattern": r"^([0-9]{1,2}|0[0-9]{2}|100)%$"},
    group_status._timestamp: {"format": "date-time"},
    autoscaling._metric_name: {"maxLength": 200, "pattern": autoscaling.METRIC_NAME.pattern},
    autoscaling._http_url: {"maxLength": 2048, "pattern": autoscaling.HTTP_URL.pattern},
    autoscaling._url_path: {"maxLength": 1024, "pattern": autoscaling.URL_PATH.pattern},
    autoscaling._port_type: {},  # only narrows the error message; the union is the type
    # a number 1..65535 or a port's name (the schema's pattern applies to strings, the bounds to numbers)
    autoscaling._port: {"minimum": 1, "maximum": 65535, "maxLength": 15, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
    # the placeholders and brackets are checked by the webhook (`_query_template`); the schema keeps $selector
    autoscaling._query_template: {"maxLength": 4096, "pattern": r"\$selector"},
}
# Models the CRD does not describe field by field.
_OPAQUE: dict[type[BaseModel], dict[str, Any]] = {
    PodTemplateSpec: {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}
# Lists whose items are keyed (server-side apply merges them by key; keys must be unique).
_LIST_MAP_KEYS = {"InferenceGroupSpec.roles": "name", "InferenceGroupStatus.conditions": "type",
                  "InferenceGroupStatus.roles": "name", "InferenceGroupStatus.units": "index",
                  "ClusterTopologySpec.levels": "name", "ClusterTopologyStatus.levels": "name",
                  "ClusterTopologyStatus.conditions": "type"}
_UNMAPPED = "x-tandem-unmapped-validator"


def _zero(field: str, default_zero: bool) -> str:
    """CEL: the int-or-percentage `field` of `self` is 0 (or "0%"); its default when absent."""
    value = f"(type(self.{field}) == int ? self.{field} == 0 : self.{field}.matches('^0+%$'))"
    return f"(has(self.{field}) ? {value} : {'true' if default_zero else 'false'})"


# Cross-field rules CEL can express, so an API server whose webhook is down still refuses
# the basics (`x-kubernetes-validations`). The group's rules are checked per object (none
# walks a list, which keeps each rule's cost bounded without list limits). The same rules,
# with field paths, are in `tandem.api.validation`, which the webhook runs.
CEL_RULES: dict[str, list[dict[str, str]]] = {
    ".spec.roles[*]": [
        {"rule": "!has(self.minReplicas) || self.minReplicas <= (has(self.replicas) ? self.replicas : 1)",
         "message": "minReplicas must be <= replicas", "fieldPath": ".minReplicas"},
        {"rule": "!has(self.workerTemplate) || (has(self.podsPerReplica) && self.podsPerReplica > 1)",
         "message": "workerTemplate is only used when podsPerReplica > 1", "fieldPath": ".workerTemplate"},
    ],
    ".spec.scheduler": [
        {"rule": "!has(self.qosClass) || (has(self.backend) && self.backend == 'koordinator')",
         "message": "qosClass is Koordinator's QoS class: only for backend koordinator", "fieldPath": ".qosClass"},
    ],
    ".spec.coordination.scaling": [
        {"rule": f"!{_zero('maxSkew', False)}", "message": "maxSkew must be at least 1 (or 1%): scaling could never start",
         "fieldPath": ".maxSkew"},
    ],
    ".spec.coordination.rollingUpdate": [
        {"rule": f"!({_zero('maxSurge', False)} && {_zero('maxUnavailable', True)})",
         "message": "maxSurge and maxUnavailable cannot both be 0: the update could never move"},
        {"rule": f"!{_zero('maxSkew', False)}", "message": "maxSkew must be at least 1 (or 1%)", "fieldPath": ".maxSkew"},
    ],
}


# The ClusterTopology's level rules (`check_topology`). Two walk the level list, which has at
# most 16 items (`maxItems`), so their cost is bounded (16 x 16 label comparisons); unique
# level names need no rule, the list-map key `name` makes the server refuse a repeat.
_LAST = "self[size(self) - 1]"
_INVERTED = f"self.exists(l, l.nodeLabel == '{HOSTNAME_LABEL}' && l.name != {_LAST}.name)"
TOPOLOGY_CEL_RULES: dict[str, list[dict[str, str]]] = {
    ".spec.levels": [
        {"rule": "self.all(l, self.exists_one(m, m.nodeLabel == l.nodeLabel))",
         "message": "each level's nodeLabel must be unique",
         "messageExpression": "\"duplicate nodeLabel '\" + self.filter(l, !self.exists_one(m, m.nodeLabel == l.nodeLabel))[0].nodeLabel"
                              " + \"': each level needs a label of its own\""},
        {"rule": f"!{_INVERTED}",
         "message": f"{HOSTNAME_LABEL} names a single node, so only the narrowest (last) level may use it",
         "messageExpression": f"\"{HOSTNAME_LABEL} names a single node, so only the narrowest (last) level may use it; level '\" "
                              f"+ self.filter(l, l.nodeLabel == '{HOSTNAME_LABEL}' && l.name != {_LAST}.name)[0].name"
                              f" + \"' would be broader than '\" + {_LAST}.name + \"'\""},
    ],
    ".spec.levels[*]": [
        {"rule": f"self.name != '{RESERVED_LEVEL}'", "fieldPath": ".name",
         "message": f"{RESERVED_LEVEL!r} is reserved for the whole cluster (the root above every level); choose another name"},
    ],
}


def _add_rules(schema: dict[str, Any], table: dict[str, list[dict[str, str]]]) -> None:
    for path, rules in table.items():
        node = schema
        for step in path.strip(".").replace("[*]", ".[*]").split("."):
            node = node["items"] if step == "[*]" else node["properties"][step]
        node["x-kubernetes-validations"] = rules
# JSON Schema keywords that mean the same in OpenAPI v3 and may stay as pydantic wrote them.
_KEEP = {"type", "description", "properties", "required", "items", "additionalProperties", "enum", "default",
         "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems"}

# Descriptions by "Model.field" (the wire name), like a Field(description=...) would give.
DESCRIPTIONS = {
    "ClusterTopology.spec": "The levels of the network.",
    "ClusterTopology.status": "Written by the topology controller (tandem topology-controller): what the levels hold on the nodes as they are now.",
    "ClusterTopologyStatus.observedGeneration": "The metadata.generation this status was computed from.",
    "ClusterTopologyStatus.nodes": "Every node the controller sees.",
    "ClusterTopologyStatus.placeableNodes": "Nodes carrying every level's label (the others are excluded from placement).",
    "ClusterTopologyStatus.unlabeledNodes": "Nodes lacking at least one level's label: excluded from placement.",
    "ClusterTopologyStatus.unlabeledExamples": "The first few unlabeled nodes, sorted.",
    "ClusterTopologyStatus.levels": "Per level, broadest first as in the spec: its domains and nodes on the current nodes.",
    "ClusterTopologyStatus.levelNames": "The levels in order, e.g. block/rack/host (a printer column).",
    "ClusterTopologyStatus.domainCounts": "Domains at each level in the same order, e.g. 4/64/512 (a printer column).",
    "ClusterTopologyStatus.backends": "The schedulers whose topology objects the controller keeps in step with this topology.",
    "ClusterTopologyStatus.usedBy": "namespace/name of the first groups naming this topology (spec.topologyName), sorted.",
    "ClusterTopologyStatus.usedByCount": "Groups naming this topology, listed in usedBy or not.",
    "ClusterTopologyStatus.conditions": "Ready (the status and every kept scheduler topology are up to date; False with a reason, e.g. DeletionBlocked), Degraded (with a message).",
    "LevelStatus.name": "The level.",
    "LevelStatus.nodeLabel": "The level's node label.",
    "LevelStatus.domains": "Distinct domains of this level (a value under two parents is two domains).",
    "LevelStatus.nodes": "Nodes carrying this level's label and every broader level's.",
    "LevelStatus.unlabeledNodes": "Nodes carrying every broader level's label but not this one.",
    "LevelStatus.unlabeledExamples": "The first few of those nodes, sorted.",
    "ClusterTopologySpec.levels": "The levels, broadest first, narrowest last.",
    "TopologyLevel.name": "The level's name, as groups use it in pack and affinity; unique within the topology; `cluster` is reserved.",
    "TopologyLevel.nodeLabel": "The node label whose value names a node's domain at this level; unique within the topology.",
    "TopologyLevel.linkBandwidthGbps": "Bandwidth between two nodes whose lowest common domain is at this level (feeds the KV-transfer cost model).",
    "InferenceGroup.spec": "What to run and how to place, roll out and scale it.",
    "InferenceGroup.status": "Written by the controller (everything but autoscaling) and the autoscaler (autoscaling).",
    "InferenceGroupSpec.topologyName": "The ClusterTopology whose levels pack and affinity name.",
    "InferenceGroupSpec.replicas": "Number of units (copies of the whole group); 0 places nothing.",
    "InferenceGroupSpec.priority": "Higher is placed first (then age, then order).",
    "InferenceGroupSpec.roles": "The roles of the deployment; names are unique.",
    "InferenceGroupSpec.affinity": "Cross-role proximity (the KV-cache path); each (from, to) pair at most once.",
    "InferenceGroupSpec.coordination": "Rollout, scaling and rolling-update pacing.",
    "InferenceGroupSpec.scheduler": "Which scheduler carries out the placement.",
    "InferenceGroupSpec.autoscaling": "Prefill/decode-aware autoscaling of the replicas per unit; absent: replicas are what the spec says.",
    "UnitPlacementScope.pack": "Where every pod of one unit must or should share a domain.",
    "UnitPlacementScope.exclusive": "A level: every domain of it that holds a pod of this unit holds pods of no other exclusive unit.",
    "PlacementScope.pack": "Where every pod of one replica must or should share a domain.",
    "Pack.required": "A level of the topology: the pods must be inside one domain of it.",
    "Pack.preferred": "A level of the topology, not broader than required: the pods should be inside one domain of it.",
    "Role.name": "The role's name, unique within the group.",
    "Role.replicas": "Desired replicas of this role per unit.",
    "Role.minReplicas": "Complete replicas a unit needs to be functional (at most replicas); default min(1, replicas).",
    "Role.podsPerReplica": "Pods in one replica: a leader (pod 0) and workers, placed together or not at all.",
    "Role.topology": "Where the pods of one replica must or should share a domain.",
    "Role.template": "The pod template of pod 0 (the leader) of every replica.",
    "Role.workerTemplate": "The pod template of pods 1..N-1 of every replica (default: template); only with podsPerReplica > 1.",
    "Role.recovery": "When a replica loses a pod: RecreateReplica (default) deletes its pods and creates it whole again; ReplaceMissingPod creates only the missing workers where the replica's constraints hold with its surviving pods (a lost leader re-creates the whole replica).",
    "Affinity.from": "The role whose replicas want to be near.",
    "Affinity.to": "The role they want to be near; not from.",
    "Affinity.level": "The level of the shared domain.",
    "Affinity.mode": "Required: every from replica shares a domain with a to replica of its unit; Preferred: as many as can.",
    "Coordination.rollout": "How a unit's roles are rolled out together, in ratio steps.",
    "Coordination.scaling": "How roles scale together.",
    "Coordination.rollingUpdate": "How a new revision replaces the old one, all roles in lockstep.",
    "Rollout.steps": "Ratio steps by role name, e.g. {prefill: 2, decode: 1}.",
    "Rollout.progression": "A step starts when the previous one is Scheduled (OrderScheduled) or Ready (OrderReady).",
    "Rollout.stepTimeoutSeconds": "A step not complete by then is reported Stalled and released or rolled back.",
    "Scaling.maxSkew": "How far an intermediate state may stray from the target ratio: an integer or a percentage; not 0.",
    "Scaling.progression": "A step starts when the previous one is Scheduled (OrderScheduled) or Ready (OrderReady).",
    "RollingUpdate.maxSurge": "Units above the desired count during an update: an integer or a percentage.",
    "RollingUpdate.maxUnavailable": "Units below the desired count during an update; not 0 when maxSurge is 0.",
    "RollingUpdate.maxSkew": "How far roles may be apart during an update: an integer or a percentage.",
    "SchedulerSpec.backend": "tandem's own engine (native) or the scheduler whose objects the group is translated into.",
    "SchedulerSpec.gangTimeoutSeconds": "A unit not all Scheduled/Ready by then is released and requeued.",
    "SchedulerSpec.queue": "The scheduler queue the group's pods go to: the Volcano or KAI Queue, or the Kueue LocalQueue (in the group's namespace); default: `tandem render --queue`, else `default`. Unused by native, koordinator and workload-api.",
    "SchedulerSpec.qosClass": "Koordinator's QoS class for the group's pods (label koordinator.sh/qosClass): LSE, LSR, LS, BE or SYSTEM; only with backend koordinator.",
    "SchedulerSpec.provisioningClassName": "Ask for nodes for a unit that does not fit with a ProvisioningRequest (autoscaling.x-k8s.io/v1) of this class, e.g. best-effort-atomic-scale-up.autoscaling.x-k8s.io; default: the operator's --provisioning-class (none: off).",
    "AutoscalingSpec.policy": "How the replicas are chosen; the policy's block must be present.",
    "AutoscalingSpec.prefillRole": "The managed prefill role.",
    "AutoscalingSpec.decodeRole": "The managed decode role; not prefillRole.",
    "AutoscalingSpec.intervalSeconds": "How often the autoscaler decides.",
    "AutoscalingSpec.metricMaxAgeSeconds": "Signals older than this lead to no action.",
    "AutoscalingSpec.roles": "Replica bounds per unit: prefillRole, decodeRole, and any other role of the group named here, which is then managed too.",
    "AutoscalingSpec.ratioEnforcement": "keepTotal: split the asked total by the ratio; raiseShort: raise the role short of it (ratio-keeping policies).",
    "AutoscalingSpec.metrics": "Where this group's signals are read; absent fields keep the operator's --metrics-source and --prometheus-url.",
    "MetricsSpec.source": "pods (each Ready replica leader's own /metrics) or prometheus (a Prometheus server's query API); default: the operator's --metrics-source.",
    "MetricsSpec.names": "The engine's series per figure, for engines other than vLLM and SGLang (pods annotated tandem.dev/engine) or renamed series; both sources read them. A figure not named keeps vLLM's or SGLang's name, and is not measured for another engine.",
    "MetricsSpec.pods": "How the pods source scrapes the group's pods.",
    "MetricsSpec.prometheus": "The Prometheus server and queries of the prometheus source.",
    "EngineSeries.waiting": "Gauge of requests queued.",
    "EngineSeries.running": "Gauge of requests in the running batch.",
    "EngineSeries.kvUsage": "Gauge of KV-cache use, 0..1.",
    "EngineSeries.promptTokens": "Counter of prompt tokens processed (with or without _total).",
    "EngineSeries.generationTokens": "Counter of tokens generated (with or without _total).",
    "EngineSeries.requests": "Counter of requests finished (with or without _total).",
    "EngineSeries.ttft": "Histogram of the time to first token in seconds (its name without _bucket).",
    "EngineSeries.itl": "Histogram of the inter-token latency in seconds (its name without _bucket).",
    "PodsMetricsSource.port": "The port to scrape: a number, or a container port's name; default: the port named metrics, else the engine's HTTP port.",
    "PodsMetricsSource.path": "The path of the exposition.",
    "PrometheusMetricsSource.url": "The server, http(s)://host[:port][/prefix]; default: the operator's --prometheus-url.",
    "PrometheusMetricsSource.queries": "PromQL templates per figure ($selector: the group's label matchers, $window: the window); a figure not given keeps the query made from the series names.",
    "PrometheusQueries.scrapes": "Per pod (by pod): samples of the pod in the window.",
    "PrometheusQueries.waiting": "Per pod: mean requests queued.",
    "PrometheusQueries.busy": "Per pod: share of the window with a request running, 0..1.",
    "PrometheusQueries.kvUsage": "Per pod: mean KV-cache use, 0..1.",
    "PrometheusQueries.promptTokens": "Per pod: prompt tokens per second.",
    "PrometheusQueries.generationTokens": "Per pod: tokens generated per second.",
    "PrometheusQueries.requests": "Per pod: requests finished per second.",
    "PrometheusQueries.ttftP90": "The group: 90th percentile of the time to first token, seconds.",
    "PrometheusQueries.itlP90": "The group: 90th percentile of the inter-token latency, seconds.",
    "RoleBounds.minReplicas": "Fewest replicas per unit (default: the role's own minReplicas).",
    "RoleBounds.maxReplicas": "Most replicas per unit.",
    "Stabilization.scaleUpSeconds": "Scale up to the lowest recommendation of this window.",
    "Stabilization.scaleDownSeconds": "Scale down to the highest recommendation of this window.",
    "Panic.thresholdPercent": "Load above this percentage of capacity starts a panic.",
    "Panic.windowSeconds": "How long a panic forbids scaling down.",
    "MetricTarget.metric": "The per-replica signal.",
    "MetricTarget.value": "What one replica should carry; at most 1 for busyFraction and kvUtilization.",
    "FixedRatio.ratio": "Replicas of each managed role per step of the ratio.",
    "FixedRatio.decodeTokensPerSecondPerReplica": "Decode tokens per second one decode replica carries.",
    "PreferredBand.targets": "A metric target per managed role.",
    "PreferredBand.bands": "Each role's share of the managed total, in percent.",
    "PreferredBand.costWeight": "Weight of cost against pressure in the blend, 0..1.",
    "SLO.ttftSeconds": "Time-to-first-token target.",
    "SLO.itlSeconds": "Inter-token latency target.",
    "SLO.prefillTokensPerSecondPerReplica": "Prefill tokens per second one prefill replica carries.",
    "SLO.decodeTokensPerSecondPerReplica": "Decode tokens per second one decode replica carries.",
    "SLO.gpuBudget": "GPUs of the managed roles, all units together.",
    "Band.minPercent": "Smallest share of the managed total.",
    "Band.maxPercent": "Largest share of the managed total.",
    "Independent.targets": "A metric target per managed role.",
    "Independent.tolerancePercent": "Deviation from the target, in percent, that causes no change.",
    "InferenceGroupStatus.observedGeneration": "The metadata.generation this status was computed from.",
    "InferenceGroupStatus.revision": "Hash of the pod templates and podsPerReplica now desired.",
    "InferenceGroupStatus.replicas": "Units that exist (the scale subresource reads it).",
    "InferenceGroupStatus.functionalUnits": "Units with every role at its minimum Ready.",
    "InferenceGroupStatus.selector": "Label selector of the group's pods (the scale subresource reads it).",
    "InferenceGroupStatus.state": "The group in a word: Ready, Progressing, Pending, Unschedulable, Stalled, Degraded or Invalid.",
    "InferenceGroupStatus.message": "Why the group is in its state, when it is not Ready (the engine's words for a unit that does not fit).",
    "InferenceGroupStatus.ready": "Per role, Ready replicas over desired replicas, all units together, e.g. \"prefill 2/2, decode 1/1\".",
    "InferenceGroupStatus.unitStates": "Every unit counted by state, listed in units or not.",
    "InferenceGroupStatus.conditions": "Accepted, Scheduled, Available, Progressing, Stalled, Degraded.",
    "InferenceGroupStatus.roles": "Per role, over all units, counted in complete replicas.",
    "InferenceGroupStatus.units": "Per unit: its state and what the planners remember; beyond 100 units, only units that are not Complete.",
    "InferenceGroupStatus.creations": "The number of the last pass whose pod creates all went through (each pod carries its pass's number in the tandem.dev/creation annotation): a replica whose pods are numbered up to it was created whole.",
    "InferenceGroupStatus.autoscaling": "The autoscaler's last decision and memory (written by the autoscaler only).",
    "Condition.type": "The aspect, in CamelCase.",
    "Condition.status": "True, False or Unknown.",
    "Condition.reason": "Why, in CamelCase.",
    "Condition.message": "Why, for people.",
    "Condition.lastTransitionTime": "When status last changed.",
    "Condition.observedGeneration": "The metadata.generation the condition was set from.",
    "RoleStatus.name": "The role.",
    "RoleStatus.desiredReplicas": "Replicas the spec asks for, all units together.",
    "RoleStatus.replicas": "Replicas that exist and have not failed.",
    "RoleStatus.scheduledReplicas": "Replicas with every pod bound.",
    "RoleStatus.readyReplicas": "Replicas with every pod Ready.",
    "RoleStatus.updatedReplicas": "Replicas of the current revision.",
    "UnitStatus.index": "The unit's index, from 0.",
    "UnitStatus.state": "Stalled, Unschedulable (no room: reason says why), Pending (waiting for a node), Progressing or Complete.",
    "UnitStatus.reason": "Why the unit is in its state.",
    "UnitStatus.domain": "The narrowest domain holding all the unit's pods, as level/name.",
    "UnitStatus.functional": "Every role at its minimum, Ready.",
    "UnitStatus.partialSince": "Since when the unit holds GPUs below some role's minimum.",
    "UnitStatus.releases": "Gang-timeout releases in a row (the backoff's exponent).",
    "UnitStatus.retryAfter": "A released unit is rolled out again from then.",
    "CoordinationMemory.mode": "The planner at work.",
    "CoordinationMemory.start": "Replicas per role when the change began.",
    "CoordinationMemory.goal": "Replicas per role the change goes to.",
    "CoordinationMemory.revision": "The revision being rolled out.",
    "CoordinationMemory.step": "Replicas per role of the current step.",
    "CoordinationMemory.stepStarted": "When the current step began.",
    "CoordinationMemory.stalls": "Steps in a row that timed out.",
    "CoordinationMemory.blocked": "Why the step's replicas wait for a node, in the placement engine's words (the domain and the shortfall).",
    "CoordinationMemory.short": "Per role: admitted replicas the placement engine found no room for.",
    "CoordinationMemory.retryAfter": "When a stalled step is tried again.",
    "AutoscalingStatus.lastDecisionAt": "When the autoscaler last decided.",
    "AutoscalingStatus.reason": "Why, for people.",
    "AutoscalingStatus.panic": "A panic is on.",
    "AutoscalingStatus.desired": "Replicas per unit of each managed role.",
    "AutoscalingStatus.state": "What the policy remembers between decisions.",
    "AutoscalerMemory.history": "Recent recommendations, within the longest window.",
    "AutoscalerMemory.panicUntil": "End of each live panic (total, or a role).",
    "AutoscalerMemory.lastChangeAt": "When the desired counts last changed.",
    "RecommendationMemory.at": "When the recommendation was made.",
    "RecommendationMemory.values": "Replicas per role recommended.",
}


class _KubeSchema(GenerateJsonSchema):
    """pydantic's JSON Schema, told what validator functions mean and which models to keep opaque."""

    def model_schema(self, schema: Any) -> Any:
        opaque = _OPAQUE.get(schema["cls"])
        return dict(opaque) if opaque is not None else super().model_schema(schema)

    def function_after_schema(self, schema: Any) -> Any:
        return self._mapped(schema, super().function_after_schema(schema))

    def function_before_schema(self, schema: Any) -> Any:
        return self._mapped(schema, super().function_before_schema(schema))

    def function_wrap_schema(self, schema: Any) -> Any:
        return self._mapped(schema, super().function_wrap_schema(schema))

    def function_plain_schema(self, schema: Any) -> Any:
        return self._mapped(schema, super().function_plain_schema(schema))

    def _mapped(self, schema: Any, generated: Any) -> Any:
        """pydantic generates every model's definition, opaque ones' insides too: an unknown
        validator is only marked here, and `_structural` refuses it where it is reached."""
        function = schema["function"]["function"]
        if function not in _VALIDATORS:
            return {**generated, _UNMAPPED: f"{function.__module__}.{function.__qualname__}"}
        return {**generated, **_VALIDATORS[function]}


def _structural(node: dict[str, Any], defs: dict[str, Any], path: str, used: set[str]) -> dict[str, Any]:
    """One JSON Schema node as a structural OpenAPI v3 node (see the module docstring)."""
    node = dict(node)
    model = node.pop("title", None)  # a model's title is its class name: the key of its descriptions
    if "$ref" in node:  # inline the definition; keys beside the $ref (a default) win
        model = node.pop("$ref").rsplit("/", 1)[-1]
        node = {**defs[model], **node}
        node.pop("title", None)
    if "anyOf" in node:
        branches = [b for b in node.pop("anyOf") if b != {"type": "null"}]
        if len(branches) == 1:  # Optional[X]
            return _structural({**branches[0], **node}, defs, path, used)
        if sorted(b.get("type", "") for b in branches) != ["integer", "string"] or any(len(b) > 1 for b in branches):
            raise ValueError(f"{path}: a union other than Optional[X] or int | str is not structural: {branches}")
        node |= {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node:  # JSON Schema's number is OpenAPI 3.0's boolean beside the bound
            value = node.pop(bound)
            if node.get("type") == "integer":
                node[inclusive] = value + 1 if bound == "exclusiveMinimum" else value - 1
            else:
                node |= {inclusive: value, bound: True}
    if node.get("type") == "integer":
        inside = _INT32[0] <= node.get("minimum", _INT32[0]) and node.get("maximum", _INT32[1] + 1) <= _INT32[1]
        node["format"] = "int32" if inside else "int64"
    if not isinstance(node.get("default"), (str, int, float, bool)):
        node.pop("default", None)  # null means absent; an object's default is its fields' defaults
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # structural schemas prune unknown fields instead
    if not node.get("required", True):
        del node["required"]  # an empty list is no constraint (and OpenAPI wants at least one)
    if _UNMAPPED in node:
        raise ValueError(f"{path}: no schema keywords for validator {node[_UNMAPPED]}: add it to _VALIDATORS")
    unknown = set(node) - _KEEP - {"anyOf", "exclusiveMinimum", "exclusiveMaximum"} - {k for k in node if k.startswith("x-kubernetes-")}
    if unknown:
        raise ValueError(f"{path}: no structural form for {sorted(unknown)}")
    if "properties" in node:
        node["properties"] = {name: _field(model, name, sub, defs, f"{path}.{name}", used) for name, sub in node["properties"].items()}
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _structural(node["additionalProperties"], defs, f"{path}.*", used)
    if "items" in node:
        node["items"] = _structural(node["items"], defs, f"{path}[*]", used)
    if "type" not in node and not node.get("x-kubernetes-int-or-string") and not node.get("x-kubernetes-preserve-unknown-fields"):
        raise ValueError(f"{path}: a structural schema needs a type here")
    return node


def _field(model: str, name: str, node: dict[str, Any], defs: dict[str, Any], path: str, used: set[str]) -> dict[str, Any]:
    """A property: its schema, a description (table first, then its model's docstring), its list keys."""
    key = f"{model}.{name}"
    out = _structural(node, defs, path, used)
    if key in DESCRIPTIONS:
        used.add(key)
        out["description"] = DESCRIPTIONS[key]
    if not out.get("description"):
        raise ValueError(f"{path}: no description: add {key!r} to DESCRIPTIONS")
    if key in _LIST_MAP_KEYS:
        used.add(key)
        out |= {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [_LIST_MAP_KEYS[key]]}
    return out


def _schema(model: type[BaseModel], used: set[str], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The structural schema of `model`, without the properties in `drop`."""
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=_KubeSchema)
    raw["properties"] = {k: v for k, v in raw["properties"].items() if k not in drop}
    raw["required"] = [k for k in raw.get("required", []) if k not in drop] or None
    return _structural(raw, raw.pop("$defs", {}), model.__name__, used)


def _root(model: type[BaseModel], used: set[str], status_model: type[BaseModel] | None) -> dict[str, Any]:
    """A resource's schema: apiVersion, kind and metadata as every CRD has them, spec and status typed."""
    schema = _schema(model, used, drop=("apiVersion", "kind", "metadata", "status"))
    schema["properties"] |= {
        "apiVersion": {"type": "string", "description": "The versioned schema of this representation of an object."},
        "kind": {"type": "string", "description": "The REST resource this object represents."},
        "metadata": {"type": "object"},
    }
    if status_model is not None:
        key = f"{model.__name__}.status"
        used.add(key)
        schema["properties"]["status"] = _without_defaults(_schema(status_model, used)) | {"description": DESCRIPTIONS[key]}
    return schema


def _without_defaults(node: Any) -> Any:
    """The schema with no `default` anywhere: the controller leaves empty fields out of the
    status, and a server that put them back would make every pass see a change."""
    if isinstance(node, dict):
        return {k: _without_defaults(v) for k, v in node.items() if k != "default"}
    if isinstance(node, list):
        return [_without_defaults(v) for v in node]
    return node


def _crd(model: type[BaseModel], *, plural: str, short: str, scope: str, schema: dict[str, Any],
         columns: list[dict[str, Any]], subresources: dict[str, Any]) -> dict[str, Any]:
    kind = model.__name__
    version: dict[str, Any] = {"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    # Age after the default columns, the wide ones (priority 1, `-o wide`) after it: a long message last.
    version["additionalPrinterColumns"] = [c for c in columns if not c.get("priority")] + [age] + [c for c in columns if c.get("priority")]
    if subresources:
        version["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "shortNames": [short], "categories": ["tandem"]},
            "scope": scope,
            "versions": [version],
        },
    }


def crds() -> list[dict[str, Any]]:
    """Both CRDs, ClusterTopology first; every description and list key in the tables is used."""
    used: set[str] = set()
    topology_schema = _root(resources.ClusterTopology, used, topology_status.ClusterTopologyStatus)
    _add_rules(topology_schema, TOPOLOGY_CEL_RULES)
    topology = _crd(
        resources.ClusterTopology, plural="clustertopologies", short="ctopo", scope="Cluster",
        schema=topology_schema,
        columns=[
            {"name": "Levels", "type": "string", "jsonPath": ".status.levelNames", "description": "The levels, broadest first."},
            {"name": "Domains", "type": "string", "jsonPath": ".status.domainCounts", "description": "Domains at each level, in the same order."},
            {"name": "Nodes", "type": "integer", "jsonPath": ".status.nodes", "description": "Every node the topology controller sees."},
            {"name": "Unlabeled", "type": "integer", "jsonPath": ".status.unlabeledNodes",
             "description": "Nodes lacking a level's label: excluded from placement."},
            {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
             "description": "The topology controller's Ready condition: the status and the schedulers' topology objects are up to date."},
        ],
        subresources={"status": {}},  # written by the topology controller only
    )
    group_schema = _root(resources.InferenceGroup, used, group_status.InferenceGroupStatus)
    _add_rules(group_schema, CEL_RULES)
    group = _crd(
        resources.InferenceGroup, plural="inferencegroups", short="ig", scope="Namespaced",
        schema=group_schema,
        columns=[
            {"name": "Status", "type": "string", "jsonPath": ".status.state",
             "description": "The group in a word: Ready, Progressing, Pending, Unschedulable, Stalled, Degraded or Invalid."},
            {"name": "Units", "type": "integer", "jsonPath": ".spec.replicas", "description": "Units desired."},
            {"name": "Functional", "type": "integer", "jsonPath": ".status.functionalUnits",
             "description": "Units with every role at its minimum Ready."},
            {"name": "Available", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Available")].status',
             "description": "Every unit has every role at its minimum Ready."},
            {"name": "Ready", "type": "string", "jsonPath": ".status.ready", "priority": 1,
             "description": "Per role, Ready replicas over desired, all units together."},
            {"name": "Revision", "type": "string", "jsonPath": ".status.revision", "priority": 1,
             "description": "The revision the pod templates ask for now."},
            {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1,
             "description": "Why the group is in its state, when it is not Ready."},
        ],
        subresources={
            "status": {},
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                      "labelSelectorPath": ".status.selector"},
        },
    )
    stale = (set(DESCRIPTIONS) | set(_LIST_MAP_KEYS)) - used
    if stale:
        raise ValueError(f"entries for fields the models no longer have: {sorted(stale)}")
    return [topology, group]


def file_name(crd: dict[str, Any]) -> str:
    """controller-gen's naming: `<group>_<plural>.yaml`."""
    return f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


class _Dumper(yaml.SafeDumper):
    """No `&id001` anchors where two fields share one enum list: each schema reads on its own."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML after the generated-file header; keys sorted, so the bytes are stable."""
    return HEADER + yaml.dump_all(objects, Dumper=_Dumper, sort_keys=True, allow_unicode=True, explicit_start=True, width=120)
