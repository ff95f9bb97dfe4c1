"""The Kubernetes adapter: the controller's ports (`tandem.cluster.ports`) over a real API.

- `cluster.KubeCluster`: the `Cluster` port; `snapshot()` reads informer caches, writes go
  to the API. `KubeCluster.connect(kubeconfig_or_url)` is how `tandem operator` starts one.
- `informer.Informer`: list + watch of one kind into a cache, in a thread.
- `reader`: Readers over a snapshot of the caches, or live from the API (the Lease).
- `writer.KubeWriter`: the `Writer` port (merge patches, preconditions, aggregated events).
- `rest.Rest`: JSON over lightkube's connection; `errors`: its failures as tandem's;
  `kinds`: kind -> REST path; `trim`: what the caches keep of each object.

See docs/kube.md.
"""
