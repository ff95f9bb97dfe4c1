"""What every world shares: the ports, selectors, the facts read off objects, the store.

A world is where the controller's reads and writes land: the simulator (in-process), the
local API server (over HTTP) and a real cluster (through `tandem.kube`). Each serves the
ports of `cluster.ports`; none of them imports another world or the controller. This
package sits below the controller and the worlds, and holds what they all speak:

- `ports`: `Reader`, `Writer`, `Cluster`, the object and event types, the API errors;
- `selectors`: label and field selectors as the Kubernetes API parses them;
- `pods`, `replicas`: what a pod says (Ready, failed, its node, its GPUs) and what a
  unit's pods say about its replicas;
- `index`: the cluster as last read, kept up to date from what changed;
- `memory`: the in-memory store, a world of its own (the simulator's and, behind HTTP,
  the local API server's).
"""
