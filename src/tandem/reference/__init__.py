"""reference layer (see DESIGN.md §3)."""
