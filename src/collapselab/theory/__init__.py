"""The papers' theoretical models: objectives, solvers, closed-form predictions, checks.

Each module follows one shape (docs/architecture.md, principle 5): the model (objective and
gradient), solvers (the paper's own procedure, ``literal``, and a ``converged`` one), closed-form
predictions, and a ``verify_*`` function that holds predictions against a solved instance
and reports relative errors. Where a paper's formula fails numerical verification, both
``variant="published"`` and ``variant="corrected"`` are offered.

Conventions (docs/theory.md): arrays with one entry per sample have the samples as rows,
weights are ``(out, in)`` (the deep UFM's free features ``H_1``, a parameter, are the
paper's ``(d_1, N)`` matrix, converted by named adapters), and layer ``l`` counts from 1:
the layer of ``W_l``, with product ``W_{L:l} = W_L ⋯ W_l``, at index ``l − 1`` of a
per-layer list. Paper 001's :mod:`~collapselab.theory.ufm` keeps the paper's columns.

- :mod:`~collapselab.theory.central_path` (paper 003): the central path, the class-centering
  matrix, the tangent projection, gradient descent with continual renormalisation.
- :mod:`~collapselab.theory.snr_dynamics` (paper 003): the SNR singular-value dynamics,
  published and corrected, closed forms, ODEs and asymptotics.
- :mod:`~collapselab.theory.ufm_mse` (paper 003): gradient descent on the unconstrained
  features model under MSE, with the loss decomposition along the way.
- :mod:`~collapselab.theory.geodesic` (paper 001): the straight-line model between layers,
  Theorems 1 and 2.
- :mod:`~collapselab.theory.ufm` (paper 001): UFM and (multilayer) MUFM, Theorems 3 and 4.
- :mod:`~collapselab.theory.transport` (paper 001, beyond it): optimal-transport diagnostics
  of the layer-to-layer feature flow.
- :mod:`~collapselab.theory.dlufm` (paper 004): the deep linear and deep ReLU unconstrained
  feature models, gradient descent, the exact global optimum and its closed form;
  :mod:`~collapselab.theory.dlufm_layerwise`: layer-wise Hessians (Kronecker, data-dependent,
  autodiff), Papyan's decomposition, gradients, App. E matrices, Gram tables, measured
  with the curvature vocabulary of :mod:`collapselab.curvature` (dense operators);
  :mod:`~collapselab.theory.dlufm_theorems`: Theorems 3.1, 4.1-4.4, E.1-E.3 as predictions
  and :func:`verify_dlufm`; :mod:`~collapselab.theory.dlufm_batched`: the full-batch
  gradient descent of several starts as one batched model, bit for bit the lone descents.
- :mod:`~collapselab.theory.pcbias` (paper 002): the principal-components bias of deep
  linear networks, in the principal frame of :mod:`collapselab.metrics.pc_frame`: Lemma 1
  gradients, Theorem 1's first-order compact update, Thm 3 / Lemma 2 scales with Monte
  Carlo, the effective factor ``c`` (published ``L``, corrected ``Σ α_l β_l``), the per-PC
  closed form (Eq. 10) and its std, distance, loss and time-to-ε, and the iterated-product
  simulator (Eq. 9);
  :mod:`~collapselab.theory.pcbias_relu`: the two-layer ReLU model's exact GD and its
  approximate dynamics (§2.5, App. B.2), published and corrected.
- :mod:`~collapselab.theory.diversity_trap` (paper 000): Theorem 1's per-sample decomposition
  (S_primary, S_k, Table 1), cos(α_c ΔV, F) (Fig. 5), o^(l) in every ΔF mode (Fig. 6),
  Lemma 3's two terms, Theorem 2's within-class sign consistency;
  :class:`collapselab.probe.MLPState`: the per-sample state of an MLP they read (weights,
  layer inputs, pre-activation gradients, gates), captured by
  :func:`collapselab.probe.capture_mlp_state`;
  :mod:`~collapselab.theory.diversity_operations`: the momentum (Eq. 27, Eq. 28 published and
  corrected) and L2 (Eq. 29) update rules behind the four operations.
"""

from collapselab.theory.central_path import (
    RenormalisedGD,
    class_centering_matrix,
    renormalise,
    renormalised_flow,
    snr_instance,
    tangent_projection,
    verify_central_path,
)
from collapselab.theory.diversity_operations import (
    effective_learning_rate,
    l2_weight_decay,
    momentum_displacement,
)
from collapselab.theory.diversity_trap import (
    common_direction_of_window,
    delta_v_feature_cosine,
    direction_strengths_of_window,
    lemma3_terms,
    o_statistic,
    theorem1_decomposition,
    theorem1_from_state,
    theorem1_table,
    theorem2_consistency,
)
from collapselab.theory.dlufm import (
    DeepLinearUFM,
    DeepReLUUFM,
    UFMParameters,
    exact_optimum,
    is_global_optimum,
)
from collapselab.theory.dlufm_layerwise import layer_hessian, layer_papyan_decomposition
from collapselab.theory.dlufm_theorems import verify_dlufm
from collapselab.theory.geodesic import (
    ideal_endpoint,
    simplex_etf,
    straight_line_model,
    theorem1_monte_carlo,
    theorem2_study,
    verify_straight_line,
)
from collapselab.theory.pcbias import (
    closed_form_columns,
    compact_update_residual,
    effective_factor,
    expected_scales,
    iterated_product_columns,
    scale_monte_carlo,
    verify_pcbias,
)
from collapselab.theory.pcbias_relu import relu_approximate_trajectory, relu_gd_trajectory
from collapselab.theory.snr_dynamics import (
    omega_asymptotic,
    omega_closed_form,
    omega_ode,
    snr_rate,
    verify_snr_dynamics,
)
from collapselab.theory.transport import layer_transport, w2_squared
from collapselab.theory.ufm import (
    alignment,
    gradient_flow,
    mufm_model,
    solve_converged,
    solve_literal,
    theorem3_reduce,
    ufm_model,
    verify_mufm,
    verify_theorem3,
    w_star,
)
from collapselab.theory.ufm_mse import UFMMSE, ufm_mse_descent, ufm_mse_minimise, verify_ufm_mse

__all__ = [
    "UFMMSE",
    "DeepLinearUFM",
    "DeepReLUUFM",
    "RenormalisedGD",
    "UFMParameters",
    "alignment",
    "class_centering_matrix",
    "closed_form_columns",
    "common_direction_of_window",
    "compact_update_residual",
    "delta_v_feature_cosine",
    "direction_strengths_of_window",
    "effective_factor",
    "effective_learning_rate",
    "exact_optimum",
    "expected_scales",
    "gradient_flow",
    "ideal_endpoint",
    "is_global_optimum",
    "iterated_product_columns",
    "l2_weight_decay",
    "layer_hessian",
    "layer_papyan_decomposition",
    "layer_transport",
    "lemma3_terms",
    "momentum_displacement",
    "mufm_model",
    "o_statistic",
    "omega_asymptotic",
    "omega_closed_form",
    "omega_ode",
    "relu_approximate_trajectory",
    "relu_gd_trajectory",
    "renormalise",
    "renormalised_flow",
    "scale_monte_carlo",
    "simplex_etf",
    "snr_instance",
    "snr_rate",
    "solve_converged",
    "solve_literal",
    "straight_line_model",
    "tangent_projection",
    "theorem1_decomposition",
    "theorem1_from_state",
    "theorem1_monte_carlo",
    "theorem1_table",
    "theorem2_consistency",
    "theorem2_study",
    "theorem3_reduce",
    "ufm_model",
    "ufm_mse_descent",
    "ufm_mse_minimise",
    "verify_central_path",
    "verify_dlufm",
    "verify_mufm",
    "verify_pcbias",
    "verify_snr_dynamics",
    "verify_straight_line",
    "verify_theorem3",
    "verify_ufm_mse",
    "w2_squared",
    "w_star",
]
