"""Scheduler backends: one InferenceGroup as Volcano, Koordinator, KAI, Kueue or Workload API objects.

`registry.get_backend(name)` gives the backend `spec.scheduler.backend` names; each says what
it honours (`capabilities()`), refuses what it cannot (`validate`) and renders the objects to
apply (`render`, `render_topology`, `prepare_pod`). See docs/backends.md and docs/capabilities.md.
"""
