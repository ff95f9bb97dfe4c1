"""`tandem operator`: informers, pass triggers and requeue timers, Lease leader election, /metrics, /healthz."""
