"""collapselab.cli layer (see DESIGN.md)."""
