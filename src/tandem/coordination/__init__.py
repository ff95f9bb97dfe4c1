"""coordination layer (see DESIGN.md §3)."""
