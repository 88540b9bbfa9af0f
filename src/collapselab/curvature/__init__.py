"""Curvature of networks: matrix-free Hessian, Gauss–Newton and Fisher operators, their
spectra, Papyan's class structure, gradient alignment and weight spectra.

Everything is built on :mod:`torch.func` (no dependency beyond PyTorch, NumPy and SciPy);
docs/curvature.md gives the formulas, the conventions and why curvlinops is not a
dependency. Modules, one per concept:

- :mod:`~collapselab.curvature.losses`: losses with their output Hessians (``"ce"``,
  ``"mse"``, ``"mse_sum"``, ``"mse_half"``).
- :mod:`~collapselab.curvature.objective`: :class:`Objective`, a model, a loss, data and a
  parameter group; BatchNorm handling.
- :mod:`~collapselab.curvature.operators`: :class:`HessianOperator`, :class:`GGNOperator`,
  :class:`EmpiricalFisherOperator`, :class:`LowRankOperator`, :class:`LinearCombination`,
  :class:`DenseOperator` (an explicit matrix, with its exact eigenpairs),
  :func:`gradient_covariance`.
- :mod:`~collapselab.curvature.eigen`: :func:`top_eigenpairs` (restarted block Lanczos),
  :func:`dense_spectrum` (the exact spectrum of a small operator or matrix).
- :mod:`~collapselab.curvature.trace`: :func:`hutchinson`, :func:`hutchpp`.
- :mod:`~collapselab.curvature.density`: :func:`slq` (stochastic Lanczos quadrature).
- :mod:`~collapselab.curvature.outliers`: :func:`count_outliers` (the library's one outlier
  rule), and :func:`counted_spectrum` (top eigenpairs resolved for a count).
- :mod:`~collapselab.curvature.papyan`: :func:`papyan_decomposition`, :func:`decompose`,
  :func:`image_overlap`.
- :mod:`~collapselab.curvature.alignment`: :func:`top_fraction`, :func:`subspace_overlap`,
  :func:`gradient_coefficients`, :func:`kron_pairs`, :func:`kronecker_vectors`,
  :func:`eigenvector_alignment`, :func:`module_class_means`.

The vocabulary (outliers, Papyan's decomposition, alignment) is one for matrix-free
operators and for explicit matrices: paper 004's dense deep-UFM matrices
(:mod:`collapselab.theory.dlufm_layerwise`) are :class:`DenseOperator` instances.
- :mod:`~collapselab.curvature.weights`: :func:`weight_spectrum`, :func:`power_law_fit`,
  :func:`covariance_spectrum`.
"""

from collapselab.curvature.alignment import (
    eigenvector_alignment,
    gradient_coefficients,
    kron_pairs,
    kronecker_vectors,
    module_class_means,
    subspace_overlap,
    top_fraction,
)
from collapselab.curvature.density import SpectralDensity, lanczos_tridiagonal, slq
from collapselab.curvature.eigen import Eigenpairs, dense_spectrum, top_eigenpairs
from collapselab.curvature.losses import LOSSES, OutputLoss, resolve_loss
from collapselab.curvature.objective import Objective, resolve_params
from collapselab.curvature.operators import (
    CurvatureOperator,
    DenseOperator,
    EmpiricalFisherOperator,
    GGNOperator,
    HessianOperator,
    LinearCombination,
    LowRankOperator,
    gradient_covariance,
)
from collapselab.curvature.outliers import CountedSpectrum, count_outliers, counted_spectrum
from collapselab.curvature.papyan import (
    ClassPairMeans,
    PapyanDecomposition,
    class_pair_means,
    decompose,
    image_overlap,
    papyan_decomposition,
)
from collapselab.curvature.trace import TraceEstimate, hutchinson, hutchpp
from collapselab.curvature.weights import (
    PowerLawFit,
    covariance_spectrum,
    power_law_fit,
    weight_matrix,
    weight_spectrum,
)

__all__ = [
    "LOSSES",
    "ClassPairMeans",
    "CountedSpectrum",
    "CurvatureOperator",
    "DenseOperator",
    "Eigenpairs",
    "EmpiricalFisherOperator",
    "GGNOperator",
    "HessianOperator",
    "LinearCombination",
    "LowRankOperator",
    "Objective",
    "OutputLoss",
    "PapyanDecomposition",
    "PowerLawFit",
    "SpectralDensity",
    "TraceEstimate",
    "class_pair_means",
    "count_outliers",
    "counted_spectrum",
    "covariance_spectrum",
    "decompose",
    "dense_spectrum",
    "eigenvector_alignment",
    "gradient_coefficients",
    "gradient_covariance",
    "hutchinson",
    "hutchpp",
    "image_overlap",
    "kron_pairs",
    "kronecker_vectors",
    "lanczos_tridiagonal",
    "module_class_means",
    "papyan_decomposition",
    "power_law_fit",
    "resolve_loss",
    "resolve_params",
    "slq",
    "subspace_overlap",
    "top_eigenpairs",
    "top_fraction",
    "weight_matrix",
    "weight_spectrum",
]
