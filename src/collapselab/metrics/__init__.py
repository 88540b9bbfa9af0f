"""collapselab.metrics: pure metric formulas, functions of tensors and statistics (no I/O,
no model, no hidden state; docs/architecture.md, principle 1). The families that compute them
while a model trains, :func:`collapselab.measure` and the metric catalogue live one layer up, in
:mod:`collapselab.families`.

- :mod:`collapselab.metrics.nc`: NC1-NC4 and PFC1-3; the NC keys of class statistics
  (:func:`nc_values`, :func:`nc_metrics`).
- :mod:`collapselab.metrics.mse`: the MSE decomposition and the SNR (paper 003).
- :mod:`collapselab.metrics.diversity`: feature diversity (paper 000).
- :mod:`collapselab.metrics.layerwise`: paper 001's per-layer and layer-path metrics.
- :mod:`collapselab.metrics.matrix`: :func:`matrix_metrics`, the NC and MSE keys of one
  feature matrix from their formulas, equal to ``measure(..., mode="dense")`` (for the
  theory layer, below the engine).
- :mod:`collapselab.metrics.pc_frame`: paper 002's principal coordinate system of a
  dataset (:class:`PCFrame`, :func:`principal_frame`), read by the metrics below and by
  :mod:`collapselab.theory.pcbias`.
- :mod:`collapselab.metrics.pcbias`: paper 002's per-PC convergence, gradient-scale
  statistics, accessibility, learning-order constancy, critical PC and frequency,
  discriminability.
"""

from collapselab.metrics.matrix import matrix_metrics
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
    NC_KEYS,
    PFC_KEYS,
    cdnv,
    equiangularity,
    equinorm,
    etf_distance,
    max_equiangularity,
    nc1_pinv,
    nc1_trace_ratio,
    nc2_etf_distance,
    nc_metrics,
    nc_values,
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
from collapselab.metrics.pc_frame import PCFrame, principal_frame
from collapselab.metrics.pcbias import (
    accessibility,
    critical_frequency,
    critical_principal_component,
    discriminability,
    loc_correlation,
    pc_distance,
    pc_ensemble_std,
)

__all__ = [
    "NC_KEYS",
    "PFC_KEYS",
    "MSEDecomposition",
    "PCFrame",
    "accessibility",
    "cdnv",
    "central_path_losses",
    "critical_frequency",
    "critical_principal_component",
    "discriminability",
    "equiangularity",
    "equinorm",
    "etf_distance",
    "least_squares_classifier",
    "loc_correlation",
    "matrix_metrics",
    "max_equiangularity",
    "mse_decomposition",
    "mse_loss",
    "nc1_pinv",
    "nc1_snr",
    "nc1_trace_ratio",
    "nc2_etf_distance",
    "nc_metrics",
    "nc_values",
    "ncc_accuracy",
    "ncc_mismatch",
    "orthogonal_frame_distance",
    "paper_lambda",
    "pc_distance",
    "pc_ensemble_std",
    "pfc_metrics",
    "pfc_values",
    "principal_frame",
    "self_duality",
    "self_duality_classwise",
    "snr_matrix",
    "snr_singular_values",
    "trace_ratio",
    "weighted_accuracy",
]
