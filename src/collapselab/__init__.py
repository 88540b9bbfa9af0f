"""collapselab: the geometry of deep-learning training dynamics.

Measure neural collapse, progressive collapse, feature diversity and the principal
components bias while training PyTorch models; run the theoretical models behind them;
reproduce the papers' figures and claims.
"""

from typing import Any

from collapselab._version import __version__

__all__ = ["__version__", "measure"]


def __getattr__(name: str) -> Any:
    # ``collapselab.measure`` is imported on first use: importing the package (which the
    # command line does before anything else) must not import torch, so that a command
    # can print its first line at once.
    if name == "measure":
        from collapselab.families.measure import measure

        return measure
    raise AttributeError(f"module 'collapselab' has no attribute {name!r}")
