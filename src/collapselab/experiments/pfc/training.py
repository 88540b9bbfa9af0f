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

The analysis reads the preset's ``geodesic_points`` (the t grid), ``geodesic_direct``
(PFC1 and PFC2 along the line evaluated on the interpolated features, or from their exact
closed forms :func:`~collapselab.theory.geodesic.pfc1_along_line` and
:func:`~collapselab.theory.geodesic.pfc2_along_line`), ``ot_subsample`` and ``one_thread``
(:class:`~collapselab.experiments.pfc.presets.TrainingPreset`). The claims are
:data:`~collapselab.experiments.pfc.claims.TRAINING_CLAIMS`.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

from collapselab._threads import serial_threads
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

__all__ = ["run_training"]


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
    # One thread for the small networks (TrainingPreset.one_thread says why).
    with serial_threads() if config.one_thread else contextlib.nullcontext():
        monitor = Monitor(
            setup.model,
            setup.data.train,
            layers=setup.layers,
            families=[PFC(path_layers=setup.layers)],
            schedule=setup.measure_epochs,
            initial=True,
            run=run,
            batch_size=config.eval_batch_size,
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
    batch_size = setup.config.eval_batch_size
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
    sub = config.ot_subsample
    rows = None
    if sub:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=min(sub, n), replace=False))
    h0, h1, picked = _capture(setup, rows)
    y = setup.data.train.y
    positions = _final_positions(run, layers, epoch)
    ts = np.linspace(0.0, 1.0, config.geodesic_points)
    closed = {
        "nc1_trace_ratio": lambda t: pfc1_along_line(h0, h1, y, t),
        "nc2_etf_distance": lambda t: pfc2_along_line(h0, h1, y, t),
    }
    # Directly evaluated metrics cost a pass over (N, D) features per time; at paper scale
    # PFC1 and PFC2 come from their exact closed forms and only PFC3 is evaluated directly.
    direct = PFC_KEYS if config.geodesic_direct else ("ncc_accuracy",)
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
