"""Fig. 1 of paper 001: straight-line trajectories of 2-D features to simplex-ETF class means.

The paper's illustration of progressive feedforward collapse under the geodesic curve
assumption (§I, §III-B, Eq. 10): every sample moves on a straight line
``h^(t) = (1-t) h^(0) + t h_k^(1)`` from its input feature to the class mean of its class at
the end, and the end class means form a simplex ETF. Here ``K = 3`` classes of 4 points in
the plane: start points are noisy clusters around random class centres; the end means are
the equilateral triangle (the 2-D simplex ETF) about the start's global mean, rotated to the
start's class means (orthogonal Procrustes) and scaled to ``end_scale`` times their root
mean square norm. The PFC metrics and Theorem 1's S are evaluated along the line
(:func:`collapselab.theory.geodesic.straight_line_model`).
"""

from __future__ import annotations

import numpy as np

from collapselab.experiments.registry import RunContext
from collapselab.store import Run
from collapselab.theory.geodesic import simplex_etf, straight_line_model

__all__ = ["run_toy", "toy_instance"]


def toy_instance(
    n_classes: int, n_per_class: int, noise: float, end_scale: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start features ``(N, 2)``, collapsed ETF end features ``(N, 2)`` and labels ``(N,)``."""
    rng = np.random.default_rng(seed)
    angles = np.sort(rng.uniform(0.0, 2.0 * np.pi, n_classes))
    centres = np.column_stack([np.cos(angles), np.sin(angles)])
    y = np.repeat(np.arange(n_classes), n_per_class)
    h0 = centres[y] + noise * rng.standard_normal((y.size, 2))
    means = np.stack([h0[y == k].mean(axis=0) for k in range(n_classes)])
    centre = means.mean(axis=0)
    centred = means - centre
    etf = simplex_etf(n_classes, 2, seed=rng)  # (K, 2), unit norm, rows sum to zero
    # orthogonal Procrustes: the rotation/reflection of the ETF closest to the start means
    u, _, vt = np.linalg.svd(etf.T @ centred)
    etf = etf @ (u @ vt)
    scale = end_scale * np.sqrt(np.mean(np.sum(centred**2, axis=1)))
    h1 = (centre + scale * etf)[y]
    return h0, h1, y


def run_toy(run: Run, context: RunContext) -> None:
    """Build the 2-D instance and evaluate the PFC metrics along the straight lines."""
    config = context.config
    h0, h1, y = toy_instance(
        config.n_classes, config.n_per_class, config.noise, config.end_scale, context.seed
    )
    ts = np.linspace(0.0, 1.0, config.n_grid)
    line = straight_line_model(h0, h1, y, ts)
    run.save_array(
        "toy",
        h0=h0,
        h1=h1,
        labels=y,
        t=ts,
        s=np.float64(line.s),
        **{f"curve_{k}": v for k, v in line.metrics.items()},
    )
    run.log_dict(0, {"theorem1_s": line.s, "transport_cost": line.transport_cost}, split="toy")
    run.flush()
