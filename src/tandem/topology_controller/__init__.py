"""The topology controller: a ClusterTopology's status and each scheduler's own topology objects.

It runs on its own (`tandem topology-controller`) beside, or without, the group operator,
and keeps, per ClusterTopology, its status (levels, domains, nodes lacking a label, the
groups using it) and, for each backend it is told to manage, the scheduler's topology
objects (Volcano HyperNodes, KAI and Kueue `Topology`, Koordinator's
ClusterNetworkTopology) in step with the nodes. A pass is shaped like the group
controller's, without importing it:

    world = observe(cluster.snapshot(), memo, kinds)   # observe.py
    decisions = decide(world, now, settings)            # decide.py: pure, actions out
    report = apply(cluster, decisions)                  # apply.py: isolated writes

`reconcile.reconcile` runs one pass. See docs/topology-controller.md.
"""
