"""The package version, in a module of its own: every layer may read it (the run manifest
records it) without importing the public facade, :mod:`collapselab`, which imports the
measurement engine."""

__version__ = "0.1.0"
