"""Names and labels tandem gives to the pods it generates."""

from __future__ import annotations

LABEL_PREFIX = "tandem.dev/"
GROUP_LABEL = LABEL_PREFIX + "group"
UNIT_LABEL = LABEL_PREFIX + "unit"
ROLE_LABEL = LABEL_PREFIX + "role"
REPLICA_LABEL = LABEL_PREFIX + "replica"
POD_INDEX_LABEL = LABEL_PREFIX + "pod-index"
REVISION_LABEL = LABEL_PREFIX + "revision"  # the template revision a pod was made from
# On pods of a group with `spec.topology.exclusive`: the level, so later plans know which
# domains running exclusive units hold.
EXCLUSIVE_LABEL = LABEL_PREFIX + "exclusive"
BACKEND_LABEL = LABEL_PREFIX + "backend"  # on a delegated group's pods: the scheduler they were made for
# On a pod made while its unit runs (a replacement, a step beyond the first, a hand-over):
# "replica", its replica is a gang of its own, not part of the unit's first (minimum) gang.
GANG_ANNOTATION = LABEL_PREFIX + "gang"
OWN_GANG = "replica"
MAX_POD_NAME = 63
# The extended resource tandem counts as GPUs (capacity figures, serving, autoscaling budgets).
GPU_RESOURCE = "nvidia.com/gpu"
# The scheduling gate tandem puts on every pod it creates and removes once it chose a node.
GATE = LABEL_PREFIX + "placement"
# On a pod whose replica the coordination planner let through: a gated pod without it is
# held back by coordination, not waiting for placement.
ADMITTED = LABEL_PREFIX + "admitted"
# On every pod tandem creates: the number of the pass that created it, counted per group
# (`status.creations` is the last such pass whose writes all went out): tells a replica
# whose creation was cut short from one that lost a pod.
CREATION = LABEL_PREFIX + "creation"
# When tandem chose the pod's node (RFC 3339), for the gang timeout.
ASSIGNED_AT = LABEL_PREFIX + "assigned-at"
# The node label every kubelet sets to its node's name (well known, Kubernetes').
HOSTNAME_LABEL = "kubernetes.io/hostname"

# A scheduler's topology object (a HyperNode, a KAI or Kueue Topology, Koordinator's network
# topology) is tandem's when it carries both: `tandem render --topology-only` writes them, so
# the topology controller takes over what a user applied from it, and never touches the rest.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "tandem"
TOPOLOGY_LABEL = LABEL_PREFIX + "topology"


def topology_object_labels(topology: str) -> dict[str, str]:
    """The labels that make a scheduler's topology object tandem's, for ClusterTopology `topology`."""
    return {MANAGED_BY_LABEL: MANAGED_BY, TOPOLOGY_LABEL: topology}


def pod_name(group: str, unit: int, role: str, replica: int, pod: int) -> str:
    """`<group>-<unit>-<role>-<replica>-<pod>`, e.g. llama-70b-0-prefill-0-0."""
    return f"{group}-{unit}-{role}-{replica}-{pod}"


def replica_prefix(pod: str) -> str:
    """What the names of one replica's pods share: `<group>-<unit>-<role>-<replica>`."""
    return pod.rsplit("-", 1)[0]


# Every group has a headless Service of its own name, so each pod is reachable as
# `<pod>.<group>.<namespace>.svc`; every unit a ConfigMap of its peers (`controller/peers.py`).
PEERS_DIR = "/etc/tandem"
PEERS_FILE = "peers.json"
PEERS_VOLUME = "tandem-peers"


def service_name(group: str) -> str:
    return group


def peers_config_map(group: str, unit: int) -> str:
    return f"{group}-{unit}-peers"


def pod_address(pod: str, group: str, namespace: str) -> str:
    """A pod's DNS name through its group's headless Service (hostname + subdomain)."""
    return f"{pod}.{service_name(group)}.{namespace}.svc"
