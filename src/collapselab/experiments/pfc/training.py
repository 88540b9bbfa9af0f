"""Figs 2-3 of paper 001: PFC metrics of a trained ResNet per layer, over epochs and depth.

A run trains one network (:mod:`collapselab.experiments.pfc.networks`) and measures, at the
configured epochs, PFC1-PFC3 of every measured layer on the whole training split with a
:class:`~collapselab.track.Monitor` (two exact passes per measurement), with the relative
depth position ``pos(l)`` (§IV-A) and the ε-empirical effective depth. After training it
captures the features of the trained network once more and stores

* the geodesic prediction (§IV-A, Fig. 3 blue curve): PFC1-3 of
  ``h^(t) = (1-t) h^(0) + t h^(L)`` on a grid of t and at every layer's ``pos(l)``, with
  the closed forms of PFC1 and PFC2 along the line (``arrays/geodesic.npz``);
* Theorem 1's ``S = Σ_k <h̃_k^(0), h̃_k^(L)>`` and the class-mean transport cost (rows
  ``theorem1_s``, ``theorem1_s_cosine``, ``class_mean_transport_cost``);
* optionally optimal-transport diagnostics of the layer stack on a subsample (beyond the
  paper: ``w2_squared``, ``ot_cost_ratio`` per transition, ``geodesic_efficiency``).

Configuration keys read here, besides those of
:mod:`~collapselab.experiments.pfc.networks`: ``geodesic_points`` (the t grid),
``geodesic_direct`` (evaluate PFC1 and PFC2 on the interpolated features directly, or, at
paper scale, from their exact closed forms
:func:`~collapselab.theory.geodesic.pfc1_along_line` and
:func:`~collapselab.theory.geodesic.pfc2_along_line`; PFC3 is always evaluated directly),
``ot_subsample`` (samples of the OT diagnostics, ``None`` to skip) and ``cpu_threads`` (1:
one BLAS/torch thread, faster for the small quick networks on a shared 2-core machine).

The claims are those of §IV-A and Figs 2-3, each with its threshold fixed here before any
run: see :data:`TRAINING_CLAIMS`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from collapselab.experiments.claims import (
    AcrossLayers,
    Claim,
    ClaimResult,
    Final,
    NotEvaluable,
    RunResults,
    rank_correlation,
    value_above,
)
from collapselab.experiments.pfc._common import (
    cpu_threads,
    max_rise,
    spearman,
)
from collapselab.experiments.pfc.networks import NetworkSetup, build_network_setup
from collapselab.experiments.registry import RunContext
from collapselab.families import PFC
from collapselab.metrics import PFC_KEYS
from collapselab.probe import FeatureCapture, eval_mode
from collapselab.store import Run
from collapselab.theory.geodesic import (
    class_mean_transport_cost,
    geodesic_curve,
    pfc1_along_line,
    pfc2_along_line,
    theorem1_s,
)
from collapselab.theory.transport import layer_transport
from collapselab.track import Monitor
from collapselab.train import train

__all__ = [
    "BAND",
    "DEPTH_RHO",
    "EARLY_MARGIN",
    "TRAINING_CLAIMS",
    "run_training",
]

DEPTH_RHO = 0.8
"""Spearman correlation with depth a PFC metric must reach at the final epoch (|rho|).

The paper claims monotonicity (rho = -1 for PFC1/PFC2, +1 for PFC3); 0.8 tolerates one
adjacent swap among five to seven layers and ties of PFC3 at 1 behind the effective depth.
"""

EARLY_MARGIN = 0.5
"""How much weaker (less negative) PFC1's depth correlation must be early in training than
at the final epoch for "the order is not yet established" to hold."""

BAND = 0.25
"""Largest deviation of the geodesic prediction from a measured layer, as a fraction of the
measured values' span across layers (PFC1 on a log10 scale, as plotted). The paper prints
no numbers (note §5.1): its Fig. 3 shows the blue curve "predicting" the green points at
the scale of the panels, which we read as within a quarter of the panel's span."""

MONOTONE_TOL = 1e-9
"""Numerical slack of "non-increasing" for the predicted curves (relative to the value at
t = 0 for PFC1, absolute for PFC2 in [0, 2]); PFC3 is an exact count."""

_SOURCE = "001 §IV-A"


# ---------------------------------------------------------------------------------------
# the run


def run_training(run: Run, context: RunContext) -> None:
    """Train the configured network, measuring PFC1-3 per layer; then the geodesic analysis."""
    config = context.config
    setup = build_network_setup(
        config, data_dir=context.data_dir, seed=context.seed, device=context.device
    )
    run.update_manifest(
        pfc={
            "layers": setup.layers,
            "n_train": len(setup.data.train),
            "train_class_counts": setup.data.train.class_counts().tolist(),
            "model": type(setup.model).__name__,
            "measure_epochs": setup.measure_epochs,
        }
    )
    with cpu_threads(config):
        monitor = Monitor(
            setup.model,
            setup.data.train,
            layers=setup.layers,
            families=[PFC(path_layers=setup.layers)],
            schedule=setup.measure_epochs,
            initial=True,
            run=run,
            batch_size=int(config.get("eval_batch_size", 1024)),
        )
        callbacks = [monitor.callback(), *context.callbacks]
        result = train(
            setup.model, setup.data, setup.train_config, callbacks, run=run, finish_run=False
        )
        if result.failed:
            return  # the loop marked the run failed with the offending step
        _analyse(
            run, setup, step=result.iterations, epoch=result.epochs_completed, seed=context.seed
        )
    run.flush()


def _capture(
    setup: NetworkSetup, rows: np.ndarray | None
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """First and last measured layer on the whole training split, and every layer on ``rows``.

    Features are flattened, moved to the CPU and kept in float32 (the metrics convert to
    float64); the data are visited once in a fixed order, in eval mode.
    """
    model, layers = setup.model, setup.layers
    batch_size = int(setup.config.get("eval_batch_size", 1024))
    device = next(model.parameters()).device
    first, last = [], []
    subset: dict[str, list[torch.Tensor]] = {name: [] for name in layers}
    wanted = None if rows is None else torch.from_numpy(rows)
    offset = 0
    loader = setup.data.train.loader(batch_size=batch_size, shuffle=False)
    with eval_mode(model), torch.no_grad(), FeatureCapture(model, layers) as cap:
        for x, _ in loader:
            model(x.to(device))
            feats = {name: cap.outputs[name].float().cpu() for name in layers}
            first.append(feats[layers[0]])
            last.append(feats[layers[-1]])
            if wanted is not None:
                local = wanted[(wanted >= offset) & (wanted < offset + x.shape[0])] - offset
                for name in layers:
                    subset[name].append(feats[name][local])
            offset += x.shape[0]
    picked = {name: torch.cat(parts) for name, parts in subset.items()} if rows is not None else {}
    return torch.cat(first), torch.cat(last), picked


def _final_positions(run: Run, layers: list[str], epoch: int) -> np.ndarray:
    table = run.metrics()
    rows = table[
        (table["metric"] == "pfc_position")
        & (table["split"] == "train")
        & (table["epoch"] == epoch)
    ]
    last = rows.drop_duplicates(subset=["layer"], keep="last").set_index("layer")["value"]
    missing = [name for name in layers if name not in last.index]
    if missing:
        raise RuntimeError(
            f"no relative position (pfc_position) was measured at epoch {epoch} for layers "
            f"{missing}; the final measurement failed"
        )
    return last.loc[layers].to_numpy(dtype=np.float64)


def _analyse(run: Run, setup: NetworkSetup, *, step: int, epoch: int, seed: int) -> None:
    """Geodesic prediction, Theorem 1's S, transport cost and OT diagnostics of the trained net."""
    config, layers = setup.config, setup.layers
    n = len(setup.data.train)
    sub = config.get("ot_subsample")
    rows = None
    if sub:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=min(int(sub), n), replace=False))
    h0, h1, picked = _capture(setup, rows)
    y = setup.data.train.y
    positions = _final_positions(run, layers, epoch)
    ts = np.linspace(0.0, 1.0, int(config.get("geodesic_points", 101)))
    closed = {
        "nc1_trace_ratio": lambda t: pfc1_along_line(h0, h1, y, t),
        "nc2_etf_distance": lambda t: pfc2_along_line(h0, h1, y, t),
    }
    # Directly evaluated metrics cost a pass over (N, D) features per time; at paper scale
    # PFC1 and PFC2 come from their exact closed forms and only PFC3 is evaluated directly.
    direct = PFC_KEYS if config.get("geodesic_direct", True) else ("ncc_accuracy",)
    curve = geodesic_curve(h0, h1, y, ts, direct)
    at_layers = geodesic_curve(h0, h1, y, positions, direct)
    for key, fn in closed.items():
        curve.setdefault(key, fn(ts))
        at_layers.setdefault(key, fn(positions))
    run.save_array(
        "geodesic",
        t=ts,
        layers=np.array(layers),
        positions=positions,
        pfc1_closed_form=closed["nc1_trace_ratio"](ts),
        pfc2_closed_form=closed["nc2_etf_distance"](ts),
        **{f"curve_{k}": v for k, v in curve.items()},
        **{f"predicted_{k}": v for k, v in at_layers.items()},
    )
    s = theorem1_s(h0, h1, y)
    norm0, norm1 = theorem1_s(h0, h0, y), theorem1_s(h1, h1, y)
    cost = class_mean_transport_cost(h0, h1, y)
    run.log_dict(
        step,
        {
            "theorem1_s": s,
            "theorem1_s_cosine": s / math.sqrt(norm0 * norm1) if norm0 * norm1 > 0 else math.nan,
            "class_mean_transport_cost": cost,
        },
        epoch=epoch,
        split="train",
    )
    if rows is not None and len(rows) >= 2:
        ot = layer_transport([picked[name] for name in layers])
        for i, name in enumerate(layers[1:]):
            run.log_dict(
                step,
                {
                    "w2_squared": float(ot.w2_squared[i]),
                    "ot_cost_ratio": float(ot.ratio[i]),
                    "ot_identity_mass": float(ot.identity_mass[i]),
                },
                epoch=epoch,
                split="train",
                layer=name,
            )
        run.log_dict(
            step,
            {
                "w2_squared_end_to_end": ot.w2_squared_end_to_end,
                "geodesic_efficiency": ot.geodesic_efficiency,
                "ot_subsample": float(len(rows)),
            },
            epoch=epoch,
            split="train",
        )
        run.save_array(
            "transport",
            samples=rows,
            w2_squared=ot.w2_squared,
            correspondence_cost=ot.correspondence_cost,
            ratio=ot.ratio,
            straightness=ot.straightness,
        )


# ---------------------------------------------------------------------------------------
# claims


def _last_layer_separable(results: RunResults) -> ClaimResult:
    _, acc = AcrossLayers("ncc_accuracy")(results)
    last = float(acc[-1])
    values: dict[str, float] = {"last_layer_ncc_accuracy": last, "n_blocks": float(acc.size - 1)}
    try:
        values["effective_depth"] = Final("effective_depth")(results)
    except NotEvaluable:
        values["effective_depth"] = math.nan
    zero = results.zero_error_epoch()
    values["zero_error_epoch"] = math.nan if zero is None else float(zero)
    holds = last == 1.0
    detail = (
        f"last measured layer: train NCC accuracy {last:.6g} ({'=' if holds else '<'} 1); "
        f"effective depth (eps 0.01) {values['effective_depth']:g} of {acc.size - 1} blocks; "
        f"zero training error from epoch {values['zero_error_epoch']:g}"
    )
    return ClaimResult("holds" if holds else "does not hold", values, 1.0, detail)


def _early_weaker(epoch: int) -> Any:
    def evaluate(results: RunResults) -> ClaimResult:
        x_f, y_f = AcrossLayers("nc1_trace_ratio")(results)
        x_e, y_e = AcrossLayers("nc1_trace_ratio", epoch=epoch)(results)
        rho_final, rho_early = spearman(x_f, y_f), spearman(x_e, y_e)
        values = {"rho_early": rho_early, "rho_final": rho_final, "early_epoch": float(epoch)}
        if not (math.isfinite(rho_final) and math.isfinite(rho_early)):
            raise NotEvaluable("a rank correlation is undefined (constant PFC1 across layers)")
        gap = rho_early - rho_final
        values["rho_early_minus_final"] = gap
        holds = gap >= EARLY_MARGIN
        detail = (
            f"Spearman rho of PFC1 with depth: {rho_early:.3g} at epoch {epoch}, "
            f"{rho_final:.3g} at the final epoch; difference {gap:.3g} "
            f"({'>=' if holds else '<'} {EARLY_MARGIN:g})"
        )
        return ClaimResult("holds" if holds else "does not hold", values, EARLY_MARGIN, detail)

    return evaluate


def _span(values: np.ndarray) -> float:
    return float(np.max(values) - np.min(values))


def _band(results: RunResults) -> ClaimResult:
    layers = [str(s) for s in results.array("geodesic", "layers")]
    values: dict[str, float] = {}
    worst = 0.0
    parts = []
    for key in PFC_KEYS:
        _, observed = AcrossLayers(key, layers=layers)(results)
        predicted = results.array("geodesic", f"predicted_{key}")
        if key == "nc1_trace_ratio":
            if np.any(observed <= 0) or np.any(predicted <= 0):
                raise NotEvaluable("PFC1 is not positive at every layer; no log scale")
            observed, predicted = np.log10(observed), np.log10(predicted)
        span = _span(observed)
        if span == 0:
            raise NotEvaluable(f"{key} is constant across layers; the band is undefined")
        deviation = float(np.max(np.abs(predicted - observed))) / span
        values[f"{key}_deviation"] = deviation
        worst = max(worst, deviation)
        parts.append(f"{key} {deviation:.3g}")
    values["max_deviation"] = worst
    holds = worst <= BAND
    detail = (
        "max |prediction - measured| / span of the measured layers (PFC1 in log10): "
        + ", ".join(parts)
        + f" ({'<=' if holds else '>'} {BAND:g})"
    )
    return ClaimResult("holds" if holds else "does not hold", values, BAND, detail)


def _prediction_monotone(results: RunResults) -> ClaimResult:
    pfc1 = results.array("geodesic", "curve_nc1_trace_ratio")
    pfc2 = results.array("geodesic", "curve_nc2_etf_distance")
    pfc3 = results.array("geodesic", "curve_ncc_accuracy")
    rise1 = max_rise(pfc1) / abs(pfc1[0]) if pfc1[0] != 0 else max_rise(pfc1)
    rise2 = max_rise(pfc2)
    drop3 = max_rise(-pfc3)
    values = {"pfc1_max_relative_rise": rise1, "pfc2_max_rise": rise2, "pfc3_max_drop": drop3}
    ok = rise1 <= MONOTONE_TOL and rise2 <= MONOTONE_TOL and drop3 <= 0
    detail = (
        f"along the line from layer 0 to the last layer: largest rise of PFC1 {rise1:.3g} "
        f"(relative), of PFC2 {rise2:.3g}, largest drop of PFC3 {drop3:.3g}; monotone needs "
        f"rises <= {MONOTONE_TOL:g} and no drop"
    )
    return ClaimResult("holds" if ok else "does not hold", values, MONOTONE_TOL, detail)


TRAINING_CLAIMS: list[Claim] = [
    Claim(
        name="last-layer-ncc-separable",
        statement=(
            "The setting of the paper: at the final epoch the last layer is NCC separable on "
            "the training set (PFC3 = 1), so the network is in the terminal phase."
        ),
        source="001 §II-B, §IV-A (architectures chosen so that the last layer is NCC separable)",
        threshold="train NCC accuracy of the last measured layer at the final epoch == 1",
        evaluate=_last_layer_separable,
    ),
    rank_correlation(
        name="pfc1-decreases-with-depth",
        statement="At the final epoch PFC1 (Tr Σ_W / Tr Σ_B) decreases with depth.",
        source=f"{_SOURCE}, Fig. 3 (PFC conjecture, Eq. 17)",
        series=AcrossLayers("nc1_trace_ratio"),
        threshold=DEPTH_RHO,
        direction="decreasing",
    ),
    rank_correlation(
        name="pfc2-decreases-with-depth",
        statement="At the final epoch PFC2 (distance of the class means to a simplex ETF) "
        "decreases with depth.",
        source=f"{_SOURCE}, Fig. 3 (PFC conjecture, Eq. 18)",
        series=AcrossLayers("nc2_etf_distance"),
        threshold=DEPTH_RHO,
        direction="decreasing",
    ),
    rank_correlation(
        name="pfc3-increases-with-depth",
        statement="At the final epoch PFC3 (NCC accuracy) increases with depth towards 1.",
        source=f"{_SOURCE}, Fig. 3 (PFC conjecture, Eq. 19)",
        series=AcrossLayers("ncc_accuracy"),
        threshold=DEPTH_RHO,
        direction="increasing",
    ),
    Claim(
        name="order-not-established-at-initialization",
        statement=(
            "Early in training the per-layer metrics are not yet ordered by depth: at the "
            "random initialization PFC1's depth order is weaker than at the final epoch."
        ),
        source=f"{_SOURCE}, Fig. 2 ('these metrics start at random initialization')",
        threshold=(
            f"Spearman rho(PFC1, depth) at epoch 0 >= rho at the final epoch + {EARLY_MARGIN:g}"
        ),
        evaluate=_early_weaker(0),
    ),
    Claim(
        name="order-not-established-after-first-epoch",
        statement=(
            "Early in training the per-layer metrics are not yet ordered by depth: after the "
            "first epoch PFC1's depth order is weaker than at the final epoch."
        ),
        source=f"{_SOURCE}, Fig. 2",
        threshold=(
            f"Spearman rho(PFC1, depth) at epoch 1 >= rho at the final epoch + {EARLY_MARGIN:g}"
        ),
        evaluate=_early_weaker(1),
    ),
    value_above(
        name="theorem1-s-nonnegative",
        statement=(
            "Theorem 1's assumption holds on the trained network: S = Σ_k <h̃_k^(0), h̃_k^(L)> "
            ">= 0 between layer 0 and the last layer."
        ),
        source=(
            "001 §III-B, Theorem 1 ('Empirical result in Section IV-A shows that this "
            "assumption is valid')"
        ),
        value=Final("theorem1_s"),
        threshold=0.0,
    ),
    Claim(
        name="geodesic-within-band",
        statement=(
            "The geodesic (straight-line) prediction from layer 0 to the last layer predicts "
            "the measured PFC metrics of the intermediate layers at their relative positions."
        ),
        source=f"{_SOURCE}, Fig. 3 (blue curve vs green points)",
        threshold=(
            f"for PFC1 (log10), PFC2 and PFC3: max over layers |predicted - measured| <= "
            f"{BAND:g} x the span of the measured values across layers"
        ),
        evaluate=_band,
    ),
    Claim(
        name="geodesic-prediction-monotone",
        statement="The predicted curves are monotone: PFC1 and PFC2 decrease, PFC3 increases.",
        source=f"{_SOURCE}, Fig. 3 caption ('both observations and predictions are monotonic')",
        threshold=(
            f"on the t grid: rises of PFC1 (relative to t = 0) and PFC2 <= {MONOTONE_TOL:g}, "
            "no drop of PFC3"
        ),
        evaluate=_prediction_monotone,
    ),
]
"""The claims of a PFC training run, thresholds fixed before any run (module constants)."""
