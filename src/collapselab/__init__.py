"""collapselab: the geometry of deep-learning training dynamics.

Measure neural collapse, progressive collapse, feature diversity and the principal
components bias while training PyTorch models; run the theoretical models behind them;
reproduce the papers' figures and claims.
"""

from collapselab._version import __version__
from collapselab.families.measure import measure

__all__ = ["__version__", "measure"]
