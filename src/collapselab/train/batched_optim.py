r"""SGD and Adam over stacked parameters, every hyper-parameter per member.

A stacked parameter ``P`` has shape ``(E, ...)``; member ``e`` owns ``P[e]``. One update
applies PyTorch's own rule to every member with that member's hyper-parameters (each a
vector over members, broadcast along the parameter's other dimensions), with ``g`` the
gradient of member ``e``'s loss:

* SGD (``torch.optim.SGD``, dampening 0): ``d = g + wd P``; with momentum
  ``v <- m v + d`` (``v = d`` at the first step) and ``d = v`` (Nesterov: ``d + m v``);
  ``P <- P - lr d``.
* Adam (``torch.optim.Adam``, L2 weight decay): ``d = g + wd P``,
  ``m1 <- m1 + (1 - b1)(d - m1)`` (``lerp``), ``m2 <- b2 m2 + (1 - b2) d^2``, and at step
  ``t``: ``P <- P - (lr / (1 - b1^t)) m1 / (sqrt(m2) / sqrt(1 - b2^t) + eps)``.

A hyper-parameter that all members share is applied as the Python number PyTorch's
optimiser uses (the same fused operation, bit for bit); one that differs is a tensor, which
can round the last bit differently (``a + s x`` fused versus multiplied then added).

Gradient clipping per member (``clip_grad_norm_`` of each member's gradients): with
``n = ‖(‖g_1‖, ..., ‖g_P‖)‖`` over the member's parameters, ``g <- g min(1, c / (n + 1e-6))``.

Each member's state can be read and written in :class:`torch.optim.Optimizer`'s own
per-parameter format (:meth:`BatchedOptimizer.member_state`,
:meth:`BatchedOptimizer.load_member_state`), so a member's checkpoint is a single run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from collapselab.train.config import TrainConfig

Scale = float | torch.Tensor
"""A per-member factor: a number shared by all members, or a vector ``(E, 1, ..., 1)``."""


def _scale(values: Sequence[float], like: torch.Tensor) -> Scale:
    """``values`` (one per member) as a factor for ``like`` ``(E, ...)``."""
    if all(v == values[0] for v in values):
        return float(values[0])
    shape = (len(values),) + (1,) * (like.ndim - 1)
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(shape)


def _add_scaled(y: torch.Tensor, x: torch.Tensor, a: Scale) -> torch.Tensor:
    """``y + a x`` (a new tensor)."""
    return y.add(x, alpha=a) if isinstance(a, float) else torch.addcmul(y, x, a)


def _add_scaled_(y: torch.Tensor, x: torch.Tensor, a: Scale) -> torch.Tensor:
    """``y += a x`` in place."""
    return y.add_(x, alpha=a) if isinstance(a, float) else y.addcmul_(x, a)


def _scalar_dtype() -> torch.dtype:
    # torch.optim keeps Adam's step count in this dtype
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class BatchedOptimizer:
    """SGD or Adam over stacked parameters (module docstring).

    Args:
        params: the stacked trainable parameters ``(E, ...)``.
        configs: one :class:`TrainConfig` per member (all with the same ``optimizer``).
    """

    def __init__(self, params: Sequence[torch.Tensor], configs: Sequence[TrainConfig]) -> None:
        self.params = list(params)
        self.configs = list(configs)
        self.kind = configs[0].optimizer
        self.size = len(configs)
        self.lrs = [float(c.lr) for c in configs]
        self.steps = 0
        self.step_count = torch.zeros((), dtype=_scalar_dtype())
        # SGD: momentum buffers; Adam: first and second moments (None before the first step)
        self.buffers: list[list[torch.Tensor] | None] = [None, None]

    @property
    def started(self) -> bool:
        """Whether the optimiser holds state (after its first step, or a loaded one)."""
        return self.buffers[0] is not None

    def set_lrs(self, lrs: Sequence[float]) -> None:
        """The learning rate of each member for the next steps."""
        self.lrs = [float(v) for v in lrs]

    def _per_member(self, field: str, like: torch.Tensor) -> Scale:
        return _scale([float(getattr(c, field)) for c in self.configs], like)

    # ---------------------------------------------------------------- updates
    @torch.no_grad()
    def clip_grad_norms(self) -> None:
        """Clip each member's gradient norm to its ``grad_clip_norm`` (where it has one)."""
        limits = [c.grad_clip_norm for c in self.configs]
        if all(limit is None for limit in limits):
            return
        grads = [p.grad for p in self.params if p.grad is not None]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
        total = torch.linalg.vector_norm(norms, dim=0)
        bound = torch.tensor([1.0 if c is None else c for c in limits], dtype=total.dtype)
        coef = torch.clamp(bound.to(total.device) / (total + 1e-6), max=1.0)
        free = torch.tensor([c is None for c in limits], device=total.device)
        coef = torch.where(free, torch.ones_like(coef), coef)
        for g in grads:
            g.mul_(coef.view((-1,) + (1,) * (g.ndim - 1)).to(g.dtype))

    @torch.no_grad()
    def step(self) -> None:
        """One update of every member."""
        if self.kind == "adam":
            self._adam_step()
        else:
            self._sgd_step()
        self.steps += 1

    def _decayed(self, p: torch.Tensor) -> torch.Tensor:
        grad = p.grad if p.grad is not None else torch.zeros_like(p)
        wd = self._per_member("weight_decay", p)
        return grad if isinstance(wd, float) and wd == 0 else _add_scaled(grad, p, wd)

    def _sgd_step(self) -> None:
        with_momentum = any(c.momentum != 0 for c in self.configs)
        if with_momentum and self.buffers[0] is None:
            self.buffers[0] = [None] * len(self.params)  # type: ignore[list-item]
        for j, p in enumerate(self.params):
            d = self._decayed(p)
            if with_momentum:
                d = self._momentum(j, d, p)
            _add_scaled_(p, d, _scale([-lr for lr in self.lrs], p))

    def _momentum(self, j: int, d: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        buffers = self.buffers[0]
        assert buffers is not None
        m = self._per_member("momentum", p)
        if buffers[j] is None:
            buffers[j] = d.detach().clone()
        else:
            buffers[j].mul_(m).add_(d)
        buf = buffers[j]
        nesterov = [c.nesterov for c in self.configs]
        if not any(nesterov):
            return buf
        ahead = _add_scaled(d, buf, m)
        if all(nesterov):
            return ahead
        mask = torch.tensor(nesterov, device=p.device).view((-1,) + (1,) * (p.ndim - 1))
        return torch.where(mask, ahead, buf)

    def _adam_step(self) -> None:
        if self.buffers[0] is None:
            self.buffers = [
                [torch.zeros_like(p) for p in self.params],
                [torch.zeros_like(p) for p in self.params],
            ]
        self.step_count += 1
        t = self.steps + 1
        b1 = [float(c.betas[0]) for c in self.configs]
        b2 = [float(c.betas[1]) for c in self.configs]
        step_size = [lr / (1 - beta**t) for lr, beta in zip(self.lrs, b1, strict=True)]
        root = [(1 - beta**t) ** 0.5 for beta in b2]
        for j, p in enumerate(self.params):
            d = self._decayed(p)
            m1, m2 = self.buffers[0][j], self.buffers[1][j]  # type: ignore[index]
            m1.lerp_(d, _scale([1 - beta for beta in b1], p))
            decay2, rate2 = _scale(b2, p), _scale([1 - beta for beta in b2], p)
            if isinstance(rate2, float):
                m2.mul_(decay2).addcmul_(d, d, value=rate2)
            else:
                m2.mul_(decay2).addcmul_(d * rate2, d)
            denom = (m2.sqrt() / _scale(root, p)).add_(self._per_member("eps", p))
            size = _scale([-s for s in step_size], p)
            if isinstance(size, float):
                p.addcdiv_(m1, denom, value=size)
            else:
                p.addcmul_(m1 / denom, size)

    # ------------------------------------------------------------ member state
    def member_state(self, i: int) -> dict[int, dict[str, torch.Tensor]]:
        """Member ``i``'s state in :class:`torch.optim.Optimizer`'s per-parameter format
        (index of the parameter -> its state), as views of the stacked buffers (empty before
        the first step, as PyTorch's)."""
        if not self.started:
            return {}
        if self.kind == "adam":
            m1, m2 = self.buffers
            assert m1 is not None and m2 is not None
            return {
                j: {"step": self.step_count, "exp_avg": m1[j][i], "exp_avg_sq": m2[j][i]}
                for j in range(len(self.params))
            }
        if self.configs[i].momentum == 0:
            return {}
        buffers = self.buffers[0]
        assert buffers is not None
        return {j: {"momentum_buffer": buffers[j][i]} for j in range(len(self.params))}

    @torch.no_grad()
    def load_member_state(self, i: int, saved: dict[str, Any]) -> None:
        """Load member ``i``'s part from a :meth:`torch.optim.Optimizer.state_dict`.

        Every member must be loaded (at the same step) before the next :meth:`step`.
        """
        state = saved["state"]
        if len(saved["param_groups"][0]["params"]) != len(self.params):
            raise ValueError(
                f"the saved optimizer state has {len(saved['param_groups'][0]['params'])} "
                f"parameters; the model has {len(self.params)}"
            )
        if not state:
            return
        if self.kind == "adam":
            self._load_adam(i, state)
            return
        if self.buffers[0] is None:
            self.buffers[0] = [torch.zeros_like(p) for p in self.params]
        for j in range(len(self.params)):
            if "momentum_buffer" in state.get(j, {}):
                self.buffers[0][j][i].copy_(state[j]["momentum_buffer"])

    def _load_adam(self, i: int, state: dict[int, dict[str, torch.Tensor]]) -> None:
        if self.buffers[0] is None:
            self.buffers = [
                [torch.zeros_like(p) for p in self.params],
                [torch.zeros_like(p) for p in self.params],
            ]
        steps = int(float(state[0]["step"]))
        if self.steps not in (0, steps):
            raise ValueError(f"member {i} was saved at Adam step {steps}, others at {self.steps}")
        self.steps = steps
        self.step_count.fill_(steps)
        for j in range(len(self.params)):
            self.buffers[0][j][i].copy_(state[j]["exp_avg"])  # type: ignore[index]
            self.buffers[1][j][i].copy_(state[j]["exp_avg_sq"])  # type: ignore[index]
