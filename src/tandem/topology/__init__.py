"""Domain tree over nodes, capacity roll-ups and bandwidth between nodes (pure)."""

from tandem.topology.snapshot import ClusterSnapshot
from tandem.topology.tree import ROOT, TopologyView

__all__ = ["ROOT", "ClusterSnapshot", "TopologyView"]
