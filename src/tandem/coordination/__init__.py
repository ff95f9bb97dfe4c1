"""Rollout, scaling and rolling-update planners: observed state -> next step (pure)."""
