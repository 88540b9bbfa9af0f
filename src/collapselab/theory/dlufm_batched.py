r"""Paper 004's full-batch gradient descent of E deep UFMs of one shape at once:
:func:`batched_gradient_descent`.

E starts (one seed each) of one :class:`~collapselab.theory.dlufm.DeepUFM` descend
together: every block is stacked along a leading member axis (``H_1`` as ``(E, d_1, N)``,
``W_l`` as ``(E, d_{l+1}, d_l)``) and one batched forward and backward per step gives every
member its gradient (the formulas of :mod:`collapselab.theory.dlufm`, with ``R = 2s(f − Y)``
and the ReLU masks ``D_l``)

.. math::
    B_L = R,\quad B_l = D_l ⊙ (W_{l+1}ᵀ B_{l+1}),\quad
    ∂F/∂W_l = B_l H_lᵀ + λ_{W_l} W_l,\quad ∂F/∂H_1 = W_1ᵀ B_1 + λ_{H_1} H_1,

then each member steps ``θ ← θ − lr ∇F(θ)`` (or heavy-ball). The batched products are
NumPy's stacked ``matmul``, which calls the same BLAS product on every member's matrices as
the lone descent does on its own, and every other operation is elementwise or reduces one
member's slice in the lone order, so member ``e``'s trajectory is bit for bit
:func:`~collapselab.theory.dlufm.gradient_descent` from ``seeds[e]`` (tested). The recorded
objective and gradient norm are the model's own
(:meth:`~collapselab.theory.dlufm.DeepUFM.value_and_gradient` at the recorded point).

What it saves is the interpreter: a step of a small UFM is a few dozen tiny array
operations whose cost is mostly Python's, paid once per step for all E members.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from collapselab._threads import serial_threads
from collapselab.checks import check_float, check_int
from collapselab.theory.dlufm import (
    DeepUFM,
    DescentTrajectory,
    UFMParameters,
    checkpoint_steps,
    descent_step,
)
from collapselab.theory.dynamics import diverged

__all__ = ["batched_gradient", "batched_gradient_descent"]

Blocks = tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]
"""Stacked ``(H_1, [W_l], [b_l])``, each with a leading member axis."""


def _t(a: np.ndarray) -> np.ndarray:
    """Each member's matrix transposed (a view, as ``w.T`` is for one member)."""
    return np.swapaxes(a, -1, -2)


def batched_gradient(model: DeepUFM, blocks: Blocks) -> Blocks:
    """Every member's ``∇F`` at the stacked point ``blocks`` (module docstring), in the
    operations and order of the lone gradient, member by member. Uses the model's
    elementwise activation hooks, which act on stacked arrays as on one member's."""
    h, ws, bs = blocks
    feats, pre = [model._input(h)], []
    for i, w in enumerate(ws):
        z = w @ feats[-1]
        if bs:
            z = z + bs[i][:, :, None]
        pre.append(z)
        feats.append(z if i == model.n_layers - 1 else model._act(z))
    r = feats[-1] - model._target_columns()
    # the squares the lone descent forms for its objective at every step (results unused):
    # an overflow there stops the batch at the step where the lone descent stops
    for a in (r, h, *ws, *bs):
        np.sum(a * a)
    back = 2.0 * model.loss_scale * r
    grads: list[np.ndarray] = [np.empty(0)] * model.n_layers
    grads_b: list[np.ndarray] = [np.empty(0)] * len(bs)
    for i in range(model.n_layers - 1, -1, -1):
        w = ws[i]
        grads[i] = back @ _t(feats[i]) + model.lambda_w[i] * w
        if bs:
            grads_b[i] = back.sum(axis=-1) + model.lambda_b * bs[i]
        back = _t(w) @ back
        if i > 0:
            mask = model._act_mask(pre[i - 1])
            if mask is not None:
                back = back * mask
    mask = model._input_mask(h)
    if mask is not None:
        back = back * mask
    return model.lambda_h * h + back, grads, grads_b


def _member(blocks: Blocks, e: int) -> UFMParameters:
    h, ws, bs = blocks
    return UFMParameters(
        h[e].copy(), tuple(w[e].copy() for w in ws), tuple(b[e].copy() for b in bs)
    )


def _norm(grads: Blocks, e: int) -> float:
    """Member ``e``'s ``‖∇F‖`` as the lone descent takes it (of its flat gradient)."""
    h, ws, bs = grads
    flat = np.concatenate([h[e].ravel()] + [w[e].ravel() for w in ws] + [b[e] for b in bs])
    return float(np.linalg.norm(flat))


def batched_gradient_descent(
    model: DeepUFM,
    lr: float,
    n_steps: int,
    *,
    seeds: Sequence[int],
    w_scale: float = 1.0,
    h_scale: float = 1.0,
    momentum: float = 0.0,
    checkpoints: Sequence[int] | int = 40,
    tol: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[DescentTrajectory]:
    """:func:`~collapselab.theory.dlufm.gradient_descent` (full batches, the paper's
    ``"literal"`` solver) of ``model`` from the start of every seed of ``seeds``
    (:meth:`~collapselab.theory.dlufm.DeepUFM.random_point` with ``w_scale``, ``h_scale``),
    all members stepping together; one trajectory per seed, each equal bit for bit to the
    lone descent's (module docstring). A member whose gradient norm reaches ``tol`` stops
    there (recorded) and the others go on.

    Raises:
        FloatingPointError: a member's iterates overflow (``lr`` too large); the batch
            stops (descend the members alone to find which).
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    n_steps = check_int("n_steps", n_steps, minimum=0)
    mu = check_float("momentum", momentum, minimum=0.0, maximum=1.0)
    tol = check_float("tol", tol, minimum=0.0)
    seeds = [check_int("seeds entries", s, minimum=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds is empty: give one seed per member")
    wanted = checkpoint_steps(n_steps, checkpoints)
    starts = [model.random_point(s, w_scale=w_scale, h_scale=h_scale) for s in seeds]
    blocks: Blocks = (
        np.stack([p.H for p in starts]),
        [np.stack([p.W[i] for p in starts]) for i in range(model.n_layers)],
        [np.stack([p.b[i] for p in starts]) for i in range(len(starts[0].b))],
    )
    velocity = tuple(np.zeros_like(a) for a in (blocks[0], *blocks[1], *blocks[2]))
    records: list[list[tuple[int, float, float, UFMParameters]]] = [[] for _ in seeds]
    stopped = [f"{n_steps} steps"] * len(seeds)
    active = list(range(len(seeds)))
    every = max(n_steps // 100, 1)
    with serial_threads(), np.errstate(over="raise", invalid="raise"):
        step = 0
        try:
            while active:
                grads = batched_gradient(model, blocks)
                recorded = step in wanted or step == n_steps
                for e in list(active):
                    gnorm = _norm(grads, e) if tol > 0 else float("nan")
                    done = step == n_steps or (tol > 0 and gnorm <= tol)
                    if recorded or done:
                        point = _member(blocks, e)
                        value, grad = model.value_and_gradient(point)
                        gnorm = float(np.linalg.norm(grad.flat()))
                        records[e].append((step, value, gnorm, point))
                    if done:
                        if step < n_steps:
                            stopped[e] = f"gradient norm {gnorm:.3g} <= tol {tol:g} at step {step}"
                        active.remove(e)
                if not active:
                    break
                blocks = _step(blocks, grads, velocity, active, lr, mu)
                step += 1
                if progress is not None and (step % every == 0 or step == n_steps):
                    progress(step, n_steps)
        except FloatingPointError as err:
            raise diverged(step, lr) from err
    return [
        DescentTrajectory(
            steps=np.asarray([r[0] for r in rec], dtype=np.int64),
            objective=np.asarray([r[1] for r in rec]),
            grad_norm=np.asarray([r[2] for r in rec]),
            points=[r[3] for r in rec],
            final=rec[-1][3],
            lr=lr,
            method="literal",
            stopped=why,
        )
        for rec, why in zip(records, stopped, strict=True)
    ]


def _step(
    blocks: Blocks,
    grads: Blocks,
    velocity: tuple[np.ndarray, ...],
    active: list[int],
    lr: float,
    mu: float,
) -> Blocks:
    """One step of the members ``active`` (the others, stopped, keep their point): the lone
    descent's :func:`~collapselab.theory.dlufm.descent_step` on every block."""
    flat_blocks = [blocks[0], *blocks[1], *blocks[2]]
    flat_grads = [grads[0], *grads[1], *grads[2]]
    every = len(active) == flat_blocks[0].shape[0]
    out = []
    for a, g, v in zip(flat_blocks, flat_grads, velocity, strict=True):
        if every:
            new, v[...] = descent_step(a, g, v, lr, mu)
        else:
            new = a.copy()
            new[active], v[active] = descent_step(a[active], g[active], v[active], lr, mu)
        out.append(new)
    n = len(blocks[1])
    return out[0], out[1 : 1 + n], out[1 + n :]
