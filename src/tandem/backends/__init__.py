"""backends layer (see DESIGN.md §3)."""
