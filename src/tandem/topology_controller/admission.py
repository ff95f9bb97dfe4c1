"""The topology controller's admission: ClusterTopology creates, updates and deletes,
judged by the same pure function as the operator's webhook
(`tandem.api.topology_admission.review_topology`), with the InferenceGroups from this
process's own informer. A function of its inputs; the HTTPS server is runtime/webhook.py."""

from __future__ import annotations

from tandem.api.topology_admission import review_topology
from tandem.cluster.ports import Reader
from tandem.runtime.admission_review import Verdict, parse

OPERATIONS = ("CREATE", "UPDATE", "DELETE")


def review(body: bytes, reader: Reader) -> Verdict:
    """The verdict on one AdmissionReview (Malformed if it is not one); anything but a
    ClusterTopology is admitted (the configuration sends only those)."""
    request = parse(body)
    uid, operation = request["uid"], request["operation"]
    obj, old = request.get("object"), request.get("oldObject")
    kind = (obj or old or {}).get("kind") or (request.get("kind") or {}).get("kind")
    if operation not in OPERATIONS or kind != "ClusterTopology":
        return Verdict(uid, True)
    problems, warnings = review_topology(operation, obj, old, reader.list("InferenceGroup"))
    return Verdict(uid, not problems, tuple(str(p) for p in problems), tuple(warnings))


RULES = (
    {
        "apiGroups": ["tandem.dev"],
        "apiVersions": ["v1alpha1"],
        "operations": list(OPERATIONS),
        "resources": ["clustertopologies"],
        "scope": "Cluster",
    },
)
