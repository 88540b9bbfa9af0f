"""The built-in metric families, one module each (registered by the catalogue).

- :class:`NC` (``"nc"``): neural collapse NC1-NC4, nearest-class-mean accuracy.
- :class:`MSE` (``"mse"``): the MSE-loss decomposition around the central path (paper 003).
- :class:`PFC` (``"pfc"``): PFC1-3 per layer and the layer path (paper 001).
- :class:`Diversity` (``"diversity"``): feature, gating and gradient diversity (paper 000).
- :class:`Curvature` (``"curvature"``): layer-wise Hessian/GGN spectra, Papyan's class
  structure, gradient alignment, weight spectra (paper 004; a model procedure).
- :class:`PCBias` (``"pcbias"``): a deep linear network's per-PC distance to the
  least-squares optimum and its gradient-scale-matrix statistics (paper 002; a model
  procedure).
- :class:`LearningOrder` (``"learning_order"``): which examples the model classifies
  correctly at every measurement, for accessibility and LOC (paper 002; a model procedure).
"""

from collapselab.families.curvature import Curvature
from collapselab.families.diversity import Diversity
from collapselab.families.learning_order import LearningOrder
from collapselab.families.mse import MSE
from collapselab.families.nc import NC
from collapselab.families.pcbias import PCBias
from collapselab.families.pfc import PFC

BUILTIN = (NC, MSE, PFC, Diversity, Curvature, PCBias, LearningOrder)
"""The families registered in the catalogue when :mod:`collapselab.families` is imported."""

__all__ = ["BUILTIN", "MSE", "NC", "PFC", "Curvature", "Diversity", "LearningOrder", "PCBias"]
