r"""E networks of one architecture run as one batched network.

The members' tensors are stacked along a new leading dimension (a weight ``(out, in)``
becomes ``(E, out, in)``), and the parameterised layers of a copy of the architecture (the
*template*) are replaced by batched ones. The template's own ``forward`` then runs once on a
**folded** batch of ``B * E`` rows in sample-major order: row ``b * E + e`` is sample ``b``
of member ``e``. Every operation that acts on each sample alone (activations, pooling,
flattening, reshapes, residual sums) is already right on that layout; only the layers with
tensors need the member index:

* ``nn.Linear``: ``z_e = x_e W_eᵀ + b_e`` for all members in one batched product
  (:func:`torch.baddbmm` over ``(E, B, in) x (E, in, out)``);
* ``nn.Conv1d/2d/3d``: one grouped convolution. The folded input ``(B * E, C, H, W)`` is,
  without a copy, ``(B, E * C, H, W)``: member ``e`` owns channels ``e C .. (e + 1) C - 1``,
  so a convolution with ``E * groups`` groups and the stacked kernels ``(E * C_out, C / g,
  k, k)`` applies each member's kernel to its own channels, and its output ``(B, E * C_out,
  H', W')`` is again the folded batch. The layer's own ``forward`` (padding it adds, as
  st-VGG's 'same' convolution does) runs unchanged around it;
* ``nn.BatchNorm1d/2d/3d``: likewise the folded batch is ``(B, E * C, ...)``, on which one
  ``F.batch_norm`` normalises each member's channels by that member's batch statistics and
  updates its running statistics (views of the stacked buffers);
* ``nn.Dropout``: member ``e``'s mask is drawn from a generator of its own, exactly as
  ``F.dropout`` draws it on the CPU from the global generator of a run seeded like the
  member (``empty_like(x_e).bernoulli_(1 - p) / (1 - p)``), so dropout is reproduced draw
  for draw.

Layers with tensors of other types, random layers other than ``nn.Dropout`` and a forward
that draws from the global generator are refused with an error naming them, and so are
members that differ in architecture (module types, hyper-parameters, tensor shapes). When
built, the batched forward is checked against every member's own forward on two training
samples, so a forward that mixes the samples of a batch or a layer subclass that computes
something else is caught before training.

While batched, each member's parameters and buffers hold views of its slice of the stacked
tensors (:meth:`BatchedModel.attach` swaps their ``.data``; the tensor objects are the
member's own): the module *is* the member, live, and anything that reads a model, a layer
or a parameter (the Monitor's families, ``state_dict``) reads it. :meth:`BatchedModel.release`
gives them storage of their own again, holding the trained values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_CONV_FUNCTIONS: dict[int, Callable[..., torch.Tensor]] = {
    1: F.conv1d,
    2: F.conv2d,
    3: F.conv3d,
}
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_RANDOM = (
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
    nn.RReLU,
)
SUPPORTED = "nn.Linear, nn.Conv1d/2d/3d, nn.BatchNorm1d/2d/3d and nn.Dropout"
"""The layer types with tensors or randomness that a batched model can hold."""


class ArchitectureError(ValueError):
    """Members that cannot be batched together (different architectures, unsupported layers)."""


class _Shared:
    """Whether the rows reaching the next batched layer are one set of samples shared by all
    members (``(n, ...)``) rather than a folded batch (``(n E, ...)``); the first batched
    layer to run consumes it."""

    def __init__(self) -> None:
        self.pending = False

    def take(self) -> bool:
        pending, self.pending = self.pending, False
        return pending


# ------------------------------------------------------------------------ layers
def _stacked_tensors(leaves: Sequence[nn.Module]) -> list[tuple[str, bool, torch.Tensor]]:
    """``(name, is_parameter, stacked)`` for every tensor of a layer, in registration order
    (parameters, then buffers), stacked over the members' copies of that layer."""
    out = []
    for kind in ("_parameters", "_buffers"):
        for name, tensor in getattr(leaves[0], kind).items():
            if tensor is None:
                continue
            stacked = torch.stack([getattr(leaf, name).detach() for leaf in leaves])
            out.append((name, kind == "_parameters", stacked))
    return out


def _requires_grad(leaves: Sequence[nn.Module], name: str) -> bool:
    return bool(getattr(leaves[0], name).requires_grad)


def _stack_into(module: nn.Module, leaves: Sequence[nn.Module]) -> None:
    """Register the members' stacked tensors on ``module`` under the layer's names."""
    tensors = _stacked_tensors(leaves)
    for name, is_param, stacked in tensors:
        if name in module._parameters:
            del module._parameters[name]
        if name in module._buffers:
            del module._buffers[name]
        if is_param:
            grad = _requires_grad(leaves, name)
            module.register_parameter(name, nn.Parameter(stacked, requires_grad=grad))
        else:
            module.register_buffer(name, stacked)
    if "bias" in leaves[0]._parameters and leaves[0]._parameters["bias"] is None:
        module.register_parameter("bias", None)


class StackedLinear(nn.Module):
    """E linear layers: ``weight (E, out, in)``, ``bias (E, out)`` (as the layer's parameters
    or buffers); ``z[b E + e] = x[b E + e] W_eᵀ + b_e`` by one batched product."""

    def __init__(self, leaves: Sequence[nn.Linear], shared: _Shared) -> None:
        super().__init__()
        self.size = len(leaves)
        self.in_features = leaves[0].in_features
        self.out_features = leaves[0].out_features
        self.shared = shared
        _stack_into(self, leaves)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shared.take():
            return self._shared_forward(x)
        size, rows = self.size, x.shape[0] // self.size
        inner = x.shape[1:-1]
        # (B E, *inner, in) -> (E, B * inner, in): each member's rows together
        xm = x.reshape(rows, size, -1, self.in_features).transpose(0, 1)
        xm = xm.reshape(size, -1, self.in_features)
        weight_t = self.weight.transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(xm, weight_t)
        else:
            out = torch.baddbmm(self.bias.unsqueeze(1), xm, weight_t)
        out = out.reshape(size, rows, *inner, self.out_features).transpose(0, 1)
        return out.reshape(rows * size, *inner, self.out_features)

    def _shared_forward(self, x: torch.Tensor) -> torch.Tensor:
        """Rows shared by all members: one product with the members' weights side by side,
        ``(n, in) x (in, E out)``, whose output ``(n, E out)`` is the folded batch."""
        size, rows, inner = self.size, x.shape[0], x.shape[1:-1]
        weight = self.weight.reshape(size * self.out_features, self.in_features)
        bias = None if self.bias is None else self.bias.reshape(-1)
        out = F.linear(x, weight, bias).reshape(rows, -1, size, self.out_features)
        return out.transpose(1, 2).reshape(rows * size, *inner, self.out_features)


def _batch_conv(conv: nn.Module, size: int, shared: _Shared) -> None:
    """Make ``conv`` (holding stacked kernels) convolve each member's channels with its own
    kernel: one convolution with ``size * groups`` groups on the folded batch; on rows
    shared by all members (and ``groups = 1``) one convolution with the ``E C_out``
    kernels side by side."""
    function = _CONV_FUNCTIONS[len(conv.kernel_size)]

    def conv_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
        bg = None if bias is None else bias.reshape(-1)
        if shared.take():
            if conv.groups == 1:
                wide = weight.reshape(-1, *weight.shape[2:])
                out = function(x, wide, bg, conv.stride, conv.padding, conv.dilation)
                return out.reshape(x.shape[0] * size, -1, *out.shape[2:])
            x = repeat_rows(x, size)
        rows = x.shape[0] // size
        xg = x.reshape(rows, size * x.shape[1], *x.shape[2:])
        wg = weight.reshape(size * weight.shape[1], *weight.shape[2:])
        out = function(xg, wg, bg, conv.stride, conv.padding, conv.dilation, conv.groups * size)
        return out.reshape(rows * size, out.shape[1] // size, *out.shape[2:])

    # Conv1d/2d/3d.forward (and a subclass's forward around it, e.g. an explicit pad) hands
    # its input to _conv_forward: replacing it on this instance keeps everything else.
    conv._conv_forward = conv_forward


class StackedBatchNorm(nn.Module):
    """E batch norms over the folded batch seen as ``(B, E * C, ...)``: each member's
    channels are normalised by its own batch statistics (training) or running statistics
    (eval), as :class:`torch.nn.BatchNorm2d` does for one network."""

    def __init__(self, leaves: Sequence[nn.Module], shared: _Shared) -> None:
        super().__init__()
        first = leaves[0]
        self.size = len(leaves)
        self.shared = shared
        self.momentum, self.eps = first.momentum, first.eps
        self.track_running_stats = first.track_running_stats
        _stack_into(self, leaves)
        for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            if not hasattr(self, name):
                setattr(self, name, None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shared.take():
            x = repeat_rows(x, self.size)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average, as nn.BatchNorm
                factor = 1.0 / float(self.num_batches_tracked[0])
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        rows = x.shape[0] // self.size
        xb = x.reshape(rows, self.size * x.shape[1], *x.shape[2:])
        out = F.batch_norm(
            xb,
            _flat(self.running_mean) if keep else None,
            _flat(self.running_var) if keep else None,
            _flat(self.weight),
            _flat(self.bias),
            use_batch,
            factor,
            self.eps,
        )
        return out.reshape(x.shape)


def _flat(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.view(-1)


class StackedDropout(nn.Module):
    """E dropouts, member ``e``'s mask drawn from ``generators[e]`` exactly as
    ``F.dropout`` draws it on the CPU: ``empty_like(x_e).bernoulli_(1 - p) / (1 - p)``."""

    def __init__(self, p: float, generators: list[torch.Generator], shared: _Shared) -> None:
        super().__init__()
        self.p = p
        self.generators = generators
        self.shared = shared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shared.take():
            x = repeat_rows(x, len(self.generators))
        if not self.training or self.p == 0:
            return x
        if self.p == 1:
            return x * x.new_zeros(())
        size = len(self.generators)
        rows = x.shape[0] // size
        noise = x.new_empty((size, rows, *x.shape[1:]))
        for e, generator in enumerate(self.generators):
            noise[e].bernoulli_(1 - self.p, generator=generator)
        noise.div_(1 - self.p)
        out = x.reshape(rows, size, *x.shape[1:]) * noise.transpose(0, 1)
        return out.reshape(x.shape)

    def extra_repr(self) -> str:
        return f"p={self.p}, members={len(self.generators)}"


# ------------------------------------------------------------------ architecture
def _describe(model: nn.Module) -> list[tuple[str, ...]]:
    """What must agree between members: every module's type and hyper-parameters, every
    tensor's name, kind, shape, dtype and ``requires_grad``."""
    out: list[tuple[str, ...]] = []
    for name, module in model.named_modules():
        out.append(("module", name, type(module).__qualname__, module.extra_repr()))
        for kind in ("_parameters", "_buffers"):
            for key, t in getattr(module, kind).items():
                if t is None:
                    out.append((kind, f"{name}.{key}", "None"))
                    continue
                grad = str(t.requires_grad)
                out.append((kind, f"{name}.{key}", str(tuple(t.shape)), str(t.dtype), grad))
    return out


def check_same_architecture(models: Sequence[nn.Module]) -> None:
    """Raise :class:`ArchitectureError` naming the first difference between ``models[0]``
    and another member (module types and hyper-parameters, tensor shapes and dtypes)."""
    reference = _describe(models[0])
    for i, model in enumerate(models[1:], start=1):
        if type(model) is not type(models[0]):
            raise ArchitectureError(
                f"members 0 and {i} are a {type(models[0]).__name__} and a "
                f"{type(model).__name__}; only members of one architecture are batched (train "
                "the others one by one)"
            )
        other = _describe(model)
        for a, b in zip(reference, other, strict=False):
            if a != b:
                raise ArchitectureError(
                    f"members 0 and {i} differ in architecture: {' '.join(a)!r} versus "
                    f"{' '.join(b)!r}; only members of one architecture are batched (train "
                    "the others one by one)"
                )
        if len(reference) != len(other):
            raise ArchitectureError(
                f"members 0 and {i} differ in architecture (different numbers of modules or "
                "tensors); only members of one architecture are batched"
            )


def _check_leaf(name: str, module: nn.Module) -> None:
    holds = any(t is not None for t in [*module._parameters.values(), *module._buffers.values()])
    label = f"{name or '<root>'} ({type(module).__name__})"
    if isinstance(module, _RANDOM):
        raise ArchitectureError(
            f"layer {label} draws random numbers: batched ensembles reproduce nn.Dropout only"
        )
    if isinstance(module, nn.Linear) and type(module).forward is not nn.Linear.forward:
        raise ArchitectureError(f"layer {label} overrides nn.Linear.forward; cannot batch it")
    if isinstance(module, _CONVS) and module.padding_mode != "zeros":
        raise ArchitectureError(
            f"layer {label} pads with {module.padding_mode!r}; batched convolutions pad "
            "with zeros only"
        )
    supported = isinstance(module, (nn.Linear, *_CONVS, *_NORMS))
    if holds and not supported:
        raise ArchitectureError(
            f"layer {label} holds parameters or buffers; batched ensembles support {SUPPORTED}"
        )


def _replace(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)


def _batch_template(
    members: Sequence[nn.Module], generators: list[torch.Generator], shared: _Shared
) -> nn.Module:
    """A copy of ``members[0]`` whose layers with tensors (and dropouts) are batched."""
    template = copy.deepcopy(members[0])
    for name, module in list(template.named_modules()):
        _check_leaf(name, module)
        leaves = [m.get_submodule(name) for m in members]
        if isinstance(module, nn.Linear):
            new: nn.Module = StackedLinear(leaves, shared)
        elif isinstance(module, _CONVS):
            _stack_into(module, leaves)
            _batch_conv(module, len(members), shared)
            continue
        elif isinstance(module, _NORMS):
            new = StackedBatchNorm(leaves, shared)
        elif type(module) is nn.Dropout:
            new = StackedDropout(float(module.p), generators, shared)
        else:
            continue
        if not name:
            raise ArchitectureError("a single layer is not batched; wrap it in a module")
        new.train(module.training)
        _replace(template, name, new)
    return template


# ------------------------------------------------------------------------- model
class BatchedModel:
    """E member networks of one architecture as one batched network (module docstring).

    Args:
        members: the networks, on one device and dtype; each keeps its own tensors until
            :meth:`attach`.
        generators: one generator per member for its dropout masks.

    Attributes:
        module: the batched network: maps a folded batch ``(B * E, ...)`` (row ``b * E +
            e`` for sample ``b`` of member ``e``) to folded logits ``(B * E, C)``.
        size: E.
        names: the members' parameter and buffer names, in ``state_dict`` order.
    """

    def __init__(self, members: Sequence[nn.Module], generators: list[torch.Generator]) -> None:
        if len({id(m) for m in members}) != len(members):
            raise ArchitectureError("the same module object appears twice among the members")
        check_same_architecture(members)
        for i, member in enumerate(members):
            tied = len(list(member.named_parameters(remove_duplicate=False)))
            if tied != len(list(member.named_parameters())):
                raise ArchitectureError(f"member {i} shares (ties) parameters between layers")
        self.size = len(members)
        self.members = list(members)
        self.generators = generators
        self._shared = _Shared()
        self.module = _batch_template(self.members, generators, self._shared)
        self.shares_inputs = True
        self.names = list(self.module.state_dict(keep_vars=True))
        self._attached = False

    def forward_shared(self, x: torch.Tensor) -> torch.Tensor:
        """The folded outputs ``(n E, ...)`` of every member on the same samples ``x``
        ``(n, ...)``: the first batched layer takes ``x`` once for all members (one product
        with their weights side by side) where the architecture allows it
        (:attr:`shares_inputs`, checked when built), else ``x`` is repeated per member."""
        if not self.shares_inputs:
            return self.module(repeat_rows(x, self.size))
        self._shared.pending = True
        try:
            out = self.module(x)
        finally:
            unused = self._shared.take()
        if unused:
            raise RuntimeError("no batched layer ran on the shared input")
        return out

    def tensors(self) -> dict[str, torch.Tensor]:
        """The stacked parameters and buffers by name (each ``(E, ...)``)."""
        return dict(self.module.state_dict(keep_vars=True))

    def trainable(self) -> list[nn.Parameter]:
        """The stacked trainable parameters, in the members' ``parameters()`` order."""
        return [p for p in self.module.parameters() if p.requires_grad]

    # ----------------------------------------------------------------- members
    def attach(self) -> None:
        """Make each member's parameters and buffers views of its slice of the stacked
        tensors. The tensor objects stay the members' own (their ``.data`` is swapped), so
        anything holding a member, a layer or a parameter sees it live."""
        stacked = self.tensors()
        with torch.no_grad():
            for i, member in enumerate(self.members):
                for name in self.names:
                    _tensor(member, name).data = stacked[name].detach()[i]
        self._attached = True

    def release(self, values: dict[int, dict[str, torch.Tensor]] | None = None) -> None:
        """Give each member's tensors storage of their own again, holding the current values
        (or, for member ``i`` in ``values``, those values)."""
        if not self._attached:
            return
        values = values or {}
        with torch.no_grad():
            for i, member in enumerate(self.members):
                current = values.get(i) or self.member_values(i)
                for name in self.names:
                    _tensor(member, name).data = current[name].detach().clone()
        self._attached = False

    def member_values(self, i: int) -> dict[str, torch.Tensor]:
        """Views of member ``i``'s slice of every stacked tensor."""
        return {name: t.detach()[i] for name, t in self.tensors().items()}

    # ------------------------------------------------------------------- checks
    def check_equivalent(self, x: torch.Tensor) -> None:
        """Compare the batched forward with every member's own forward (eval mode) on the
        samples ``x``, member ``e`` seeing them scaled by ``1 + e / E`` (so that a forward
        mixing the rows of a batch mixes members); raise :class:`ArchitectureError` where
        they differ beyond rounding. Then check :meth:`forward_shared` likewise, and fall
        back to repeating shared inputs where it differs (a forward that uses its input
        twice, say)."""
        n, size = x.shape[0], self.size
        scales = [1.0 + e / size for e in range(size)]
        inputs = torch.stack([x * s for s in scales], dim=1)  # (n, E, ...)
        modes = [m.training for m in self.members]
        self.module.eval()
        for member in self.members:
            member.eval()
        try:
            with torch.no_grad():
                folded = self.module(inputs.reshape(n * size, *x.shape[1:]))
                alone = [m(inputs[:, i]).reshape(n, -1) for i, m in enumerate(self.members)]
                for i, out in enumerate(alone):
                    gap = float((folded.reshape(n, size, -1)[:, i] - out).abs().max())
                    self._check_gap(i, gap, out)
                self.shares_inputs = self._shared_agrees(x)
        finally:
            self.module.train()
            for member, mode in zip(self.members, modes, strict=True):
                member.train(mode)

    def _shared_agrees(self, x: torch.Tensor) -> bool:
        try:
            shared = self.forward_shared(x).reshape(x.shape[0], self.size, -1)
        except (RuntimeError, ValueError):
            return False
        for i, member in enumerate(self.members):
            out = member(x).reshape(x.shape[0], -1)
            try:
                self._check_gap(i, float((shared[:, i] - out).abs().max()), out)
            except ArchitectureError:
                return False
        return True

    @staticmethod
    def _check_gap(i: int, gap: float, alone: torch.Tensor) -> None:
        tolerance = 1e-10 if alone.dtype == torch.float64 else 1e-5
        if alone.dtype in (torch.float16, torch.bfloat16):
            tolerance = 1e-2
        if not gap <= tolerance * (float(alone.abs().max()) + 1.0):
            raise ArchitectureError(
                f"the batched forward differs from member {i}'s own forward by {gap:.3g} on "
                "two training samples: the model's forward does something the batched layers "
                f"({SUPPORTED}, samples treated independently) do not reproduce; train these "
                "members one by one"
            )

    def check_no_global_draws(self, x: torch.Tensor) -> None:
        """A training-mode forward must draw random numbers only through ``nn.Dropout``
        (member generators), not from the global generator; the members' generator and
        batch-norm states are left as they were."""
        saved = {k: t.detach().clone() for k, t in self.tensors().items()}
        states = [g.get_state() for g in self.generators]
        before = torch.get_rng_state()
        self.module.train()
        with torch.no_grad():
            self.module(repeat_rows(x, self.size))
        drew = not torch.equal(before, torch.get_rng_state())
        torch.set_rng_state(before)
        for g, state in zip(self.generators, states, strict=True):
            g.set_state(state)
        with torch.no_grad():
            for name, t in self.tensors().items():
                t.copy_(saved[name])
        if drew:
            raise ArchitectureError(
                "the model's forward draws from the global random generator outside "
                "nn.Dropout (e.g. F.dropout in forward): its draws cannot be reproduced per "
                "member; train these members one by one"
            )


def _tensor(member: nn.Module, name: str) -> torch.Tensor:
    """The parameter or buffer ``name`` (a ``state_dict`` key) of ``member``."""
    path, _, key = name.rpartition(".")
    owner = member.get_submodule(path) if path else member
    return getattr(owner, key)


def repeat_rows(x: torch.Tensor, size: int) -> torch.Tensor:
    """The same samples for every member, folded: ``(n, ...) -> (n * size, ...)``, row
    ``b * size + e`` holding sample ``b``."""
    return x.unsqueeze(1).expand(x.shape[0], size, *x.shape[1:]).reshape(-1, *x.shape[1:])
