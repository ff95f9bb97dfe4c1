"""`tandem apiserver`: a local Kubernetes-compatible API over the in-memory store, for trying tandem and for e2e tests."""
