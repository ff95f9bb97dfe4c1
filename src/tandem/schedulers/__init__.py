"""Stand-ins for the schedulers tandem delegates to, for tandem's local worlds.

Pure: pods, nodes and gang objects in, a `Decision` out (binds, gang statuses, pod
conditions, gates lifted). `tandem apiserver` (`apiserver/kubelets.py`) and the simulator
(`sim/pod_lifecycle.py`) apply it. docs/apiserver.md says what each imitates and what not.
"""
