"""What holds of any unit's peers file: every bound replica listed exactly once with its own
pods, `near` naming only `to` replicas that share a domain at the affinity's level, the
same bytes whatever order the pods come in."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from support.builders import group, role
from support.fuzz import examples
from tandem.api.naming import POD_INDEX_LABEL, REPLICA_LABEL, REVISION_LABEL, ROLE_LABEL, UNIT_LABEL
from tandem.api.resources import InferenceGroup, TopologyLevel
from tandem.cluster.replicas import replicas_of_unit
from tandem.controller.peers import domain_path, peers_body

LEVELS = [TopologyLevel.model_validate({"name": n, "nodeLabel": f"example.com/{n}"}) for n in ("zone", "rack", "host")]
NAMES = [level.name for level in LEVELS]

# a node: its zone, rack and host labels (None: the node lacks that label); rack names
# repeat across zones, as a domain is its whole path (z0/r0 is not z1/r0)
nodes_strategy = st.lists(
    st.tuples(st.sampled_from(["z0", "z1"]), st.sampled_from(["r0", "r0", "r1", None]), st.sampled_from(["h0", "h1", "h2"])),
    min_size=1,
    max_size=4,
)
# a pod: unbound, bound, or bound and Ready; on which node
pod_strategy = st.tuples(st.sampled_from(["unbound", "bound", "ready", "ready"]), st.integers(0, 3))
replica_strategy = st.tuples(st.sampled_from(["rev-a", "rev-b"]), st.lists(pod_strategy, min_size=2, max_size=2))


def _unit(nodes, prefill, decode, decode_size):
    node_objects = {}
    for i, (zone, rack, host) in enumerate(nodes):
        labels = {"example.com/zone": zone, "example.com/host": f"{host}-{i}"}
        if rack is not None:
            labels["example.com/rack"] = rack
        node_objects[("", f"n{i}")] = {"metadata": {"name": f"n{i}", "labels": labels}}
    pods = []
    for role_name, replicas, size in (("prefill", prefill, 1), ("decode", decode, decode_size)):
        for index, (revision, states) in enumerate(replicas):
            for pod_index, (state, node) in enumerate(states[:size]):
                name = f"g-0-{role_name}-{index}-{pod_index}"
                labels = {UNIT_LABEL: "0", ROLE_LABEL: role_name, REPLICA_LABEL: str(index), POD_INDEX_LABEL: str(pod_index), REVISION_LABEL: revision}
                pod = {"metadata": {"name": name, "namespace": "serving", "labels": labels, "annotations": {"tandem.dev/admitted": "true"}},
                       "spec": {"containers": [{"name": "e", "ports": [{"name": "http", "containerPort": 8000}]}]}}
                if state != "unbound":
                    pod["spec"]["nodeName"] = f"n{node % len(nodes)}"
                    ready = "True" if state == "ready" else "False"
                    pod["status"] = {"phase": "Running", "podIP": f"127.10.0.{len(pods) + 1}", "conditions": [{"type": "Ready", "status": ready}]}
                pods.append(pod)
    return node_objects, pods


@settings(max_examples=examples(100))
@given(
    nodes=nodes_strategy,
    prefill=st.lists(replica_strategy, min_size=1, max_size=4),
    decode=st.lists(replica_strategy, min_size=1, max_size=3),
    decode_size=st.integers(1, 2),
    level=st.sampled_from(["rack", "rack", "zone", "host", None]),
    shuffle=st.randoms(use_true_random=False),
)
def test_the_peers_file_lists_each_bound_replica_once_and_near_only_what_shares_its_domain(nodes, prefill, decode, decode_size, level, shuffle):
    raw = group("g", [role("prefill", 4, 0, gpus=1), role("decode", 3, 0, gpus=1, pods=decode_size)],
                affinity=None if level is None else [{"from": "prefill", "to": "decode", "level": level}])
    raw["metadata"]["uid"] = "u"
    typed = InferenceGroup.model_validate(raw)
    node_objects, pods = _unit(nodes, prefill, decode, decode_size)
    sizes = {"prefill": 1, "decode": decode_size}
    paths = {p["metadata"]["name"]: domain_path(p, node_objects, tuple(level.node_label for level in LEVELS)) for p in pods}
    body = peers_body(raw, 0, typed, replicas_of_unit(pods, sizes), NAMES, paths)
    document = json.loads(body)
    assert body == json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n", "written as json.dumps writes it"

    bound: dict[tuple[str, int], list[dict]] = {}
    for pod in pods:
        labels = pod["metadata"]["labels"]
        bound.setdefault((labels[ROLE_LABEL], int(labels[REPLICA_LABEL])), []).append(pod)
    bound = {key: members for key, members in bound.items() if all(p["spec"].get("nodeName") for p in members)}
    listed = [(role_name, r["replica"]) for role_name, replicas in document["roles"].items() for r in replicas]
    assert sorted(listed) == sorted(bound), "every bound replica exactly once, no other"
    for role_name, replicas in document["roles"].items():
        for replica in replicas:
            members = bound[(role_name, replica["replica"])]
            assert [p["name"] for p in replica["pods"]] == [p["metadata"]["name"] for p in members]
            assert replica["ready"] == all(p["status"]["conditions"][0]["status"] == "True" for p in members)
            assert replica["revision"] == members[0]["metadata"]["labels"][REVISION_LABEL]
            assert replica["leader"] == members[0]["metadata"]["name"]
            assert ("near" in replica) == (level is not None and role_name == "prefill")

    def domains(role_name, index):
        depth = NAMES.index(level) + 1
        out = set()
        for pod in bound[(role_name, index)]:
            labels = node_objects[("", pod["spec"]["nodeName"])]["metadata"]["labels"]
            path = tuple(labels.get(f"example.com/{n}") for n in NAMES[:depth])
            if None not in path:
                out.add(path)
        return out

    if level is not None:
        decodes = [r["replica"] for r in document["roles"]["decode"]]
        for replica in document["roles"]["prefill"]:
            mine = domains("prefill", replica["replica"])
            assert replica["near"] == {"decode": [d for d in decodes if mine & domains("decode", d)]}

    shuffled = list(pods)
    shuffle.shuffle(shuffled)
    again = peers_body(raw, 0, typed, replicas_of_unit(shuffled, sizes), NAMES, paths)
    assert json.loads(again) == document and again == peers_body(raw, 0, typed, replicas_of_unit(pods, sizes), NAMES, paths)
