r"""Unconstrained-features model under MSE with the decomposition of paper 003 (Fig. 2 analogue).

The model (note 003 Eq. 2 conventions, plus a feature penalty): classifier ``W``
(``C x P``), bias ``b`` (``C``) and free features ``H`` (``CN x P``, rows are samples,
labels in the paper's "i-then-c" order, see
:func:`~collapselab.theory.central_path.paper_labels`), with objective

``F(W, b, H) = (1/2) Ave_{i,c} ||W h_{i,c} + b - y_{i,c}||^2 + (lam/2)(||W||_F^2 + ||b||^2)
+ (lam_h/2) ||H||_F^2``.

The first two terms are the paper's loss ``L`` (Eq. 2: ``Ave`` is ``1/(CN)``, the bias is
penalised). The feature penalty sums over all ``CN`` features (the usual UFM convention),
so per feature it weighs ``CN`` times more than the ``1/(CN)`` data term; ``lam_h = 0``
leaves the features free. Gradients, with ``R = (H W^T + 1 b^T - Y)/(CN)``:

``∇_W F = R^T H + lam W``, ``∇_b F = R^T 1 + lam b``, ``∇_H F = R W + lam_h H``.

Solvers: :func:`ufm_mse_descent` (``"literal"``: plain full-batch gradient descent on
``(W, b, H)``, the procedure of note 003 §5.4(d)) records, every ``k`` steps, the loss, the
exact decomposition ``L = L_NC1 + L_NC2/3 + L_LS⊥`` (Theorems 1-2, from
:func:`collapselab.metrics.mse_decomposition`) and the catalogue NC metrics (from
:func:`collapselab.metrics.matrix.matrix_metrics`, as :func:`collapselab.measure` gives
them); :func:`ufm_mse_minimise` (``"converged"``: L-BFGS to a gradient
tolerance). :func:`verify_ufm_mse` holds the decomposition and the central-path
predictions against both.

All arrays are float64 numpy (the matrices are small and solvers take many steps); inputs
may be numpy arrays or torch tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from collapselab._threads import serial_threads
from collapselab.checks import as_real_array, check_float, check_int
from collapselab.metrics.matrix import matrix_metrics
from collapselab.theory.dynamics import diverged

__all__ = [
    "UFMMSE",
    "UFMMSESolution",
    "UFMMSETrajectory",
    "UFMMSEVerification",
    "ufm_mse_descent",
    "ufm_mse_minimise",
    "verify_ufm_mse",
]


@dataclass(frozen=True)
class UFMMSE:
    r"""The MSE unconstrained-features problem (see the module docstring for ``F``).

    Args:
        n_classes: ``C >= 2``. n_per_class: ``N >= 1``. dim: feature dimension ``P``.
        lam: classifier weight decay ``lam >= 0`` (on ``W`` and ``b``, Eq. 2).
        lam_h: feature weight decay ``lam_h >= 0`` (on ``||H||_F^2``).
    """

    n_classes: int
    n_per_class: int
    dim: int
    lam: float = 5e-4
    lam_h: float = 0.0

    def __post_init__(self) -> None:
        check_int("n_classes", self.n_classes, minimum=2)
        check_int("n_per_class", self.n_per_class, minimum=1)
        check_int("dim", self.dim, minimum=1)
        check_float("lam", self.lam, minimum=0.0)
        check_float("lam_h", self.lam_h, minimum=0.0)

    @property
    def n_samples(self) -> int:
        """``CN``."""
        return self.n_classes * self.n_per_class

    @property
    def labels(self) -> np.ndarray:
        """``(CN,)`` labels in the paper's order, ``[0]*N + [1]*N + ...``."""
        return np.repeat(np.arange(self.n_classes), self.n_per_class)

    @property
    def targets(self) -> np.ndarray:
        """``(CN, C)`` one-hot rows (``Y^T``)."""
        return np.eye(self.n_classes)[self.labels]

    def _check(self, W: object, b: object, H: object) -> tuple[np.ndarray, ...]:
        c, p = self.n_classes, self.dim
        return (
            as_real_array("W", W, shape=(c, p)),
            as_real_array("b", b, shape=(c,)),
            as_real_array("H", H, shape=(self.n_samples, p)),
        )

    def _residual(self, w: np.ndarray, b: np.ndarray, h: np.ndarray) -> np.ndarray:
        return h @ w.T + b - self.targets

    def loss(self, W: object, b: object, H: object) -> float:
        r"""The paper's ``L`` (Eq. 2): ``(1/(2CN))||H W^T + 1 b^T - Y||^2 + (lam/2)(...)``."""
        w, bb, h = self._check(W, b, H)
        r = self._residual(w, bb, h)
        return 0.5 * float((r * r).sum()) / self.n_samples + 0.5 * self.lam * (
            float((w * w).sum()) + float(bb @ bb)
        )

    def objective(self, W: object, b: object, H: object) -> float:
        r"""``F = L + (lam_h/2) ||H||_F^2``."""
        h = as_real_array("H", H, shape=(self.n_samples, self.dim))
        return self.loss(W, b, h) + 0.5 * self.lam_h * float((h * h).sum())

    def gradient(
        self, W: object, b: object, H: object
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""``(∇_W F, ∇_b F, ∇_H F)`` (module docstring)."""
        w, bb, h = self._check(W, b, H)
        return self._grad(w, bb, h)

    def _grad(
        self, w: np.ndarray, b: np.ndarray, h: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = self._residual(w, b, h) / self.n_samples
        return r.T @ h + self.lam * w, r.sum(axis=0) + self.lam * b, r @ w + self.lam_h * h

    def initial_point(
        self, seed: int = 0, scale: float = 1.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Random start: ``H`` entries ``N(0, scale^2)``, ``W`` entries ``N(0, scale^2/P)``,
        ``b = 0``."""
        s = check_float("scale", scale, minimum=0.0, strict=True)
        rng = np.random.default_rng(seed)
        h = rng.normal(scale=s, size=(self.n_samples, self.dim))
        w = rng.normal(scale=s / math.sqrt(self.dim), size=(self.n_classes, self.dim))
        return w, np.zeros(self.n_classes), h


# ---------------------------------------------------------------------------------------
# records


def _record(problem: UFMMSE, w: np.ndarray, b: np.ndarray, h: np.ndarray) -> dict[str, float]:
    """Catalogue metrics (:func:`~collapselab.metrics.matrix.matrix_metrics`) plus the raw
    loss, objective and closure residual."""
    row = matrix_metrics(h, problem.labels, w, b, lam=problem.lam, n_classes=problem.n_classes)
    row.pop("nc1_dense", None)
    loss = problem.loss(w, b, h)
    row["loss"] = loss
    row["objective"] = loss + 0.5 * problem.lam_h * float((h * h).sum())
    parts = row["mse_nc1_term"] + row["mse_nc23_term"] + row["mse_ls_perp"]
    row["decomposition_residual"] = abs(loss - parts)
    g = problem._grad(w, b, h)
    row["grad_norm"] = math.sqrt(sum(float((x * x).sum()) for x in g))
    return row


@dataclass
class UFMMSETrajectory:
    """Records of :func:`ufm_mse_descent`.

    Attributes:
        steps: ``(T,)`` step index of each record.
        metrics: per record: ``loss`` (Eq. 2, from the raw samples), ``objective``
            (``+ (lam_h/2)||H||^2``), ``grad_norm``, ``decomposition_residual``
            (``|loss - (L_NC1 + L_NC2/3 + L_LS⊥)|``) and every key of
            :func:`~collapselab.metrics.matrix.matrix_metrics` with ``W, b, lam``
            (``mse_ls_loss`` = ``L_LS``, ``mse_nc1_term``, ``mse_nc23_term``,
            ``mse_ls_perp``, ``mse_ls_perp_ratio``, ``nc1``, ``nc1_snr`` when ``Sigma_W`` is
            nonsingular, ``nc2_*``, ``nc3_*``, ``nc4_ncc_mismatch``, ...). Every series has
            length ``T``; a key missing at a record (``nc1_snr`` at a singular ``Sigma_W``)
            is NaN there.
        W, b, H: the final point. problem: the :class:`UFMMSE`. lr: the step size.
    """

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    W: np.ndarray
    b: np.ndarray
    H: np.ndarray
    problem: UFMMSE
    lr: float


def ufm_mse_descent(
    problem: UFMMSE,
    lr: float,
    n_steps: int,
    record_every: int = 1,
    *,
    init: tuple[object, object, object] | None = None,
    seed: int = 0,
    init_scale: float = 1.0,
    metrics: bool = True,
    record_steps: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> UFMMSETrajectory:
    r"""Plain full-batch gradient descent on ``(W, b, H)`` (the ``"literal"`` solver).

    ``theta <- theta - lr ∇F(theta)`` for all three blocks simultaneously; records at steps
    ``0, k, 2k, ...`` and the last one.

    Args:
        problem: the :class:`UFMMSE`. lr: step size ``> 0``. n_steps: number of steps.
        record_every: ``k``.
        record_steps: instead of ``record_every``, the steps to record (e.g. log-spaced,
            as Fig. 2's epochs); step 0 is always recorded.
        init: ``(W, b, H)``; default :meth:`UFMMSE.initial_point` with ``seed``,
            ``init_scale``.
        metrics: record the catalogue metrics (otherwise only ``loss``, ``objective``).
        progress: called as ``progress(steps_done, n_steps)`` every 1% of the steps.

    Raises:
        FloatingPointError: the iterates overflow (``lr`` too large).
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    n_steps = check_int("n_steps", n_steps, minimum=0)
    every = check_int("record_every", record_every, minimum=1)
    if init is None:
        w, b, h = problem.initial_point(seed, init_scale)
    else:
        w, b, h = (x.copy() for x in problem._check(*init))
    if record_steps is None:
        wanted = set(range(every, n_steps + 1, every)) | {n_steps}
    else:
        wanted = {check_int("record_steps entries", k, minimum=0) for k in record_steps}
        if wanted and max(wanted) > n_steps:
            raise ValueError(f"record_steps go beyond n_steps={n_steps}: max {max(wanted)}")
    steps: list[int] = []
    rows: dict[str, list[float]] = {}

    def record(step: int) -> None:
        if metrics:
            row = _record(problem, w, b, h)
        else:
            loss = problem.loss(w, b, h)
            row = {"loss": loss, "objective": loss + 0.5 * problem.lam_h * float((h * h).sum())}
        # A key can be absent at some records (nc1_snr needs a nonsingular Sigma_W): pad with
        # NaN so that every series stays aligned with ``steps``.
        for key in row.keys() - rows.keys():
            rows[key] = [math.nan] * len(steps)
        steps.append(step)
        for key, series in rows.items():
            series.append(row.get(key, math.nan))

    record(0)
    step = 0
    try:
        with np.errstate(over="raise", invalid="raise"):
            for step in range(1, n_steps + 1):
                gw, gb, gh = problem._grad(w, b, h)
                w, b, h = w - lr * gw, b - lr * gb, h - lr * gh
                if step in wanted:
                    record(step)
                if progress is not None and (step % max(n_steps // 100, 1) == 0 or step == n_steps):
                    progress(step, n_steps)
    except FloatingPointError as err:
        raise diverged(step, lr) from err
    return UFMMSETrajectory(
        steps=np.asarray(steps, dtype=np.int64),
        metrics={k: np.asarray(v, dtype=np.float64) for k, v in rows.items()},
        W=w,
        b=b,
        H=h,
        problem=problem,
        lr=lr,
    )


@dataclass(frozen=True)
class UFMMSESolution:
    """Result of :func:`ufm_mse_minimise`: the point, ``F``, ``||∇F||`` and L-BFGS iterations."""

    W: np.ndarray
    b: np.ndarray
    H: np.ndarray
    objective: float
    grad_norm: float
    n_iter: int
    success: bool


def ufm_mse_minimise(
    problem: UFMMSE,
    *,
    init: tuple[object, object, object] | None = None,
    seed: int = 0,
    init_scale: float = 1.0,
    gtol: float = 1e-9,
    max_iter: int = 20000,
    restarts: int = 3,
) -> UFMMSESolution:
    r"""The ``"converged"`` solver: L-BFGS (``scipy.optimize.minimize``) on ``(W, b, H)``.

    Stops when the largest gradient entry is ``<= gtol`` (restarting L-BFGS up to
    ``restarts`` times when its line search stalls first; ``success`` says whether ``gtol``
    was reached). The MSE UFM objective has no
    spurious local minima for ``lam, lam_h > 0`` (a benign landscape), so a random start
    reaches a global minimiser; with ``lam_h = 0`` the features are unbounded and the
    infimum is approached, not attained.
    """
    from scipy.optimize import minimize

    if init is None:
        w, b, h = problem.initial_point(seed, init_scale)
    else:
        w, b, h = problem._check(*init)
    c, p = problem.n_classes, problem.dim
    sizes = (c * p, c)

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (
            theta[: sizes[0]].reshape(c, p),
            theta[sizes[0] : sizes[0] + sizes[1]],
            theta[sizes[0] + sizes[1] :].reshape(problem.n_samples, p),
        )

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        ww, bb, hh = unpack(theta)
        value = problem.objective(ww, bb, hh)
        return value, np.concatenate([g.reshape(-1) for g in problem._grad(ww, bb, hh)])

    theta0 = np.concatenate([w.reshape(-1), b, h.reshape(-1)])
    gtol = check_float("gtol", gtol, minimum=0.0, strict=True)
    options = {"gtol": gtol, "ftol": 0.0, "maxiter": max_iter, "maxcor": 30}
    theta, n_iter = theta0, 0
    # L-BFGS's line search can stop just short of a tight gtol near machine precision;
    # a restart (fresh curvature memory) usually finishes the job.
    with serial_threads():
        for _ in range(1 + restarts):
            res = minimize(fun, theta, jac=True, method="L-BFGS-B", options=options)
            theta, n_iter = res.x, n_iter + int(res.nit)
            if np.abs(res.jac).max() <= gtol or n_iter >= max_iter:
                break
    ww, bb, hh = unpack(theta)
    grad = np.concatenate([g.reshape(-1) for g in problem._grad(ww, bb, hh)])
    return UFMMSESolution(
        W=ww,
        b=bb,
        H=hh,
        objective=problem.objective(ww, bb, hh),
        grad_norm=float(np.linalg.norm(grad)),
        n_iter=n_iter,
        success=bool(np.abs(grad).max() <= gtol),
    )


# ---------------------------------------------------------------------------------------
# verification


@dataclass
class UFMMSEVerification:
    r"""The decomposition and the central-path predictions held against :func:`ufm_mse_descent`
    and :func:`ufm_mse_minimise`.

    Attributes:
        decomposition_error: ``max`` over records of ``|L - (L_NC1 + L_NC2/3 + L_LS⊥)|``
            (Theorems 1-2; exact, so rounding level).
        objective_monotone: whether ``F`` never increased between records.
        ls_perp_ratio_final: ``L_LS⊥ / L_LS`` at the last record (negligible on the central
            path, Fig. 2).
        ls_perp_step: first recorded step with ``L_LS⊥ / L_LS <= perp_threshold``
            (``-1``: never).
        nc23_below_nc1_step: first recorded step with ``L_NC2/3 < L_NC1`` (``-1``: never):
            "NC2/3 diminishes fastest" (Fig. 2).
        nc1_ratio: ``nc1`` at the end over ``nc1`` at the start.
        final: catalogue metrics at the last record.
        converged: at the :func:`ufm_mse_minimise` solution: ``objective``, ``grad_norm``,
            ``ls_perp`` (a stationary point is on the central path, so 0), ``ls_distance``
            (``||W~ - W~_LS||_F``), ``nc1_trace_ratio`` (exact NC1 at a minimiser with
            ``lam_h > 0``: 0), ``nc2_etf_distance``, ``nc3_self_duality``.
        trajectory: the :class:`UFMMSETrajectory`.
    """

    decomposition_error: float
    objective_monotone: bool
    ls_perp_ratio_final: float
    ls_perp_step: int
    nc23_below_nc1_step: int
    nc1_ratio: float
    final: dict[str, float]
    converged: dict[str, float]
    trajectory: UFMMSETrajectory


def verify_ufm_mse(
    problem: UFMMSE | None = None,
    *,
    lr: float = 1.0,
    n_steps: int = 4000,
    record_every: int = 50,
    seed: int = 0,
    perp_threshold: float = 1e-3,
) -> UFMMSEVerification:
    """Run :func:`ufm_mse_descent` and :func:`ufm_mse_minimise` on ``problem`` and report
    :class:`UFMMSEVerification` (default problem: ``C=4, N=5, P=8, lam=5e-4, lam_h=1e-4``)."""
    if problem is None:
        problem = UFMMSE(4, 5, 8, lam=5e-4, lam_h=1e-4)
    traj = ufm_mse_descent(problem, lr, n_steps, record_every, seed=seed)
    m = traj.metrics
    ratio = m["mse_ls_perp_ratio"]
    below = np.flatnonzero(ratio <= perp_threshold)
    order = np.flatnonzero(m["mse_nc23_term"] < m["mse_nc1_term"])
    sol = ufm_mse_minimise(problem, seed=seed)
    conv = matrix_metrics(
        sol.H, problem.labels, sol.W, sol.b, lam=problem.lam, n_classes=problem.n_classes
    )
    return UFMMSEVerification(
        decomposition_error=float(m["decomposition_residual"].max()),
        objective_monotone=bool((np.diff(m["objective"]) <= 0).all()),
        ls_perp_ratio_final=float(ratio[-1]),
        ls_perp_step=int(traj.steps[below[0]]) if below.size else -1,
        nc23_below_nc1_step=int(traj.steps[order[0]]) if order.size else -1,
        nc1_ratio=float(m["nc1"][-1] / m["nc1"][0]),
        final={k: float(v[-1]) for k, v in m.items()},
        converged={
            "objective": sol.objective,
            "grad_norm": sol.grad_norm,
            "ls_perp": conv["mse_ls_perp"],
            "ls_distance": conv["mse_ls_distance"],
            "nc1_trace_ratio": conv["nc1_trace_ratio"],
            "nc2_etf_distance": conv["nc2_etf_distance"],
            "nc3_self_duality": conv["nc3_self_duality"],
        },
        trajectory=traj,
    )
