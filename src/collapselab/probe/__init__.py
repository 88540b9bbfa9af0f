"""collapselab.probe layer (see DESIGN.md)."""
