r"""The run function of ``mse-nc-theory``: SNR dynamics on the central path and a UFM Fig. 2.

Two simulations (note 003 §5.4 (b)-(d)), both on the CPU in seconds:

1. **Renormalised gradient descent** (App. D.1, the paper's own discrete procedure,
   :class:`~collapselab.theory.central_path.RenormalisedGD`) on an unconstrained-features
   instance with prescribed initial SNR singular values ``omega_j(0)``, recording
   ``omega_j(t)`` and the drift of the SNR singular vectors; held against both closed forms
   of :mod:`collapselab.theory.snr_dynamics`: the paper's Prop. 2 (``"published"``,
   ``c1 log w + c2 w^2 + c3 w^4 = a + t``) and the rate the renormalised flow actually
   follows (``"corrected"``, note 003 §3.9).
2. **Plain gradient descent on the MSE unconstrained-features model** with weight decay
   (:func:`~collapselab.theory.ufm_mse.ufm_mse_descent`), recording the decomposition
   ``L = L_NC1 + L_NC2/3 + L_LS⊥`` and the NC metrics at log-spaced steps: the
   unconstrained-features analogue of Fig. 2.

Stored: ``arrays/snr_dynamics.npz`` (times, simulated and predicted ``omega``, drift, and
dense closed-form curves), rows of split ``"ufm"`` (one per recorded step and metric,
``step`` = the gradient step) and summary rows of split ``"snr"``. The configuration is a
:class:`~collapselab.experiments.mse_nc.presets.TheoryPreset`; the figures and the claims
read what is stored (:mod:`~collapselab.experiments.mse_nc.figures`,
:mod:`~collapselab.experiments.mse_nc.claims`).
"""

from __future__ import annotations

import numpy as np

from collapselab.experiments.mse_nc.presets import SNRSimulation, UFMDescent
from collapselab.experiments.mse_nc.threads import torch_threads
from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.snr_dynamics import VARIANTS, omega_closed_form, verify_snr_dynamics
from collapselab.theory.ufm_mse import UFMMSE, ufm_mse_descent


def run_theory(run: Run, context: RunContext) -> None:
    """Run both simulations and store their records (see the module docstring)."""
    with torch_threads(context.config.torch_threads):
        _snr_dynamics(run, context, context.config.snr)
        _ufm_descent(run, context, context.config.ufm)


def _snr_dynamics(run: Run, context: RunContext, s: SNRSimulation) -> None:
    with context.progress.task("SNR simulator", 1, "steps") as progress:
        rep = verify_snr_dynamics(
            s.n_classes,
            s.n_per_class,
            s.dim,
            omega0=None if s.omega0 is None else list(s.omega0),
            seed=s.seed,
            t_end=s.t_end,
            lr=s.lr,
            method=s.method,
            n_records=s.n_records,
            progress=progress,
        )
    traj = rep.trajectory
    dense_t = np.linspace(0.0, s.t_end, 400)
    dense = {
        f"dense_{v}": omega_closed_form(rep.omega_simulated[0], dense_t, s.n_classes,
                                        s.n_per_class, v)
        for v in VARIANTS
    }  # fmt: skip
    run.save_array(
        "snr_dynamics",
        times=rep.times,
        omega_simulated=rep.omega_simulated,
        omega_published=rep.omega_published,
        omega_corrected=rep.omega_corrected,
        left_drift=traj.left_drift,
        right_drift=traj.right_drift,
        nc1_trace=traj.metrics["nc1_trace"],
        dense_times=dense_t,
        **dense,
    )
    summary = {k: v for k, v in rep.summary().items() if isinstance(v, (int, float))}
    run.log_dict(0, summary, split="snr")
    run.update_manifest(snr_follows=rep.follows)


def _log_steps(n_steps: int, n_records: int) -> list[int]:
    grid = np.unique(np.round(np.logspace(0, np.log10(n_steps), n_records)).astype(int))
    return sorted({int(s) for s in grid if 1 <= s <= n_steps} | {n_steps})


def _ufm_descent(run: Run, context: RunContext, u: UFMDescent) -> None:
    problem = UFMMSE(u.n_classes, u.n_per_class, u.dim, lam=u.lam, lam_h=u.lam_h)
    with context.progress.task("UFM descent", u.n_steps, "steps") as progress:
        ufm = ufm_mse_descent(
            problem,
            u.lr,
            u.n_steps,
            record_steps=_log_steps(u.n_steps, u.n_records),
            seed=u.seed,
            progress=progress,
        )
    # A key the metrics omit at some records (nc1_snr while Sigma_W is singular) cannot be
    # aligned with the steps: only complete series are stored.
    complete = {k: v for k, v in ufm.metrics.items() if len(v) == len(ufm.steps)}
    rows = [
        {"step": int(step), "epoch": None, "split": "ufm", "layer": "", "metric": k, "value": v[i]}
        for k, v in complete.items()
        for i, step in enumerate(ufm.steps)
    ]
    run.log_many(rows)
    run.flush()
