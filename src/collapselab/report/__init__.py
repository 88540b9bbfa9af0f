"""collapselab.report layer (see DESIGN.md)."""
