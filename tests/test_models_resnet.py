"""FCResNet and ConvResNet of paper 001: block formulas, feature shapes, every row of Table I."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from collapselab.models import (
    PFC_TABLE_I,
    ConvResNet,
    FCResNet,
    check_convention,
    pfc_cifar10,
    pfc_cifar100,
    pfc_fashion_mnist,
    pfc_mnist,
    pfc_stl10,
)
from tests._hooks import capture_outputs


def _randomise_norms(model: nn.Module) -> None:
    """Non-trivial BatchNorm statistics and affine parameters (so eval mode is tested)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_()
                m.bias.normal_()


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _bn_eval(z: np.ndarray, bn: nn.BatchNorm1d) -> np.ndarray:
    return (z - _np(bn.running_mean)) / np.sqrt(_np(bn.running_var) + bn.eps) * _np(
        bn.weight
    ) + _np(bn.bias)


def relu(z: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0.0)


def _lin(z: np.ndarray, lin: nn.Linear) -> np.ndarray:
    return z @ _np(lin.weight).T + _np(lin.bias)


# ---------------------------------------------------------------- FCResNet


@pytest.mark.parametrize("block", ["preact", "linear_relu"])
def test_fc_resnet_matches_numpy_reference(block: str) -> None:
    torch.manual_seed(0)
    model = FCResNet(12, 6, n_blocks=3, n_classes=4, block=block).double()
    _randomise_norms(model)
    model.eval()
    x = torch.randn(5, 2, 6, dtype=torch.float64)
    got = capture_outputs(model, model.feature_layers, x)
    h = _lin(x.numpy().reshape(5, 12), model.stem)
    refs = [h]
    for blk in model.blocks:
        if block == "linear_relu":
            v = relu(_lin(h, blk.linear1))  # v(x) = sigma(W x + b), 001 Sec. II-C
        else:
            v = _lin(
                relu(_bn_eval(_lin(relu(_bn_eval(h, blk.norm1)), blk.linear1), blk.norm2)),
                blk.linear2,
            )
        h = h + v
        refs.append(h)
    logits = _lin(h, model.classifier)
    assert model.feature_layers == ["stem", "blocks.0", "blocks.1", "blocks.2"]
    for name, ref in zip(model.feature_layers, refs, strict=True):
        assert got[name].shape == (5, 6)
        np.testing.assert_allclose(got[name].numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["logits"].numpy(), logits, rtol=1e-12, atol=1e-12)


def test_fc_resnet_names_and_options() -> None:
    model = FCResNet(8, 5, 2, 3)
    check_convention(model)
    assert model.penultimate == "blocks.1"
    names = set(dict(model.named_modules()))
    assert {"stem", "blocks.0.norm1", "blocks.0.linear2", "classifier"} <= names
    no_norm = FCResNet(8, 5, 2, 3, norm=False)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in no_norm.modules())
    head = FCResNet(8, 5, 2, 3, final_norm=True)
    assert head.penultimate == "head"
    check_convention(head)
    assert head(torch.randn(2, 8)).shape == (2, 3)
    nobias = FCResNet(8, 5, 2, 3, bias=False)
    assert all(m.bias is None for m in nobias.modules() if isinstance(m, nn.Linear))


def test_pfc_mnist_is_table_one_fc_row() -> None:
    torch.manual_seed(1)
    model = pfc_mnist()
    assert model.stem.in_features == 784 and model.width == 1000 and model.n_blocks == 10
    x = torch.randn(2, 1, 28, 28)
    got = capture_outputs(model, model.feature_layers, x)
    assert len(model.feature_layers) == 11  # layer0 + 10 blocks
    assert all(got[n].shape == (2, 1000) for n in model.feature_layers)
    assert got["logits"].shape == (2, 10)
    assert pfc_mnist(width_multiplier=0.01).width == 10


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"n_blocks": 0}, ValueError, "n_blocks"),
        ({"block": "bottleneck"}, ValueError, "block"),
        ({"norm": 1}, TypeError, "norm"),
    ],
)
def test_fc_resnet_bad_arguments(kwargs: dict, err: type, match: str) -> None:
    args = {"in_dim": 4, "width": 3, "n_blocks": 2, "n_classes": 2, **kwargs}
    with pytest.raises(err, match=match):
        FCResNet(**args)


# ---------------------------------------------------------------- ConvResNet

# 001 Table I, written out independently of the presets: (input, [(C, H, W, n_blocks)]).
TABLE_I = {
    "pfc_fashion_mnist": ((1, 28, 28), [(32, 14, 14, 5), (64, 7, 7, 4)]),
    "pfc_cifar10": ((3, 32, 32), [(64, 16, 16, 2), (128, 8, 8, 3), (256, 4, 4, 4)]),
    "pfc_stl10": (
        (3, 96, 96),
        [(64, 48, 48, 5), (128, 24, 24, 5), (256, 12, 12, 5), (512, 6, 6, 5)],
    ),
    "pfc_cifar100": (
        (3, 32, 32),
        [(64, 32, 32, 3), (128, 16, 16, 3), (256, 8, 8, 4), (512, 4, 4, 4)],
    ),
}
PRESETS = {
    "pfc_fashion_mnist": pfc_fashion_mnist,
    "pfc_cifar10": pfc_cifar10,
    "pfc_stl10": pfc_stl10,
    "pfc_cifar100": pfc_cifar100,
}


@pytest.mark.parametrize("name", list(TABLE_I))
def test_table_one_shapes_at_full_size(name: str) -> None:
    torch.manual_seed(2)
    in_shape, stages = TABLE_I[name]
    model = PRESETS[name]().eval()
    assert model.n_stages == len(stages)
    assert PFC_TABLE_I[name]["input_shape"] == in_shape
    layers = model.feature_layers
    got = capture_outputs(model, layers, torch.randn(2, *in_shape))
    for s, (c, h, w, n_blocks) in enumerate(stages):
        names = model.stage_layers(s)
        assert len(names) == n_blocks + 1  # "layer0" + every block of the stage
        assert names[1:] == [f"stages.{s}.blocks.{j}" for j in range(n_blocks)]
        for n in names:
            assert tuple(got[n].shape) == (2, c, h, w), (name, n)
    # 001 measures the last stage: layer0 = input of its first block.
    c, h, w, n_blocks = stages[-1]
    assert model.stage_layers(-1) == model.stage_layers(len(stages) - 1)
    last = model.stage_layers(-1)
    first_block = model.get_submodule(last[1])
    seen = {}
    first_block.register_forward_pre_hook(lambda _m, args: seen.__setitem__("in", args[0]))
    with torch.no_grad():
        model(torch.randn(2, *in_shape))
    assert tuple(seen["in"].shape) == (2, c, h, w)
    assert got["logits"].shape == (2, 100 if name == "pfc_cifar100" else 10)
    assert model.classifier.in_features == c
    assert layers == [n for s in range(len(stages)) for n in model.stage_layers(s)]


def test_table_one_feature_dimensions() -> None:
    # Flattened last-stage dimensions quoted in note 001 §4.1.
    dims = {k: int(np.prod(v[1][-1][:3])) for k, v in TABLE_I.items()}
    assert dims == {
        "pfc_fashion_mnist": 3136,
        "pfc_cifar10": 4096,
        "pfc_stl10": 18432,
        "pfc_cifar100": 8192,
    }


def test_width_multiplier_scales_channels_only() -> None:
    model = pfc_cifar100(width_multiplier=0.125)
    got = capture_outputs(model, model.feature_layers, torch.randn(2, 3, 32, 32))
    expected = [(8, 32), (16, 16), (32, 8), (64, 4)]
    for s, (c, hw) in enumerate(expected):
        for n in model.stage_layers(s):
            assert tuple(got[n].shape) == (2, c, hw, hw)
    assert pfc_cifar10(n_classes=3, width_multiplier=0.1)(torch.randn(2, 3, 32, 32)).shape == (
        2,
        3,
    )


def test_conv_blocks_are_preactivation_residuals() -> None:
    torch.manual_seed(3)
    model = ConvResNet(2, 3, stages=[(4, 2, 1), (6, 1, 2)]).double()
    _randomise_norms(model)
    model.eval()
    x = torch.randn(2, 2, 9, 9, dtype=torch.float64)
    got = capture_outputs(model, model.feature_layers, x)

    def bn(z: torch.Tensor, m: nn.BatchNorm2d) -> torch.Tensor:
        shape = (1, -1, 1, 1)
        return (z - m.running_mean.view(shape)) / torch.sqrt(
            m.running_var.view(shape) + m.eps
        ) * m.weight.view(shape) + m.bias.view(shape)

    with torch.no_grad():
        h = F.conv2d(x, model.stem.weight, padding=1)
        torch.testing.assert_close(got["stem"], h, rtol=1e-12, atol=1e-12)
        for s, stage in enumerate(model.stages):
            if s > 0:
                t = stage.transition
                h = F.conv2d(F.relu(bn(h, t.norm)), t.conv.weight, stride=2, padding=1)
                torch.testing.assert_close(got[f"stages.{s}.transition"], h, rtol=0, atol=1e-12)
            for j, blk in enumerate(stage.blocks):
                v = F.conv2d(F.relu(bn(h, blk.norm1)), blk.conv1.weight, padding=1)
                v = F.conv2d(F.relu(bn(v, blk.norm2)), blk.conv2.weight, padding=1)
                h = h + v
                torch.testing.assert_close(got[f"stages.{s}.blocks.{j}"], h, rtol=0, atol=1e-12)
        logits = h.mean(dim=(2, 3)) @ model.classifier.weight.T + model.classifier.bias
    torch.testing.assert_close(got["logits"], logits, rtol=0, atol=1e-12)
    assert tuple(got["stages.1.blocks.0"].shape) == (2, 6, 5, 5)  # ceil(9 / 2)
    check_convention(model)
    assert model.penultimate == "flatten"


def test_final_norm_head_and_stem_kernel() -> None:
    model = ConvResNet(1, 2, [(3, 1, 2)], stem_kernel=5, final_norm=True)
    assert model.stem.kernel_size == (5, 5) and model.stem.padding == (2, 2)
    assert model(torch.randn(2, 1, 12, 12)).shape == (2, 2)
    assert isinstance(model.head[0], nn.BatchNorm2d)


def test_conv_init_is_he_normal_fan_out() -> None:
    torch.manual_seed(4)
    model = pfc_stl10()
    w = model.stages[3].blocks[0].conv1.weight.detach().double()  # 512 x 512 x 3 x 3
    assert float(w.var()) == pytest.approx(2.0 / (512 * 9), rel=0.01)
    assert abs(float(w.mean())) < 0.01 * (2.0 / (512 * 9)) ** 0.5
    bn = model.stages[3].blocks[0].norm1
    assert float(bn.weight.detach().min()) == 1.0 and float(bn.bias.detach().abs().max()) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"stages": []}, ValueError, "stages"),
        ({"stages": [(4, 1)]}, ValueError, r"stages\[0\]"),
        ({"stages": [(4, 0, 1)]}, ValueError, "n_blocks"),
        ({"stem_kernel": 4}, ValueError, "stem_kernel"),
        ({"width_multiplier": 0}, ValueError, "width_multiplier"),
    ],
)
def test_conv_resnet_bad_arguments(kwargs: dict, err: type, match: str) -> None:
    args = {"in_channels": 3, "n_classes": 2, "stages": [(4, 1, 1)], **kwargs}
    with pytest.raises(err, match=match):
        ConvResNet(**args)


def test_conv_resnet_bad_inputs_and_indices() -> None:
    model = ConvResNet(3, 2, [(4, 1, 1), (4, 1, 2)])
    with pytest.raises(ValueError, match="stage_index"):
        model.stage_layers(2)
    with pytest.raises(TypeError, match="stage_index"):
        model.stage_layers("last")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="in_channels=3"):
        model(torch.randn(2, 1, 8, 8))
