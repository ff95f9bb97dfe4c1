"""Malformed input, through the real CLI: exit 2, one line naming the field, no traceback.

Every case runs twice: `tandem plan --cluster CLUSTER FILE` (exactly one `error:` line on
stderr) and `tandem validate FILE` (one `error:` line per problem, one of them the
expected one). Each case names the field path the user must see and a phrase of the
message. A couple of cases also go through the installed `tandem` executable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# ----------------------------------------------------------------------------- building blocks

CLUSTER = """\
apiVersion: tandem.dev/v1alpha1
kind: ClusterTopology
metadata: {name: default}
spec:
  levels:
    - {name: rack, nodeLabel: network.example.com/rack}
    - {name: host, nodeLabel: kubernetes.io/hostname}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata: {name: c-0, labels: {network.example.com/rack: r0, kubernetes.io/hostname: c-0}}
    status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
  - apiVersion: v1
    kind: Node
    metadata: {name: c-1, labels: {network.example.com/rack: r0, kubernetes.io/hostname: c-1}}
    status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
"""

# A second topology that bad files carry themselves, so `validate FILE` alone can check
# level names, and `plan` sees it next to the cluster's `default` without a clash.
MINI = """\
apiVersion: tandem.dev/v1alpha1
kind: ClusterTopology
metadata: {name: mini}
spec:
  levels:
    - {name: zone, nodeLabel: topology.kubernetes.io/zone}
    - {name: rack, nodeLabel: network.example.com/rack}
    - {name: host, nodeLabel: kubernetes.io/hostname}
---
"""

POD = "{spec: {containers: [{name: engine, image: vllm, resources: {requests: {cpu: '1', nvidia.com/gpu: '1'}}}]}}"


def role(name: str = "prefill", fields: str = "replicas: 2") -> str:
    """One role as a flow mapping; `fields` are extra `key: value` pairs."""
    return f"    - {{name: {name}, {fields + ', ' if fields else ''}template: {POD}}}\n"


ROLES = role("prefill") + role("decode", "replicas: 2, podsPerReplica: 2")


def group(spec: str = "", roles: str = ROLES, meta: str = "{name: llm, namespace: serving}", topology: str = "default") -> str:
    """An InferenceGroup; `spec` holds extra spec lines, each indented two spaces."""
    return (
        "apiVersion: tandem.dev/v1alpha1\n"
        "kind: InferenceGroup\n"
        f"metadata: {meta}\n"
        "spec:\n"
        f"  topologyName: {topology}\n"
        f"{spec}"
        "  roles:\n"
        f"{roles}"
    )


def mini_group(spec: str = "", roles: str = ROLES) -> str:
    """A group on the MINI topology, in the same file as MINI."""
    return MINI + group(spec, roles, topology="mini")


AUTOSCALING_BOUNDS = "{prefill: {maxReplicas: 8}, decode: {maxReplicas: 8}}"
FIXED_RATIO = "fixedRatio: {ratio: {prefill: 1, decode: 2}, decodeTokensPerSecondPerReplica: 1500}"


def autoscaling(policy: str = "FixedRatio", *, bounds: str = AUTOSCALING_BOUNDS, block: str = FIXED_RATIO, extra: str = "") -> str:
    """A `spec.autoscaling` block (as extra spec lines for `group`); `extra` is one more line."""
    lines = [f"policy: {policy}", f"roles: {bounds}", block] + ([extra] if extra else [])
    return "  autoscaling:\n" + "".join(f"    {line}\n" for line in lines if line)


def band(prefill: str, decode: str) -> str:
    targets = "{prefill: {metric: queueDepth, value: 4}, decode: {metric: kvUtilization, value: 0.7}}"
    return f"preferredBand: {{targets: {targets}, bands: {{prefill: {prefill}, decode: {decode}}}}}"


def node(name: str = "n1", spec: str = "{}", status: str = "{allocatable: {cpu: '8'}}") -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nspec: {spec}\nstatus: {status}\n"


def topology(levels: str) -> str:
    return f"apiVersion: tandem.dev/v1alpha1\nkind: ClusterTopology\nmetadata: {{name: other}}\nspec:\n  levels: {levels}\n"


MISSING, DIRECTORY = object(), object()
FILE = "{file}"  # the expected "path" of problems about a whole file: the file's own name
REQ = "spec.roles[0].template.spec.containers[0].resources.requests"

# ----------------------------------------------------------------------------- the table
# (id, file content, expected field path, expected phrase); plan_only marks the cases
# that only `plan` rejects.

CASES = [
    # --- wrong types
    ("replicas-string", group("  replicas: 'two'\n"), "spec.replicas", "must be a valid integer, got 'two'"),
    ("replicas-bool", group(roles=role("prefill", "replicas: true")), "spec.roles[0].replicas", "must be a valid integer, got true"),
    ("replicas-float", group("  replicas: 1.5\n"), "spec.replicas", "must be a valid integer"),
    ("spec-list", "apiVersion: tandem.dev/v1alpha1\nkind: InferenceGroup\nmetadata: {name: llm}\nspec: [a, b]\n", "spec", "must be a mapping (an object), got a list"),
    ("spec-null", "apiVersion: tandem.dev/v1alpha1\nkind: InferenceGroup\nmetadata: {name: llm}\nspec:\n", "spec", "got null"),
    ("roles-mapping", group().replace("  roles:\n" + ROLES, "  roles: {prefill: 2}\n"), "spec.roles", "must be a list"),
    ("roles-empty", group(roles="").replace("  roles:\n", "  roles: []\n"), "spec.roles", "must have at least 1 item"),
    ("template-missing", group(roles="    - {name: prefill, replicas: 1}\n"), "spec.roles[0].template", "required field is missing"),
    ("containers-empty", group(roles="    - {name: prefill, template: {spec: {containers: []}}}\n"), "spec.roles[0].template.spec.containers", "at least 1 item"),
    ("maxskew-list", group("  coordination: {scaling: {maxSkew: [1]}}\n"), "spec.coordination.scaling.maxSkew", "must be an integer or a percentage"),
    # --- unknown fields, at several depths
    ("unknown-top-level", group() + "stauts: {}\n", "stauts", "unknown field"),
    ("unknown-in-spec", group("  replica: 2\n"), "spec.replica", "unknown field"),
    ("unknown-in-role", group(roles=role("prefill", "replicas: 2, minReplica: 1")), "spec.roles[0].minReplica", "unknown field"),
    ("unknown-in-pack", group("  topology: {pack: {require: rack}}\n"), "spec.topology.pack.require", "unknown field"),
    ("unknown-in-rollout", group("  coordination: {rollout: {stepTimeout: 60}}\n"), "spec.coordination.rollout.stepTimeout", "unknown field"),
    ("unknown-in-level", topology("[{name: rack, nodeLabel: r, bandwidth: 400}]"), "spec.levels[0].bandwidth", "unknown field"),
    ("unknown-markup-like-key", group("  '[/x]': 1\n"), 'spec["[/x]"]', "unknown field"),
    # --- names
    ("role-name-not-dns", group(roles=role("Prefill_1")), "spec.roles[0].name", "not a DNS-1123 label"),
    ("group-name-not-dns", group(meta="{name: Llama.70B, namespace: serving}"), "metadata.name", "not a DNS-1123 label"),
    ("namespace-not-dns", group(meta="{name: llm, namespace: Serving}"), "metadata.namespace", "not a DNS-1123 label"),
    ("role-name-too-long", group(roles=role("r" * 64)), "spec.roles[0].name", "at most 63 characters"),
    (
        "pod-name-over-63",
        group(meta="{name: " + "a" * 40 + ", namespace: serving}", roles=role("prefill-with-long-name", "replicas: 12")),
        "spec.roles[0].name",
        "generated pod name",
    ),
    ("duplicate-role-names", group(roles=role("prefill") + role("prefill")), "spec.roles[1].name", "duplicate role name 'prefill'"),
    # --- counts
    ("min-replicas-above-replicas", group(roles=role("prefill") + role("decode", "replicas: 2, minReplicas: 3")), "spec.roles[1].minReplicas", "must be <= replicas (2)"),
    ("negative-role-replicas", group(roles=role("prefill", "replicas: -1")), "spec.roles[0].replicas", "greater than or equal to 0"),
    ("negative-unit-replicas", group("  replicas: -3\n"), "spec.replicas", "greater than or equal to 0"),
    ("negative-min-replicas", group(roles=role("prefill", "replicas: 2, minReplicas: -1")), "spec.roles[0].minReplicas", "greater than or equal to 0"),
    ("pods-per-replica-zero", group(roles=role("prefill") + role("decode", "podsPerReplica: 0")), "spec.roles[1].podsPerReplica", "greater than or equal to 1"),
    ("replicas-beyond-int32", group("  replicas: 100000000000000000000\n"), "spec.replicas", "less than or equal to 2147483647"),
    ("worker-template-single-pod", group(roles=role("prefill", f"replicas: 1, workerTemplate: {POD}")), "spec.roles[0].workerTemplate", "only used when podsPerReplica > 1"),
    # --- topology levels
    ("unit-pack-unknown-level", mini_group("  topology: {pack: {required: pod}}\n"), "spec.topology.pack.required", "unknown level 'pod'"),
    ("role-pack-unknown-level", mini_group(roles=role("prefill", "topology: {pack: {preferred: gpu}}")), "spec.roles[0].topology.pack.preferred", "unknown level 'gpu'"),
    ("affinity-unknown-level", mini_group("  affinity: [{from: prefill, to: decode, level: region}]\n"), "spec.affinity[0].level", "unknown level 'region'"),
    (
        "role-pack-broader-than-unit",
        mini_group("  topology: {pack: {required: rack}}\n", role("prefill") + role("decode", "topology: {pack: {required: zone}}")),
        "spec.roles[1].topology.pack.required",
        "broader than the unit's required pack 'rack'",
    ),
    ("preferred-broader-than-required", mini_group("  topology: {pack: {required: rack, preferred: zone}}\n"), "spec.topology.pack.preferred", "broader than required 'rack'"),
    # --- affinity
    ("affinity-missing-role", group("  affinity: [{from: prefill, to: router, level: rack}]\n"), "spec.affinity[0].to", "names no role of this group: 'router'"),
    ("affinity-from-equals-to", group("  affinity: [{from: prefill, to: prefill, level: rack}]\n"), "spec.affinity[0].to", "must differ from 'from'"),
    ("affinity-bad-mode", group("  affinity: [{from: prefill, to: decode, level: rack, mode: required}]\n"), "spec.affinity[0].mode", "must be 'Required' or 'Preferred'"),
    # --- coordination and scheduler
    ("rollout-step-missing-role", group("  coordination: {rollout: {steps: {prefill: 2, router: 1}}}\n"), "spec.coordination.rollout.steps.router", "names no role"),
    ("rollout-step-zero", group("  coordination: {rollout: {steps: {prefill: 0}}}\n"), "spec.coordination.rollout.steps.prefill", "greater than or equal to 1"),
    ("surge-and-unavailable-zero", group("  coordination: {rollingUpdate: {maxSurge: 0, maxUnavailable: 0}}\n"), "spec.coordination.rollingUpdate.maxUnavailable", "must not be 0 when maxSurge is 0"),
    ("max-skew-150-percent", group("  coordination: {scaling: {maxSkew: '150%'}}\n"), "spec.coordination.scaling.maxSkew", "percentage from 0% to 100%"),
    ("bad-progression", group("  coordination: {rollout: {progression: Ready}}\n"), "spec.coordination.rollout.progression", "'OrderScheduled' or 'OrderReady'"),
    ("bad-backend", group("  scheduler: {backend: slurm}\n"), "spec.scheduler.backend", "must be 'native'"),
    ("gang-timeout-zero", group("  scheduler: {gangTimeoutSeconds: 0}\n"), "spec.scheduler.gangTimeoutSeconds", "greater than or equal to 1"),
    ("provisioning-class", group("  scheduler: {provisioningClassName: Atomic_Scale_Up}\n"), "spec.scheduler.provisioningClassName",
     "is not a DNS-1123 subdomain"),
    # --- autoscaling (spec.autoscaling; ROLES gives prefill minReplicas 1, decode 1)
    ("autoscaling-unknown-policy", group(autoscaling("Fixed")), "spec.autoscaling.policy", "must be 'FixedRatio', 'PreferredBand', 'SLO' or 'Independent'"),
    ("autoscaling-policy-block-missing", group(autoscaling("SLO")), "spec.autoscaling.slo", "required field is missing (policy is SLO)"),
    ("autoscaling-unknown-field", group(autoscaling(extra="stabilisation: {scaleDownSeconds: 60}")), "spec.autoscaling.stabilisation", "unknown field"),
    ("autoscaling-decode-role-unknown", group(autoscaling(extra="decodeRole: generate")), "spec.autoscaling.decodeRole", "names no role of this group: 'generate'"),
    ("autoscaling-same-roles", group(autoscaling(extra="decodeRole: prefill")), "spec.autoscaling.decodeRole", "must differ from prefillRole"),
    ("autoscaling-bounds-unknown-role", group(autoscaling(bounds="{prefill: {maxReplicas: 8}, decode: {maxReplicas: 8}, router: {maxReplicas: 2}}")), "spec.autoscaling.roles.router", "names no role of this group: 'router'"),
    ("autoscaling-bounds-missing-role", group(autoscaling(bounds="{prefill: {maxReplicas: 8}}")), "spec.autoscaling.roles.decode", "required field is missing"),
    ("autoscaling-min-above-max", group(autoscaling(bounds="{prefill: {minReplicas: 9, maxReplicas: 8}, decode: {maxReplicas: 8}}")), "spec.autoscaling.roles.prefill.minReplicas", "minReplicas (9) must be <= maxReplicas (8)"),
    ("autoscaling-min-below-role-min", group(autoscaling(bounds="{prefill: {minReplicas: 0, maxReplicas: 8}, decode: {maxReplicas: 8}}")), "spec.autoscaling.roles.prefill.minReplicas", "must be >= the role's minReplicas (1)"),
    ("autoscaling-max-zero", group(autoscaling(bounds="{prefill: {maxReplicas: 0}, decode: {maxReplicas: 8}}")), "spec.autoscaling.roles.prefill.maxReplicas", "greater than or equal to 1"),
    ("autoscaling-ratio-missing-role", group(autoscaling(block="fixedRatio: {ratio: {prefill: 1}, decodeTokensPerSecondPerReplica: 1500}")), "spec.autoscaling.fixedRatio.ratio.decode", "required field is missing"),
    ("autoscaling-ratio-zero", group(autoscaling(block="fixedRatio: {ratio: {prefill: 0, decode: 2}, decodeTokensPerSecondPerReplica: 1500}")), "spec.autoscaling.fixedRatio.ratio.prefill", "greater than or equal to 1"),
    ("autoscaling-target-not-positive", group(autoscaling(block="fixedRatio: {ratio: {prefill: 1, decode: 2}, decodeTokensPerSecondPerReplica: 0}")), "spec.autoscaling.fixedRatio.decodeTokensPerSecondPerReplica", "greater than 0"),
    ("autoscaling-target-string", group(autoscaling(block="fixedRatio: {ratio: {prefill: 1, decode: 2}, decodeTokensPerSecondPerReplica: '1500'}")), "spec.autoscaling.fixedRatio.decodeTokensPerSecondPerReplica", "must be a valid number"),
    ("autoscaling-band-mins-over-100", group(autoscaling("PreferredBand", block=band("{minPercent: 60, maxPercent: 80}", "{minPercent: 50, maxPercent: 80}"))), "spec.autoscaling.preferredBand.bands", "minPercent values sum to 110%, over 100%"),
    ("autoscaling-band-maxes-under-100", group(autoscaling("PreferredBand", block=band("{maxPercent: 40}", "{maxPercent: 50}"))), "spec.autoscaling.preferredBand.bands", "maxPercent values sum to 90%, under 100%"),
    ("autoscaling-band-min-above-max", group(autoscaling("PreferredBand", block=band("{minPercent: 40, maxPercent: 30}", "{minPercent: 50, maxPercent: 80}"))), "spec.autoscaling.preferredBand.bands.prefill.minPercent", "must be <= maxPercent (30)"),
    ("autoscaling-band-over-100", group(autoscaling("PreferredBand", block=band("{maxPercent: 120}", "{maxPercent: 80}"))), "spec.autoscaling.preferredBand.bands.prefill.maxPercent", "less than or equal to 100"),
    ("autoscaling-fraction-target-above-1", group(autoscaling("Independent", block="independent: {targets: {prefill: {metric: queueDepth, value: 4}, decode: {metric: kvUtilization, value: 70}}}")), "spec.autoscaling.independent.targets.decode.value", "must be <= 1 for kvUtilization"),
    ("autoscaling-unknown-metric", group(autoscaling("Independent", block="independent: {targets: {prefill: {metric: queue, value: 4}, decode: {metric: kvUtilization, value: 0.7}}}")), "spec.autoscaling.independent.targets.prefill.metric", "must be 'queueDepth'"),
    ("autoscaling-gpu-budget-below-minimums", group(autoscaling("SLO", block="slo: {ttftSeconds: 2, itlSeconds: 0.05, gpuBudget: 2, prefillTokensPerSecondPerReplica: 20000, decodeTokensPerSecondPerReplica: 1500}")), "spec.autoscaling.slo.gpuBudget", "must hold the minimums: 1 unit(s) x 3 GPUs = 3, more than 2"),
    ("autoscaling-panic-threshold-100", group(autoscaling(extra="panic: {thresholdPercent: 100}")), "spec.autoscaling.panic.thresholdPercent", "greater than 100"),
    ("autoscaling-window-over-an-hour", group(autoscaling(extra="stabilization: {scaleDownSeconds: 7200}")), "spec.autoscaling.stabilization.scaleDownSeconds", "less than or equal to 3600"),
    # --- autoscaling.metrics (the group's own metrics source)
    ("metrics-unknown-source", group(autoscaling(extra="metrics: {source: keda}")), "spec.autoscaling.metrics.source", "must be 'pods' or 'prometheus'"),
    ("metrics-url-not-http", group(autoscaling(extra="metrics: {prometheus: {url: 'ftp://prometheus:9090'}}")), "spec.autoscaling.metrics.prometheus.url", "'ftp://prometheus:9090' is not http(s)://host[:port][/path]"),
    ("metrics-url-bad-port", group(autoscaling(extra="metrics: {prometheus: {url: 'http://prometheus:99999'}}")), "spec.autoscaling.metrics.prometheus.url", "is not http(s)://host[:port][/path]"),
    ("metrics-url-bracketed-not-ipv6", group(autoscaling(extra="metrics: {prometheus: {url: 'http://[1.2.3]:9090'}}")), "spec.autoscaling.metrics.prometheus.url", "'http://[1.2.3]:9090' is not http(s)://host[:port][/path]"),
    ("metrics-query-without-selector", group(autoscaling(extra="metrics: {prometheus: {queries: {waiting: 'sum by (pod) (tgi_queue_size)'}}}")), "spec.autoscaling.metrics.prometheus.queries.waiting", "must use $selector"),
    ("metrics-query-unknown-placeholder", group(autoscaling(extra="metrics: {prometheus: {queries: {busy: 'avg_over_time(x{$selector}[$windw])'}}}")), "spec.autoscaling.metrics.prometheus.queries.busy", "$windw is not a placeholder"),
    ("metrics-query-unbalanced", group(autoscaling(extra="metrics: {prometheus: {queries: {ttftP90: 'histogram_quantile(0.9, rate(x_bucket{$selector}[$window])'}}}")), "spec.autoscaling.metrics.prometheus.queries.ttftP90", "is not PromQL: unclosed '('"),
    ("metrics-unknown-query", group(autoscaling(extra="metrics: {prometheus: {queries: {ttft: 'x{$selector}'}}}")), "spec.autoscaling.metrics.prometheus.queries.ttft", "unknown field"),
    ("metrics-name-not-a-metric", group(autoscaling(extra="metrics: {names: {waiting: 'tgi queue size'}}")), "spec.autoscaling.metrics.names.waiting", "'tgi queue size' is not a Prometheus metric name"),
    ("metrics-name-unknown-signal", group(autoscaling(extra="metrics: {names: {queueDepth: tgi_queue_size}}")), "spec.autoscaling.metrics.names.queueDepth", "unknown field"),
    ("metrics-port-out-of-range", group(autoscaling(extra="metrics: {pods: {port: 70000}}")), "spec.autoscaling.metrics.pods.port", "must be a port number from 1 to 65535, got 70000"),
    ("metrics-port-bad-name", group(autoscaling(extra="metrics: {pods: {port: Metrics_Port}}")), "spec.autoscaling.metrics.pods.port", "is not a container port's name"),
    ("metrics-path-relative", group(autoscaling(extra="metrics: {pods: {path: metrics}}")), "spec.autoscaling.metrics.pods.path", "'metrics' is not a URL path"),
    # --- quantities
    ("quantity-8x", group(roles=role("prefill").replace("cpu: '1'", "cpu: 8x")), f"{REQ}.cpu", "must be a quantity such as 8, 500m or 16Gi, not '8x'"),
    ("quantity-negative", group(roles=role("prefill").replace("cpu: '1'", "cpu: '-1'")), f"{REQ}.cpu", "must not be negative"),
    ("quantity-1.5.2", group(roles=role("prefill").replace("nvidia.com/gpu: '1'", "nvidia.com/gpu: 1.5.2")), f'{REQ}["nvidia.com/gpu"]', "not '1.5.2'"),
    ("quantity-huge-exponent", group(roles=role("prefill").replace("cpu: '1'", "cpu: 1e999999999")), f"{REQ}.cpu", "has an exponent out of range"),
    ("node-allocatable-quantity", node(status="{allocatable: {cpu: '8', memory: 12Q}}"), "status.allocatable.memory", "must be a quantity"),
    # --- files and documents
    ("empty-file", "", FILE, "no documents"),
    ("whitespace-only-file", "  \n\n\t\n   \n", FILE, "no documents"),
    ("comments-only-file", "# nothing here\n---\n# still nothing\n", FILE, "no documents"),
    ("yaml-garbage", "@@ this is: not [yaml\n", FILE, "not valid YAML or JSON"),
    ("yaml-bad-indentation", "apiVersion: v1\nkind: Node\n  metadata: {name: x}\n", FILE, "not valid YAML or JSON"),
    ("json-syntax-error", '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}', FILE, "not valid JSON: Expecting ',' delimiter"),
    ("yaml-duplicate-key", group("  replicas: 1\n  replicas: 2\n"), FILE, "duplicate key 'replicas'"),
    ("yaml-scalar-document", "just some words\n", FILE, "must be a mapping (an object), got a string"),
    ("yaml-list-document", "- apiVersion: v1\n- kind: Node\n", FILE, "must be a mapping (an object), got a list"),
    ("no-kind", "apiVersion: v1\nmetadata: {name: n1}\n", "kind", "required field is missing"),
    ("no-api-version", "kind: Node\nmetadata: {name: n1}\n", "apiVersion", "required field is missing"),
    ("unsupported-kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", "kind", "unsupported apps/v1/Deployment"),
    ("wrong-api-version", group().replace("tandem.dev/v1alpha1", "tandem.dev/v1"), "kind", "unsupported tandem.dev/v1/InferenceGroup"),
    ("error-in-second-document", node("n1") + "---\n" + node("n2", status="{}"), "(document 2): status.allocatable", "required field is missing"),
    ("list-items-not-a-list", "apiVersion: v1\nkind: List\nitems: {apiVersion: v1, kind: Node}\n", "items", "must be a list, got a mapping"),
    ("list-item-not-a-mapping", "apiVersion: v1\nkind: List\nitems: [3]\n", "items[0]", "must be a mapping (an object), got a number"),
    # --- Kubernetes objects
    ("node-without-allocatable", node(status="{capacity: {cpu: '8'}}"), "status.allocatable", "required field is missing"),
    ("node-bad-taint-effect", node(spec="{taints: [{key: gpu, effect: NoScheduling}]}"), "spec.taints[0].effect", "must be 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    (
        "duplicate-node-names",
        "apiVersion: v1\nkind: List\nitems:\n"
        "  - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '8'}}}\n"
        "  - {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '4'}}}\n",
        "items[1].metadata.name",
        "duplicate Node 'n1'",
    ),
    ("pod-bad-limit", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: c-0, containers: [{name: c, resources: {limits: {cpu: 2 cores}}}]}\n", "spec.containers[0].resources.limits.cpu", "must be a quantity"),
    ("pod-bad-toleration", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], tolerations: [{key: gpu, operator: In}]}\n", "spec.tolerations[0].operator", "must be 'Exists' or 'Equal'"),
    ("duplicate-groups", group() + "---\n" + group(), "(document 2): metadata.name", "duplicate InferenceGroup 'serving/llm'"),
    # --- ClusterTopology
    ("duplicate-level-names", topology("[{name: rack, nodeLabel: a}, {name: host, nodeLabel: b}, {name: rack, nodeLabel: c}]"), "spec.levels[2].name", "duplicate 'rack'"),
    ("duplicate-level-labels", topology("[{name: rack, nodeLabel: a}, {name: host, nodeLabel: a}]"), "spec.levels[1].nodeLabel", "duplicate 'a'"),
    ("level-bad-label-key", topology("[{name: rack, nodeLabel: 'not a label'}]"), "spec.levels[0].nodeLabel", "not a valid Kubernetes label key"),
    ("level-zero-bandwidth", topology("[{name: rack, nodeLabel: r, linkBandwidthGbps: 0}]"), "spec.levels[0].linkBandwidthGbps", "greater than 0"),
    ("levels-empty", topology("[]"), "spec.levels", "at least 1 item"),
    ("level-named-cluster", topology("[{name: cluster, nodeLabel: c}, {name: host, nodeLabel: h}]"), "spec.levels[0].name", "'cluster' is reserved for the whole cluster"),
    # --- paths that are not readable files
    ("missing-file", MISSING, FILE, "cannot read: No such file or directory"),
    ("directory", DIRECTORY, FILE, "is a directory"),
    ("not-utf8", b"apiVersion: v1\nkind: Node\nmetadata: {name: \xff\xfe}\n", FILE, "is not UTF-8"),
    ("deeply-nested", "a: " + "[" * 1000 + "]" * 1000 + "\n", FILE, "nested too deeply"),
    ("huge-integer-yaml", group("  priority: " + "9" * 5000 + "\n"), FILE, "a number of more than 4300 digits"),
    ("huge-integer-json", '{"apiVersion": "v1", "kind": "Node", "x": ' + "9" * 5000 + "}", FILE, "not valid JSON: a number of more than 4300 digits"),
    ("binary", b"apiVersion: v1\x00\x01\x02kind: Node\n", FILE, "is binary (a NUL byte near its start)"),
    # a "billion laughs": 9 levels of 9 aliases each would be 387 million lists to walk
    ("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)),
     FILE, "aliases expand the document far beyond its size"),
    ("alias-bomb-in-a-list", "apiVersion: v1\nkind: List\nitems: []\nx: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"x{i}: &a{i} [{', '.join(['*a' + (str(i - 1) if i else '')] * 10)}]\n" for i in range(7)),
     FILE, "aliases expand the document far beyond its size"),
    ("impossible-date", node().replace("metadata: {name: n1}", "metadata: {name: n1, creationTimestamp: 2026-13-45}"), FILE, "not a valid date or time (month must be in 1..12) at line 3"),
]

PLAN_ONLY = [
    ("topology-not-present", group(topology="nowhere"), "spec.topologyName", "ClusterTopology 'nowhere' is not in the input files"),
]


# ----------------------------------------------------------------------------- the checks


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster") / "cluster.yaml"
    path.write_text(CLUSTER, encoding="utf-8")
    return path


def write_case(tmp_path: Path, content: object) -> Path:
    if content is MISSING:
        return tmp_path / "does-not-exist.yaml"
    if content is DIRECTORY:
        path = tmp_path / "a-directory"
        path.mkdir()
        return path
    path = tmp_path / "input.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        assert isinstance(content, str)
        path.write_text(content, encoding="utf-8")
    return path


def check_error_lines(lines: list[str], path: str, phrase: str) -> None:
    assert lines, "nothing on stderr"
    for line in lines:
        assert line.startswith("error: "), line
    assert any(path in line and phrase in line for line in lines), f"no line has {path!r} and {phrase!r}: {lines}"


def test_enough_distinct_cases() -> None:
    ids = [case[0] for case in CASES + PLAN_ONLY]
    assert len(ids) == len(set(ids))
    assert len({case[1] for case in CASES if isinstance(case[1], (str, bytes))}) >= 35


@pytest.mark.parametrize(("content", "path", "phrase"), [pytest.param(*case[1:], id=case[0]) for case in CASES + PLAN_ONLY])
def test_plan_rejects(run_cli, cluster: Path, tmp_path: Path, content: object, path: str, phrase: str) -> None:
    file = write_case(tmp_path, content)
    result = run_cli("plan", "--cluster", cluster, file)
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    check_error_lines(lines, path.replace(FILE, str(file)), phrase)


@pytest.mark.parametrize(("content", "path", "phrase"), [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_validate_rejects(run_cli, tmp_path: Path, content: object, path: str, phrase: str) -> None:
    file = write_case(tmp_path, content)
    result = run_cli("validate", file)
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stdout + result.stderr
    check_error_lines(result.stderr.splitlines(), path.replace(FILE, str(file)), phrase)


def test_validate_notes_a_topology_it_cannot_see(run_cli, tmp_path: Path) -> None:
    """Without the ClusterTopology, validate checks all it can and says what it could not."""
    file = write_case(tmp_path, PLAN_ONLY[0][1])
    result = run_cli("validate", file)
    assert result.exit_code == 0, result.stderr
    assert "note: serving/llm: ClusterTopology 'nowhere' not among these files" in result.stdout
    assert result.stdout.rstrip().endswith("ok: 0 node(s), 0 pod(s), 0 topology(ies), 1 group(s)")


def test_validate_reports_every_problem(run_cli, tmp_path: Path) -> None:
    """validate prints one line per problem; plan the first one and how many more."""
    content = group(
        "  replicas: -1\n  scheduler: {backend: slurm}\n",
        role("prefill") + role("decode", "replicas: 1, minReplicas: 2"),
    )
    file = write_case(tmp_path, content)
    result = run_cli("validate", file)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    assert "spec.replicas" in lines[0] and "spec.scheduler.backend" in lines[1]
    # minReplicas is a cross-field rule: it runs only once every field is well-formed.
    cluster_file = tmp_path / "c.yaml"
    cluster_file.write_text(CLUSTER, encoding="utf-8")
    planned = run_cli("plan", "-c", cluster_file, file)
    assert planned.exit_code == 2
    assert planned.stderr.splitlines() == [f"{lines[0]} (and 1 more problem)"]


def test_problems_in_several_files_name_each_file(run_cli, tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(node("n1", status="{}"), encoding="utf-8")
    second.write_text(group("  replicas: x\n"), encoding="utf-8")
    result = run_cli("validate", first, second)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {first}: status.allocatable: required field is missing",
        f"error: {second}: spec.replicas: must be a valid integer, got 'x'",
    ]


@pytest.mark.parametrize(
    ("command", "content", "expected"),
    [
        ("plan", group(roles=role("Prefill_1")), "spec.roles[0].name: 'Prefill_1' is not a DNS-1123 label"),
        ("validate", "", "no documents"),
    ],
    ids=["plan-bad-role-name", "validate-empty-file"],
)
def test_installed_executable(tmp_path: Path, cluster: Path, command: str, content: str, expected: str) -> None:
    """The console script itself: exit status 2, one stderr line, no traceback."""
    exe = Path(sys.executable).with_name("tandem")
    file = write_case(tmp_path, content)
    args = [str(exe), command, *(["--cluster", str(cluster)] if command == "plan" else []), str(file)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines


def test_valid_example_is_accepted(run_cli, examples: Path) -> None:
    """Positive control: the shipped example plans and validates with exit status 0."""
    planned = run_cli("plan", "--cluster", examples / "cluster.yaml", examples / "llama-70b.yaml")
    assert planned.exit_code == 0, planned.stderr
    assert planned.stderr == ""
    validated = run_cli("validate", examples / "cluster.yaml", examples / "llama-70b.yaml")
    assert validated.exit_code == 0, validated.stderr
    assert "ok: 64 node(s), 0 pod(s), 1 topology(ies), 1 group(s)" in validated.stdout
