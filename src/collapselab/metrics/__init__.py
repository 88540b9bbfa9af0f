"""collapselab.metrics layer: pure metric formulas and the metric families (DESIGN.md).

- :func:`measure`: the catalogue metrics of one feature matrix.
- Families (:mod:`collapselab.metrics.families`): :class:`NC`, :class:`MSE`, :class:`PFC`,
  :class:`Diversity`, :class:`PCBias`, :class:`LearningOrder`; the protocol a family
  implements, :class:`Family` with :class:`Key` and :class:`Needs`
  (:mod:`collapselab.metrics.family`); the registry that is the metric catalogue,
  :func:`register_family` and :func:`catalogue` (:mod:`collapselab.metrics.catalogue`).
- Formulas: :mod:`collapselab.metrics.nc` (NC1-NC4, PFC1-3), :mod:`collapselab.metrics.mse`
  (the MSE decomposition, SNR), :mod:`collapselab.metrics.diversity` (paper 000),
  :mod:`collapselab.metrics.layerwise` (paper 001's per-layer and layer-path metrics),
  :mod:`collapselab.metrics.pc_bias` (paper 002's per-PC convergence, gradient-scale
  statistics, accessibility, learning-order constancy, critical PC and frequency,
  discriminability; its helpers stay in the module).
"""

from collapselab.metrics.catalogue import (
    catalogue,
    family_class,
    family_names,
    register_family,
    unregister_family,
)
from collapselab.metrics.families import MSE, NC, PFC, Diversity, LearningOrder, PCBias
from collapselab.metrics.families.nc import nc_metrics
from collapselab.metrics.family import Family, Key, LayerView, Layout, ModelAccess, Needs, SplitView
from collapselab.metrics.measure import measure
from collapselab.metrics.mse import (
    MSEDecomposition,
    central_path_losses,
    least_squares_classifier,
    mse_decomposition,
    mse_loss,
    nc1_snr,
    paper_lambda,
    snr_matrix,
    snr_singular_values,
)
from collapselab.metrics.nc import (
    PFC_KEYS,
    cdnv,
    equiangularity,
    equinorm,
    etf_distance,
    max_equiangularity,
    nc1_pinv,
    nc1_trace_ratio,
    nc2_etf_distance,
    ncc_accuracy,
    ncc_mismatch,
    orthogonal_frame_distance,
    pfc_metrics,
    pfc_values,
    self_duality,
    self_duality_classwise,
    trace_ratio,
    weighted_accuracy,
)
from collapselab.metrics.pc_bias import (
    accessibility,
    critical_frequency,
    critical_principal_component,
    discriminability,
    loc_correlation,
    pc_distance,
    pc_ensemble_std,
)

__all__ = [
    "MSE",
    "NC",
    "PFC",
    "PFC_KEYS",
    "Diversity",
    "Family",
    "Key",
    "LayerView",
    "Layout",
    "LearningOrder",
    "MSEDecomposition",
    "ModelAccess",
    "Needs",
    "PCBias",
    "SplitView",
    "accessibility",
    "catalogue",
    "cdnv",
    "central_path_losses",
    "critical_frequency",
    "critical_principal_component",
    "discriminability",
    "equiangularity",
    "equinorm",
    "etf_distance",
    "family_class",
    "family_names",
    "least_squares_classifier",
    "loc_correlation",
    "max_equiangularity",
    "measure",
    "mse_decomposition",
    "mse_loss",
    "nc1_pinv",
    "nc1_snr",
    "nc1_trace_ratio",
    "nc2_etf_distance",
    "nc_metrics",
    "ncc_accuracy",
    "ncc_mismatch",
    "orthogonal_frame_distance",
    "paper_lambda",
    "pc_distance",
    "pc_ensemble_std",
    "pfc_metrics",
    "pfc_values",
    "register_family",
    "self_duality",
    "self_duality_classwise",
    "snr_matrix",
    "snr_singular_values",
    "trace_ratio",
    "unregister_family",
    "weighted_accuracy",
]
