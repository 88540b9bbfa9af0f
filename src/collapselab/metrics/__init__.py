"""collapselab.metrics layer (see DESIGN.md)."""
