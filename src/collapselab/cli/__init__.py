"""The ``collapselab`` command line."""

from collapselab.cli.main import app, main

__all__ = ["app", "main"]
