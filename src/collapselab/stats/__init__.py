"""collapselab.stats layer (see DESIGN.md)."""
