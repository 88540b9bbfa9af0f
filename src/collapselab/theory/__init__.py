"""collapselab.theory layer (see DESIGN.md)."""
