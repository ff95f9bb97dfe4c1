"""controller layer (see DESIGN.md §3)."""
