r"""Adversarial robustness by DeepFool's minimal perturbation (paper 003 Figs. 9, 11; R15).

Paper 003 reports robustness by reference to Papyan, Han & Donoho (PNAS 2020, Fig. 8), who
measure it with DeepFool (Moosavi-Dezfooli, Fawzi & Frossard, CVPR 2016); the paper itself
does not define the measure (note 003 §7.12). The definition implemented here:

**Multi-class DeepFool** (Moosavi-Dezfooli et al., Algorithm 2, L2 norm). For a classifier
with logits ``f(x) in R^C`` and an input ``x_0`` predicted as ``k0 = argmax_k f_k(x_0)``,
starting from ``r = 0``, repeat at ``x_i = x_0 + (1 + eta) r``:

1. stop if ``argmax_k f_k(x_i) != k0`` (the label flipped);
2. for every ``k != k0``: ``w_k = grad f_k(x_i) - grad f_k0(x_i)`` and
   ``g_k = f_k(x_i) - f_k0(x_i)``;
3. ``l = argmin_{k != k0} |g_k| / ||w_k||_2`` (the nearest linearised boundary);
4. ``r <- r + (|g_l| / ||w_l||_2^2) w_l`` (the projection onto it).

The reported perturbation is ``r_hat(x_0) = (1 + eta) r``, with overshoot ``eta = 0.02``
(the authors' default) so that the final point lies past the boundary. At most
``max_iter = 50`` steps are taken; a sample whose label has not flipped by then, or whose
linearised boundaries are all out of reach (every ``||w_k|| = 0``), counts as a failure.
For an affine classifier one step reaches the nearest decision boundary exactly, so
``||r_hat|| = (1 + eta) min_{k != k0} |g_k| / ||w_k||``: the distance to the nearest
decision hyperplane, up to the overshoot.

**The robustness measure** (PNAS's ``rho_adv``): the mean over samples ``x`` of
``||r_hat(x)||_2 / ||x||_2``, norms taken over the whole input as it is fed to the network
(after standardisation and padding), averaged over the samples the network classifies
correctly and for which DeepFool succeeded (failures are counted and reported, not
averaged). Larger is more robust.

Gradients come from ``C`` backward passes per step over a batch, which is exact only when
samples do not interact: the model is put in eval mode (BatchNorm uses its running
statistics) for the attack and its mode restored afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from collapselab.probe.modes import eval_mode

__all__ = [
    "DeepFoolResult",
    "RobustnessResult",
    "deepfool",
    "deepfool_robustness",
]


@dataclass(frozen=True)
class DeepFoolResult:
    """Per-sample output of :func:`deepfool` (tensors on the CPU, ``B`` samples).

    Attributes:
        perturbations: ``r_hat = (1 + overshoot) r``, same shape as the inputs (zero where
            DeepFool failed).
        norms: ``||r_hat||_2`` per sample, ``(B,)`` float64 (NaN on failure).
        input_norms: ``||x||_2`` per sample, ``(B,)`` float64.
        original: the predicted labels ``k0`` of the unperturbed inputs, ``(B,)``.
        perturbed: the predicted labels at ``x + r_hat``, ``(B,)``.
        success: whether the label flipped within ``max_iter`` steps, ``(B,)`` bool.
        iterations: DeepFool steps taken per sample, ``(B,)`` int64.
        overshoot, max_iter: the settings used.
    """

    perturbations: torch.Tensor
    norms: torch.Tensor
    input_norms: torch.Tensor
    original: torch.Tensor
    perturbed: torch.Tensor
    success: torch.Tensor
    iterations: torch.Tensor
    overshoot: float
    max_iter: int

    @property
    def ratios(self) -> torch.Tensor:
        """``||r_hat|| / ||x||`` per sample (NaN on failure or for a zero input)."""
        safe = torch.where(self.input_norms > 0, self.input_norms, torch.nan)
        return self.norms / safe


@dataclass(frozen=True)
class RobustnessResult:
    """The robustness measure of :func:`deepfool_robustness`.

    Attributes:
        mean_ratio: mean of ``||r_hat(x)|| / ||x||`` over the samples that are classified
            correctly and for which DeepFool succeeded (NaN if there are none).
        median_ratio: their median.
        mean_norm: mean of ``||r_hat(x)||`` over the same samples.
        n_samples: samples attacked. n_correct: of them, correctly classified.
        n_used: correct samples averaged (DeepFool succeeded). n_failed: correct samples
            for which it did not (``n_correct - n_used``).
        mean_iterations: mean DeepFool steps over the samples used.
        deepfool: the per-sample :class:`DeepFoolResult`.
    """

    mean_ratio: float
    median_ratio: float
    mean_norm: float
    n_samples: int
    n_correct: int
    n_used: int
    n_failed: int
    mean_iterations: float
    deepfool: DeepFoolResult

    def as_dict(self, prefix: str = "deepfool") -> dict[str, float]:
        """Flat values for a metric table: ``<prefix>_ratio`` (the measure), ``_median_ratio``,
        ``_norm``, ``_n_used``, ``_n_failed``, ``_iterations``."""
        return {
            f"{prefix}_ratio": self.mean_ratio,
            f"{prefix}_median_ratio": self.median_ratio,
            f"{prefix}_norm": self.mean_norm,
            f"{prefix}_n_used": float(self.n_used),
            f"{prefix}_n_failed": float(self.n_failed),
            f"{prefix}_iterations": self.mean_iterations,
        }


def _check_settings(overshoot: object, max_iter: object, batch_size: object) -> None:
    if (
        isinstance(overshoot, bool)
        or not isinstance(overshoot, (int, float))
        or not math.isfinite(overshoot)
        or overshoot < 0
    ):
        raise ValueError(f"overshoot must be a finite number >= 0, got {overshoot!r}")
    for name, value, low in (("max_iter", max_iter, 0), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def _check_inputs(model: object, x: object) -> torch.Tensor:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2 or x.shape[0] == 0:
        raise ValueError(f"x must have shape (B, ...) with B >= 1, got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x contains NaN or infinite values")
    return x


def _logits(model: nn.Module, x: torch.Tensor, n: int) -> torch.Tensor:
    out = model(x)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != n:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"the model must return logits of shape ({n}, C), got {shape}")
    if out.shape[1] < 2:
        raise ValueError(f"DeepFool needs at least 2 classes, the model returns {out.shape[1]}")
    return out


def _step(
    model: nn.Module, x: torch.Tensor, k0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One DeepFool evaluation at ``x``: predictions, the step ``r_i`` and reachability.

    Returns ``(pred, r_i, ok)``; ``ok`` is False where no linearised boundary is reachable.
    """
    x = x.detach().requires_grad_(True)
    logits = _logits(model, x, x.shape[0])
    n, c = logits.shape
    # Rows are independent (eval mode), so the gradient of a column sum is per-row.
    grads = torch.stack(
        [
            torch.autograd.grad(logits[:, k].sum(), x, retain_graph=k < c - 1)[0].flatten(1)
            for k in range(c)
        ],
        dim=1,
    )  # (n, C, D)
    logits = logits.detach()
    rows = torch.arange(n, device=x.device)
    w = grads - grads[rows, k0].unsqueeze(1)
    g = logits - logits[rows, k0].unsqueeze(1)
    w_norm = w.norm(dim=2)
    dist = g.abs() / w_norm
    dist[rows, k0] = torch.inf
    dist = torch.where(w_norm > 0, dist, torch.inf)
    best = dist.argmin(dim=1)
    ok = torch.isfinite(dist[rows, best])
    w_best = w[rows, best]
    scale = g[rows, best].abs() / w_norm[rows, best].clamp_min(torch.finfo(w.dtype).tiny) ** 2
    step = torch.where(ok.unsqueeze(1), scale.unsqueeze(1) * w_best, torch.zeros_like(w_best))
    return logits.argmax(dim=1), step.view_as(x), ok


def _deepfool_batch(
    model: nn.Module, x0: torch.Tensor, overshoot: float, max_iter: int
) -> tuple[torch.Tensor, ...]:
    n = x0.shape[0]
    with torch.no_grad():
        k0 = _logits(model, x0, n).argmax(dim=1)
    r = torch.zeros_like(x0)
    active = torch.ones(n, dtype=torch.bool, device=x0.device)
    success = torch.zeros(n, dtype=torch.bool, device=x0.device)
    iterations = torch.zeros(n, dtype=torch.int64, device=x0.device)
    for i in range(max_iter + 1):
        idx = active.nonzero().flatten()
        if idx.numel() == 0:
            break
        x_i = x0[idx] + (1.0 + overshoot) * r[idx]
        if i == max_iter:  # the cap: one last look, no further step
            with torch.no_grad():
                pred = _logits(model, x_i, idx.numel()).argmax(dim=1)
            success[idx] = pred != k0[idx]
            break
        pred, step, ok = _step(model, x_i, k0[idx])
        flipped = pred != k0[idx]
        success[idx[flipped]] = True
        stuck = ~flipped & ~ok
        active[idx[flipped | stuck]] = False
        moving = ~flipped & ok
        r[idx[moving]] += step[moving]
        iterations[idx[moving]] += 1
    r_hat = torch.where(
        success.view(-1, *([1] * (x0.ndim - 1))), (1.0 + overshoot) * r, torch.zeros_like(r)
    )
    with torch.no_grad():
        perturbed = _logits(model, x0 + r_hat, n).argmax(dim=1)
    return r_hat, k0, perturbed, success, iterations


def deepfool(
    model: nn.Module,
    x: torch.Tensor,
    *,
    overshoot: float = 0.02,
    max_iter: int = 50,
    batch_size: int = 256,
) -> DeepFoolResult:
    r"""Multi-class DeepFool (L2) minimal perturbations of the inputs ``x`` (module docstring).

    Args:
        model: maps ``(B, ...)`` inputs to ``(B, C)`` logits; run in eval mode (restored).
        x: inputs ``(B, ...)``, moved to the model's device and dtype.
        overshoot: ``eta``; the reported perturbation is ``(1 + eta) r``.
        max_iter: step cap per sample.
        batch_size: samples attacked together (results do not depend on it).

    Returns:
        A :class:`DeepFoolResult`.
    """
    _check_settings(overshoot, max_iter, batch_size)
    x = _check_inputs(model, x)
    first = next((p for p in model.parameters()), None)
    device = first.device if first is not None else x.device
    dtype = first.dtype if first is not None and first.is_floating_point() else x.dtype
    parts: list[tuple[torch.Tensor, ...]] = []
    with eval_mode(model):
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size].to(device=device, dtype=dtype)
            parts.append(tuple(t.cpu() for t in _deepfool_batch(model, xb, overshoot, max_iter)))
    r_hat, k0, perturbed, success, iterations = (torch.cat(p) for p in zip(*parts, strict=True))
    norms = r_hat.flatten(1).to(torch.float64).norm(dim=1)
    norms = torch.where(success, norms, torch.nan)
    input_norms = x.detach().cpu().flatten(1).to(torch.float64).norm(dim=1)
    return DeepFoolResult(
        perturbations=r_hat,
        norms=norms,
        input_norms=input_norms,
        original=k0,
        perturbed=perturbed,
        success=success,
        iterations=iterations,
        overshoot=float(overshoot),
        max_iter=int(max_iter),
    )


def deepfool_robustness(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    overshoot: float = 0.02,
    max_iter: int = 50,
    batch_size: int = 256,
) -> RobustnessResult:
    r"""PNAS's robustness measure: mean ``||r_hat(x)|| / ||x||`` over correctly classified inputs.

    DeepFool (:func:`deepfool`) is run on every sample; the mean is taken over the samples
    whose prediction equals the label ``y`` and whose attack succeeded (see the module
    docstring). Failures are counted in :attr:`RobustnessResult.n_failed`.

    Args:
        model, x, overshoot, max_iter, batch_size: as for :func:`deepfool`.
        y: labels ``(B,)`` (integers).
    """
    x = _check_inputs(model, x)
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.shape[0] != x.shape[0]:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"y must be a ({x.shape[0]},) tensor of labels, got {shape}")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise TypeError(f"y must hold integer labels, got dtype {y.dtype}")
    result = deepfool(model, x, overshoot=overshoot, max_iter=max_iter, batch_size=batch_size)
    correct = result.original == y.cpu().to(torch.int64)
    used = correct & result.success
    ratios = result.ratios[used]
    n_used = int(used.sum())
    nan = float("nan")
    return RobustnessResult(
        mean_ratio=float(ratios.mean()) if n_used else nan,
        median_ratio=float(ratios.quantile(0.5)) if n_used else nan,
        mean_norm=float(result.norms[used].mean()) if n_used else nan,
        n_samples=int(x.shape[0]),
        n_correct=int(correct.sum()),
        n_used=n_used,
        n_failed=int(correct.sum()) - n_used,
        mean_iterations=float(result.iterations[used].to(torch.float64).mean()) if n_used else nan,
        deepfool=result,
    )
