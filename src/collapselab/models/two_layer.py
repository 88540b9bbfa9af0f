"""Two-layer ReLU model with a fixed output layer (paper 002, §2.5 and App. B.2)."""

from __future__ import annotations

import math

import torch
from torch import nn

from collapselab.checks import check_bool, check_float, check_int
from collapselab.models._common import _check_features_input


class _FixedReadout(nn.Linear):
    """An ``nn.Linear`` whose weight is a buffer: it moves with ``.to()`` and is saved in the
    state dict, but is not a parameter, so optimisers never update it."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias=False)
        del self.weight
        self.register_buffer("weight", weight.detach().clone())

    def reset_parameters(self) -> None:
        # The readout is fixed by construction; nn.Linear's re-init must not touch it.
        return None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, fixed=True"


class TwoLayerReLU(nn.Module):
    r"""``f(x) = a^T \mathrm{ReLU}(W x)`` with ``W`` (``width x in_dim``) trained, ``a`` fixed.

    The model of paper 002 (§2.5, App. B.2; Allen-Zhu et al. 2018, Arora et al. 2019).
    No biases. Output shape ``(N, 1)`` (a single score; squeeze for ±1-label losses).

    Initialisation:

    * rows of ``W``: i.i.d. ``N(0, w_std^2 I)``, ``w_std = 1/sqrt(in_dim)`` by default;
    * entries of ``a``: i.i.d. uniform on ``{-a_scale, +a_scale}`` (random signs, equal
      magnitude), ``a_scale = 1/sqrt(width)`` by default, i.e. the ``1/sqrt(m)`` output
      scaling of Arora et al. 2019 folded into ``a``;
    * ``paired=True`` (002, Assumption 2): only the odd rows / entries are drawn and
      ``w_{2i} = -w_{2i-1}``, ``a_{2i} = -a_{2i-1}`` (1-based, i.e. rows ``2k`` and
      ``2k+1`` 0-based are negatives). Since ``relu(u) - relu(-u) = u``, each pair
      contributes ``a_{2i-1} w_{2i-1} \cdot x``, so at init the model is exactly linear:
      ``f(x) = \tfrac12 a^T W x`` (:meth:`effective_linear_weight`). Requires even ``width``.

    ``a`` is stored as the weight of ``classifier``, a buffer (not a Parameter) unless
    ``train_output=True`` (002's R10 option), in which case it is an ordinary parameter.

    Layer names: ``flatten``, ``hidden`` (``nn.Linear`` holding W, pre-activations),
    ``act`` (post-ReLU hidden features, ``(N, width)``), ``classifier`` (``a^T``, shape
    ``(1, width)``). ``feature_layers = ["act"]``, ``penultimate = "act"``.

    Args:
        in_dim: input dimension d.
        width: number of hidden units m (even when ``paired``).
        paired: use the paired/symmetric init.
        a_scale: magnitude of the entries of ``a`` (> 0); default ``1/sqrt(width)``.
        w_std: standard deviation of the entries of ``W`` (> 0); default ``1/sqrt(in_dim)``.
        train_output: make ``a`` a trainable parameter instead of a fixed buffer.
    """

    def __init__(
        self,
        in_dim: int,
        width: int,
        paired: bool = True,
        a_scale: float | None = None,
        w_std: float | None = None,
        train_output: bool = False,
    ) -> None:
        super().__init__()
        self.in_dim = check_int("in_dim", in_dim, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.paired = check_bool("paired", paired)
        train_output = check_bool("train_output", train_output)
        if self.paired and self.width % 2:
            raise ValueError(f"width must be even for the paired init, got {width}")
        a_scale = 1.0 / math.sqrt(self.width) if a_scale is None else a_scale
        w_std = 1.0 / math.sqrt(self.in_dim) if w_std is None else w_std
        self.a_scale = check_float("a_scale", a_scale, minimum=0.0, strict=True)
        self.w_std = check_float("w_std", w_std, minimum=0.0, strict=True)

        self.flatten = nn.Flatten()
        self.hidden = nn.Linear(self.in_dim, self.width, bias=False)
        self.act = nn.ReLU()
        w, a = self._draw()
        with torch.no_grad():
            self.hidden.weight.copy_(w)
        if train_output:
            self.classifier = nn.Linear(self.width, 1, bias=False)
            with torch.no_grad():
                self.classifier.weight.copy_(a[None, :])
        else:
            self.classifier = _FixedReadout(a[None, :].to(self.hidden.weight.dtype))

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = self.hidden.weight.dtype
        n_free = self.width // 2 if self.paired else self.width
        w_free = torch.randn(n_free, self.in_dim, dtype=dtype) * self.w_std
        signs = torch.randint(0, 2, (n_free,)).to(dtype) * 2.0 - 1.0
        a_free = signs * self.a_scale
        if not self.paired:
            return w_free, a_free
        w = torch.stack([w_free, -w_free], dim=1).reshape(self.width, self.in_dim)
        a = torch.stack([a_free, -a_free], dim=1).reshape(self.width)
        return w, a

    @property
    def a(self) -> torch.Tensor:
        """The output weights ``a``, shape ``(width,)`` (a view of ``classifier.weight``)."""
        return self.classifier.weight[0]

    @property
    def feature_layers(self) -> list[str]:
        return ["act"]

    @property
    def penultimate(self) -> str:
        return "act"

    def effective_linear_weight(self) -> torch.Tensor:
        r"""``\tfrac12 a^T W``, shape ``(in_dim,)``: the paper's ``\Psi^0`` (002, App. B.2).

        Equals the network's function, ``f(x) = \tfrac12 a^T W x``, whenever the paired
        structure holds (at a paired init; training generally breaks it).
        """
        return 0.5 * (self.a @ self.hidden.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores of shape ``(N, 1)`` for inputs ``(N, ...)`` with ``in_dim`` features."""
        _check_features_input(x, self.in_dim)
        return self.classifier(self.act(self.hidden(self.flatten(x))))
