"""Resource models, loading and validation with field paths (pure: parses text, never opens files)."""
