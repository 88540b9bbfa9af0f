r"""The PC-bias family: a deep linear network's per-PC convergence and its gradient-scale
matrices, measured during training (paper 002, Figs. 3-4; R22-R23).

A model procedure (``Needs(model=True)``) that reads the weights of a **bias-free chain of
``nn.Linear`` layers** (:class:`~collapselab.models.DeepLinear`; no other parameters), in
module order ``W_1, ..., W_L``, as float64:

* ``pc_distance*`` (model level, layer ``""``): the compact matrix ``W = W_L ⋯ W_1`` in the
  training data's principal frame, ``W̃ = W U``, against the least-squares optimum
  ``W̃_opt`` (:func:`collapselab.metrics.pcbias.pc_distance` of this one network). The
  frame is given to the family (``frame=``, a
  :class:`~collapselab.metrics.pc_frame.PCFrame`, or :meth:`PCBias.from_data`) because the
  Monitor's loaders hold minibatches, not the summed ``X^T X``; the optimum defaults to
  ``frame.optimum("corrected")`` (``Σ_YX Σ_XX^+``, one-hot targets) and may be given.
  The per-PC distances themselves, ``(q,)``, and ``W̃`` itself, ``(K, q)`` (for the
  across-run std of an ensemble, :func:`collapselab.metrics.pcbias.pc_ensemble_std`), go
  to ``arrays/pcbias_step<step>.npz`` as ``"pc_distance"`` and ``"compact_pc"``
  (:meth:`PCBias.take_arrays`).
* ``scale_*`` (per weight layer, the module's name): entry statistics of the
  gradient-scale matrices ``A_l``, ``B_l`` of Eq. 7
  (:func:`collapselab.metrics.pcbias.scale_matrix_statistics`), the diagonal measured
  against Thm 3's ``α_l``, ``β_l`` at the model's initialisation (``scales="init"``), the
  per-measurement ``tr/dim`` (``"trace"``) or not at all (``"none"``: the diagonal itself).

Train split only. Distributed mode ``"replicated"``: the values are functions of the weights
(and of the frame given to the family), which are the same in every process of a
``torch.distributed`` run, so every process computes one process's values. The compact
matrix, the gradient-scale matrices and Thm 3's scales come from
:mod:`collapselab.theory.pcbias`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collapselab.checks import as_label_array, as_real_array, check_choice, check_float, check_int
from collapselab.families.arrays import ensemble_runs, measurement_arrays
from collapselab.families.family import MODEL_LAYER, Family, Key, ModelAccess, Needs
from collapselab.metrics.pc_frame import PCFrame, principal_frame
from collapselab.metrics.pcbias import pc_distance, scale_matrix_statistics
from collapselab.store import Run
from collapselab.theory.pcbias import compact_matrix, expected_scales, gradient_scale_matrices

_MODEL = Needs(model=True)
_TRAIN = ("train",)
_SOURCE = "002 Fig. 4, Eq. 10 (note R22)"
_SCALE_SOURCE = "002 Fig. 3, Eq. 7, Thm 3 (note R23)"

DISTANCE_KEYS = ("pc_distance", "pc_distance_top", "pc_distance_bottom")
SCALE_KEYS = tuple(
    f"scale_{m}_{part}_{stat}"
    for m in ("a", "b")
    for part in ("diagonal", "offdiagonal")
    for stat in ("mean", "std")
)
SCALES = ("init", "trace", "none")


def _scale_key(name: str) -> Key:
    matrix = "A_l (K x K)" if name.startswith("scale_a") else "B_l (q x q)"
    ref = "α_l" if name.startswith("scale_a") else "β_l"
    if "_diagonal_" in name:
        definition = f"{name.rsplit('_', 1)[1]} over i of |({matrix})_ii - {ref}|"
    else:
        definition = f"{name.rsplit('_', 1)[1]} over i != j of ({matrix})_ij"
    return Key(name, definition, _SCALE_SOURCE, _MODEL, where="weights", splits=_TRAIN)


class PCBias(Family):
    """Per-PC distance to the optimum and gradient-scale statistics of a deep linear net.

    Args:
        keys: subset of :data:`DISTANCE_KEYS` and :data:`SCALE_KEYS` (default: all of them
            with a ``frame``, the scale keys without one).
        frame: the training data's principal frame
            (:func:`collapselab.metrics.pc_frame.principal_frame` of the flattened inputs and
            one-hot targets); needed by the distance keys.
        optimum: ``W̃_opt`` in that frame, ``(K, q)`` (default ``frame.optimum()``).
        row: measure the distance on class row ``r`` (Fig. 4's ``w_1`` is ``row=0``)
            instead of the column norm.
        fraction: the share of PCs averaged by ``pc_distance_top`` (the first
            ``ceil(fraction q)``) and ``pc_distance_bottom`` (the last as many).
        scales: the diagonal's reference: ``"init"`` (Thm 3's ``α_l, β_l`` for the model's
            widths and init, :func:`collapselab.theory.pcbias.expected_scales`; the model
            must have ``widths`` and ``init`` like :class:`~collapselab.models.DeepLinear`,
            or give ``variances``), ``"trace"`` or ``"none"``.
        variances: per-layer init variances ``σ_l²`` for ``scales="init"`` (default: from
            the model's ``init``).
        schedule: when the Monitor measures this family (a
            :class:`collapselab.track.Schedule`; default: the Monitor's schedule).
    """

    name = "pcbias"
    distributed = "replicated"
    keys = (
        Key(
            "pc_distance",
            "‖W̃ − W̃_opt‖_F, W̃ = W_L⋯W_1 U in the train data's principal frame",
            _SOURCE,
            _MODEL,
            where="model",
            splits=_TRAIN,
        ),
        Key(
            "pc_distance_top",
            "mean over the first ceil(f q) PCs j of ‖w̃_j − w̃_j^opt‖₂ (or row r)",
            _SOURCE,
            _MODEL,
            where="model",
            splits=_TRAIN,
        ),
        Key(
            "pc_distance_bottom",
            "mean over the last ceil(f q) PCs j of ‖w̃_j − w̃_j^opt‖₂ (or row r)",
            _SOURCE,
            _MODEL,
            where="model",
            splits=_TRAIN,
        ),
        *(_scale_key(k) for k in SCALE_KEYS),
    )

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        *,
        frame: PCFrame | None = None,
        optimum: object | None = None,
        row: int | None = None,
        fraction: float = 0.1,
        scales: str = "init",
        variances: Sequence[float] | None = None,
        schedule: Any = None,
    ) -> None:
        self.frame = frame
        super().__init__(keys, schedule=schedule)
        if frame is not None and not (
            hasattr(frame, "rotate") and hasattr(frame, "optimum") and hasattr(frame, "n_pcs")
        ):
            raise TypeError(
                f"frame must be a collapselab.metrics.PCFrame, got {type(frame).__name__}"
            )
        wanted = set(self.requested) & set(DISTANCE_KEYS)
        if wanted and frame is None:
            raise ValueError(
                f"the pcbias keys {sorted(wanted)} need frame= (the training data's principal "
                "frame; PCBias.from_data(x, labels) builds it)"
            )
        self.optimum = None
        if frame is not None:
            opt = frame.optimum() if optimum is None else optimum
            self.optimum = as_real_array(
                "optimum", opt, ndim=2, shape=(frame.n_outputs, frame.n_pcs)
            )
        elif optimum is not None:
            raise ValueError("optimum needs frame= (the principal frame it is expressed in)")
        self.row = None if row is None else check_int("row", row, minimum=0)
        self.fraction = check_float("fraction", fraction, minimum=0.0, maximum=1.0, strict=True)
        self.scales = check_choice("scales", scales, SCALES)
        self.variances = None if variances is None else [float(v) for v in variances]
        self._arrays: dict[str, Any] = {}

    @classmethod
    def from_data(
        cls, x: object, labels: object, n_classes: int | None = None, **options: Any
    ) -> PCBias:
        """The family for training inputs ``x`` ``(n, ...)`` (flattened to ``(n, q)``) and
        integer ``labels`` ``(n,)``: the principal frame with one-hot targets (the paper's
        ``Σ_YX``), so the optimum is the least-squares solution for one-hot targets."""
        xa = as_real_array("x", x)
        if xa.ndim < 2:
            raise ValueError(f"x must be (n, ...) with one row per example, got {xa.shape}")
        xa = xa.reshape(xa.shape[0], -1)
        y = as_label_array("labels", labels, xa.shape[0], n_classes, source="x")
        k = int(n_classes) if n_classes is not None else int(y.max()) + 1
        return cls(frame=principal_frame(xa, np.eye(k)[y]), **options)

    def default_keys(self) -> tuple[str, ...]:
        if getattr(self, "frame", None) is None:
            return SCALE_KEYS
        return DISTANCE_KEYS + SCALE_KEYS

    # ------------------------------------------------------------------ the procedure
    def compute_model(
        self, keys: frozenset[str], access: ModelAccess
    ) -> dict[str, dict[str, dict[str, float]]]:
        names, weights = _linear_chain(access.model)
        values: dict[str, dict[str, float]] = {}
        self._arrays = {}
        if keys & set(DISTANCE_KEYS):
            values[MODEL_LAYER] = self._distances(keys, weights)
        scale_keys = keys & set(SCALE_KEYS)
        if scale_keys:
            for name, layer_values in zip(
                names, self._scale_values(scale_keys, access.model, weights), strict=True
            ):
                values[name] = layer_values
        return {"train": values}

    def take_arrays(self) -> dict[str, Any]:
        arrays, self._arrays = self._arrays, {}
        return arrays

    def _distances(self, keys: frozenset[str], weights: list[np.ndarray]) -> dict[str, float]:
        if self.frame is None or self.optimum is None:
            raise ValueError("the pcbias distance keys need frame= (PCBias.from_data)")
        w = compact_matrix(weights)
        if w.shape != self.optimum.shape:
            raise ValueError(
                f"the network's compact matrix is {w.shape} but the frame's optimum is "
                f"{self.optimum.shape}: the frame must come from this network's training data"
            )
        w_pc = self.frame.rotate(w)
        if self.row is not None and self.row >= w.shape[0]:
            raise ValueError(f"row must be < K = {w.shape[0]}, got {self.row}")
        per_pc = pc_distance(w_pc[None, None], self.optimum, self.row)[0]
        self._arrays["pc_distance"] = per_pc
        self._arrays["compact_pc"] = w_pc  # (K, q): ensembles' std from the stored runs
        q = per_pc.shape[0]
        count = math.ceil(self.fraction * q - 1e-12)
        out = {
            "pc_distance": float(np.linalg.norm(w_pc - self.optimum)),
            "pc_distance_top": float(per_pc[:count].mean()),
            "pc_distance_bottom": float(per_pc[q - count :].mean()),
        }
        return {k: v for k, v in out.items() if k in keys}

    def _scale_values(
        self, keys: frozenset[str], model: nn.Module, weights: list[np.ndarray]
    ) -> list[dict[str, float]]:
        a, b = gradient_scale_matrices(weights)
        n = len(weights)
        if self.scales == "init":
            alpha, beta = expected_scales(_widths(model, weights), self._variances(model))
            refs_a, refs_b = list(alpha), list(beta)
        else:
            ref = None if self.scales == "none" else "trace"
            refs_a = refs_b = [ref] * n
        out = []
        for layer in range(n):
            values: dict[str, float] = {}
            for label, mat, ref in (("a", a[layer], refs_a[layer]), ("b", b[layer], refs_b[layer])):
                st = scale_matrix_statistics(mat, ref)
                for part in ("diagonal", "offdiagonal"):
                    for stat in ("mean", "std"):
                        key = f"scale_{label}_{part}_{stat}"
                        if key in keys:
                            values[key] = st[f"{part}_{stat}"]
            out.append(values)
        return out

    def _variances(self, model: nn.Module) -> Sequence[float] | str:
        if self.variances is not None:
            return self.variances
        init = getattr(model, "init", None)
        if not isinstance(init, str):
            raise ValueError(
                "scales='init' needs the init variances: a DeepLinear model (its init), or "
                "PCBias(variances=[...]), or scales='trace'/'none'"
            )
        return init


def _widths(model: nn.Module, weights: list[np.ndarray]) -> list[int]:
    return [weights[0].shape[1], *(w.shape[0] for w in weights)]


def _linear_chain(model: nn.Module) -> tuple[list[str], list[np.ndarray]]:
    """The ``nn.Linear`` weights of a bias-free linear chain, in module order, as float64."""
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("the pcbias family needs a deep linear network: no nn.Linear found")
    with_bias = [n for n, m in linears if m.bias is not None]
    if with_bias:
        raise ValueError(f"the pcbias family needs bias-free linear layers; {with_bias} have one")
    # an activation between the layers (DeepReLU) leaves the parameters a linear chain's
    activations = [n for n, m in model.named_modules()
                   if type(m).__module__ == nn.modules.activation.__name__]  # fmt: skip
    if activations:
        raise ValueError(
            f"the pcbias family needs a deep linear network; {activations} are activations "
            "(read a non-linear net's linearisation with models.compact_representation)"
        )
    n_linear = sum(m.weight.numel() for _, m in linears)
    if sum(p.numel() for p in model.parameters()) != n_linear:
        raise ValueError(
            "the pcbias family needs a deep linear network (only bias-free nn.Linear "
            "parameters); this model has others"
        )
    weights = [m.weight.detach().to("cpu", torch.float64).numpy() for _, m in linears]
    for i in range(1, len(weights)):
        if weights[i].shape[1] != weights[i - 1].shape[0]:
            raise ValueError(
                f"linear layers {linears[i - 1][0]!r} -> {linears[i][0]!r} do not chain: "
                f"{weights[i - 1].shape} then {weights[i].shape}"
            )
    return [n for n, _ in linears], weights


def compact_pc_from_runs(
    runs: Sequence[Run | str | os.PathLike[str]],
) -> tuple[np.ndarray, np.ndarray]:
    """``(steps (E,), compact_pc (E, N, K, q))`` of an ensemble of ``N`` runs tracked with
    the ``pcbias`` family and a frame; every run must hold the same measurement steps."""
    per_run, first_steps = [], None
    for run in ensemble_runs(runs):
        loaded = [a for a in measurement_arrays(run, "pcbias") if "compact_pc" in a]
        if not loaded:
            raise ValueError(
                f"run {run.path} has no pcbias measurement with compact_pc: track it with "
                "Monitor(families=[PCBias.from_data(x, labels, K)]) (the distance keys)"
            )
        steps = np.array([int(a["step"]) for a in loaded])
        if first_steps is None:
            first_steps = steps
        elif not np.array_equal(steps, first_steps):
            raise ValueError(
                f"the runs of an ensemble must measure the same steps: {run.path} has "
                f"{steps.tolist()}, the first run {first_steps.tolist()}"
            )
        per_run.append(np.stack([a["compact_pc"] for a in loaded]))
    shapes = {w.shape[1:] for w in per_run}
    if len(shapes) != 1:
        raise ValueError(f"the runs' compact matrices differ in shape (K, q): {sorted(shapes)}")
    return first_steps, np.stack(per_run, axis=1)


__all__ = ["compact_pc_from_runs"]
