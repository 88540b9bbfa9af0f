"""collapselab.track layer (see DESIGN.md)."""
