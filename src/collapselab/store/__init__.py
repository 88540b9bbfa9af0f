"""collapselab.store layer (see DESIGN.md)."""
