"""sim layer (see DESIGN.md §3)."""
