"""collapselab.train layer (see DESIGN.md)."""
