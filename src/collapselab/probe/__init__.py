"""collapselab.probe: capture activations and per-sample feature gradients (docs/monitoring.md).

Public API:

- :func:`resolve_layers`: select layers by name, glob pattern, regex or module type.
- :class:`FeatureCapture`: forward hooks keeping the flattened ``(batch, D)`` inputs or
  outputs of layers for each forward pass (and, optionally, their gradients).
- :func:`per_sample_gradients`: features and per-sample feature gradients ``dl_i/dF_i``
  of a whole batch from one backward pass, plus ReLU pre-activations, gates and
  pre-activation gradients (:class:`GradientCapture`).
- :func:`linear_factors`: the rank-1 factors ``(a_x, g_x)`` of every sample's weight
  gradient in linear layers (paper 000, R5), from one backward pass.
- :func:`capture_mlp_state`: one iteration's per-sample state of a plain MLP,
  :class:`MLPState` (weights, layer inputs, pre-activation gradients, gates), as paper
  000's theorems (:mod:`collapselab.theory.diversity_trap`) read it;
  :func:`single_sample_feature_changes`.
- :func:`model_inputs`, :func:`first_param`: a batch's inputs on the model's device and in
  its floating dtype, as every measurement pass feeds them.
- :func:`eval_mode`: eval mode that restores every submodule's own train/eval flag.
- :func:`batch_coupling_modules`: modules whose output mixes the samples of a batch.
- :func:`deepfool`, :func:`deepfool_robustness`: minimal adversarial perturbations of a
  model's inputs and the robustness measure of paper 003.
"""

from collapselab.probe.capture import FeatureCapture, flatten_batch
from collapselab.probe.gradients import (
    GATED_TYPES,
    GradientCapture,
    cross_entropy_per_sample,
    per_sample_gradients,
)
from collapselab.probe.inputs import first_param, model_inputs
from collapselab.probe.linear_factors import LinearFactors, linear_factors
from collapselab.probe.mlp_capture import capture_mlp_state, single_sample_feature_changes
from collapselab.probe.mlp_state import MLPState
from collapselab.probe.modes import batch_coupling_modules, eval_mode
from collapselab.probe.robustness import deepfool, deepfool_robustness
from collapselab.probe.select import LayerSpec, resolve_layers

__all__ = [
    "GATED_TYPES",
    "FeatureCapture",
    "GradientCapture",
    "LayerSpec",
    "LinearFactors",
    "MLPState",
    "batch_coupling_modules",
    "capture_mlp_state",
    "cross_entropy_per_sample",
    "deepfool",
    "deepfool_robustness",
    "eval_mode",
    "first_param",
    "flatten_batch",
    "linear_factors",
    "model_inputs",
    "per_sample_gradients",
    "resolve_layers",
    "single_sample_feature_changes",
]
