"""st-VGG of paper 002 and its linear twin: architecture, shapes, (af)finity in eval mode."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from collapselab.models import StVGG, check_convention
from tests._hooks import capture_outputs


def test_architecture_as_specified() -> None:
    model = StVGG(5)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 32, 64, 64, 128, 128, 256, 256]
    assert [c.kernel_size[0] for c in convs] == [3, 3, 3, 3, 3, 3, 2, 2]
    pools = [m for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    assert len(pools) == 4 and all(p.kernel_size == 2 and p.stride == 2 for p in pools)
    drops = [m.p for m in model.modules() if isinstance(m, nn.Dropout)]
    assert drops == [0.25, 0.25, 0.25, 0.25, 0.5]
    assert model.fc.in_features == 256 * 2 * 2 and model.fc.out_features == 512
    assert model.classifier.in_features == 512 and model.classifier.out_features == 5
    assert sum(isinstance(m, nn.ReLU) for m in model.modules()) == 9  # 8 convs + FC 512
    check_convention(model)
    assert StVGG(10, input_size=96).fc.in_features == 256 * 6 * 6  # STL10


def test_feature_shapes_and_same_padding() -> None:
    torch.manual_seed(0)
    model = StVGG(3, in_channels=1, width_multiplier=0.25).eval()
    conv_names = [f"stages.{k}.conv{j}" for k in range(4) for j in (1, 2)]
    got = capture_outputs(model, [*model.feature_layers, *conv_names], torch.randn(2, 1, 32, 32))
    chans = [8, 8, 16, 16, 32, 32, 64, 64]
    for i, name in enumerate(model.feature_layers[:-1]):
        hw = 32 // 2 ** (i // 2)  # 'same' padding: only the pools shrink the maps
        assert tuple(got[name].shape) == (2, chans[i], hw, hw), name
        assert tuple(got[conv_names[i]].shape) == (2, chans[i], hw, hw)
    assert tuple(got["fc_act"].shape) == (2, 128)
    assert got["logits"].shape == (2, 3)
    assert model.penultimate == "fc_drop"


def test_same_padding_of_2x2_conv_is_bottom_right() -> None:
    model = StVGG(3, width_multiplier=0.125).double()
    conv = model.stages[3].conv2  # 2x2 kernel, square (256 -> 256 at full width)
    with torch.no_grad():
        conv.weight.zero_()
        conv.weight[:, :, 0, 0] = torch.eye(conv.out_channels, conv.in_channels)
        conv.bias.zero_()
        x = torch.randn(2, conv.in_channels, 5, 5, dtype=torch.float64)
        # out[i, j] = sum_ab w[a, b] x_pad[i + a, j + b] with no top/left padding = x[i, j]
        torch.testing.assert_close(conv(x), x, rtol=0, atol=0)
        conv.weight.zero_()
        conv.weight[:, :, 1, 1] = torch.eye(conv.out_channels, conv.in_channels)
        shifted = torch.zeros_like(x)
        shifted[:, :, :-1, :-1] = x[:, :, 1:, 1:]  # zeros enter at the bottom/right
        torch.testing.assert_close(conv(x), shifted, rtol=0, atol=0)


def _affine_defect(model: nn.Module, x1, x2, a: float, b: float, bias: bool) -> float:
    with torch.no_grad():
        lhs = model(a * x1 + b * x2)
        rhs = a * model(x1) + b * model(x2)
        if bias:  # affine map: f(a x1 + b x2) = a f(x1) + b f(x2) + (1 - a - b) f(0)
            rhs = rhs + (1 - a - b) * model(torch.zeros_like(x1))
    return float((lhs - rhs).abs().max() / rhs.abs().max())


@pytest.mark.parametrize("bias", [False, True])
def test_linear_twin_is_linear_or_affine_in_eval_mode(bias: bool) -> None:
    torch.manual_seed(1)
    model = StVGG(4, linear=True, width_multiplier=0.25, bias=bias).double().eval()
    if bias:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    m.bias.normal_()
    assert any(isinstance(m, nn.AvgPool2d) for m in model.modules())
    assert not any(isinstance(m, (nn.MaxPool2d, nn.ReLU)) for m in model.modules())
    x1 = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    x2 = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    assert _affine_defect(model, x1, x2, 0.7, -1.9, bias) < 1e-12
    if not bias:
        with torch.no_grad():
            assert float(model(torch.zeros_like(x1)).abs().max()) == 0.0
    # Dropout is the only non-linearity: in train mode the map is random, so not linear.
    model.train()
    torch.manual_seed(2)
    assert _affine_defect(model, x1, x2, 0.7, -1.9, bias) > 1e-3


def test_nonlinear_st_vgg_is_not_affine() -> None:
    torch.manual_seed(3)
    model = StVGG(4, width_multiplier=0.25).double().eval()
    x1 = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    x2 = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    assert _affine_defect(model, x1, x2, 0.7, -1.9, bias=True) > 1e-3


def test_glorot_uniform_init_zero_bias() -> None:
    torch.manual_seed(4)
    model = StVGG(10)
    w = model.fc.weight.detach().double()  # 512 x 1024
    bound = (6.0 / (1024 + 512)) ** 0.5
    assert float(w.abs().max()) <= bound
    assert float(w.var()) == pytest.approx(bound**2 / 3, rel=0.02)
    assert all(
        float(m.bias.detach().abs().max()) == 0.0
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    )


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"input_size": 8}, ValueError, "input_size"),
        ({"input_size": (32, 32, 3)}, ValueError, "input_size"),
        ({"dropout_conv": 1.5}, ValueError, "dropout_conv"),
        ({"linear": "yes"}, TypeError, "linear"),
        ({"n_classes": 0}, ValueError, "n_classes"),
    ],
)
def test_bad_arguments(kwargs: dict, err: type, match: str) -> None:
    args = {"n_classes": 3, **kwargs}
    with pytest.raises(err, match=match):
        StVGG(**args)


def test_input_size_mismatch_raises() -> None:
    model = StVGG(3, width_multiplier=0.125)
    with pytest.raises(ValueError, match="input_size"):
        model(torch.randn(2, 3, 64, 64))
    with pytest.raises(ValueError, match="in_channels=3"):
        model(torch.randn(2, 1, 32, 32))
