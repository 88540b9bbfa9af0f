"""collapselab.experiments layer (see DESIGN.md)."""
