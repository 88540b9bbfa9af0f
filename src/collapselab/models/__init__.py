"""collapselab.models layer (see DESIGN.md)."""
