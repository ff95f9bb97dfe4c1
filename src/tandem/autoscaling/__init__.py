"""autoscaling layer (see DESIGN.md §3)."""
