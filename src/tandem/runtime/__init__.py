"""What a tandem process needs around its pass, shared by `tandem operator` and `tandem
topology-controller`: leader election, the probe and metrics endpoints, the HTTPS
admission server and its certificates, log setup, the pass schedule. Nothing here knows
which pass it serves (no import of tandem.controller or tandem.topology_controller)."""
