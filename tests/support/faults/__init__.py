"""The fault campaign (issue 16): seeded schedules of faults, a world that plays them to the
operator, and the invariants checked after every step.

- `schedule`: what a schedule is (JSON, replayable) and how one is drawn from a seed;
- `api`: one operator replica's view of the API: crashes between writes, 409 storms, 429
  and 5xx answers (some after the write was applied), reads that lag writes;
- `world`: the in-memory cluster (store, kubelet, garbage collector, node faults) and the
  operator replicas (leader election, clock skew, failover) stepped one second at a time;
- `invariants`: what must hold after every step and at the end;
- `engines`: the autoscaled groups' engines (load, vLLM `/metrics` texts, the metric
  faults) and the operator's `PodMetrics` over them (issue 29);
- `autoscaling`: the autoscaler's invariants (no scale-down on missing data, every
  decision inside the ratio band);
- `campaign`: run one schedule (or many) and say what was violated;
- `http`: a smaller world over HTTP, through the Kubernetes adapter, against the local
  API server, with watch streams cut, 410 Gone and 5xx answers.

`bench/faults.py` runs the campaign; `tests/faults` runs a seeded subset; see
docs/reliability.md.
"""
