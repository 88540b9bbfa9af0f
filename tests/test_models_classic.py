"""Small-image ResNet-18/34/50 and VGG-11/13 (paper 003): structure, shapes, counts, init."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from collapselab.models import (
    check_convention,
    resnet18,
    resnet34,
    resnet50,
    vgg11,
    vgg13,
)
from tests._hooks import capture_outputs


def _conv_params(c_in: int, c_out: int, k: int, bias: bool = False) -> int:
    return c_in * c_out * k * k + (c_out if bias else 0)


def _resnet_param_count(block: str, counts: list[int], n_classes: int = 10) -> int:
    """Parameter count from the architecture, written out by hand."""
    total = _conv_params(3, 64, 3) + 2 * 64  # conv1 + bn1
    in_ch = 64
    for planes, n, stride in zip((64, 128, 256, 512), counts, (1, 2, 2, 2), strict=True):
        for j in range(n):
            s = stride if j == 0 else 1
            if block == "basic":
                out = planes
                total += _conv_params(in_ch, planes, 3) + 2 * planes
                total += _conv_params(planes, planes, 3) + 2 * planes
            else:
                out = 4 * planes
                total += _conv_params(in_ch, planes, 1) + 2 * planes
                total += _conv_params(planes, planes, 3) + 2 * planes
                total += _conv_params(planes, out, 1) + 2 * out
            if s != 1 or in_ch != out:
                total += _conv_params(in_ch, out, 1) + 2 * out
            in_ch = out
    return total + in_ch * n_classes + n_classes


@pytest.mark.parametrize(
    ("factory", "block", "counts", "known"),
    [
        (resnet18, "basic", [2, 2, 2, 2], 11_173_962),
        (resnet34, "basic", [3, 4, 6, 3], 21_282_122),
        (resnet50, "bottleneck", [3, 4, 6, 3], 23_520_842),
    ],
)
def test_resnet_structure_and_shapes_full_width(factory, block, counts, known) -> None:
    torch.manual_seed(0)
    model = factory().eval()
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == _resnet_param_count(block, counts) == known  # the usual CIFAR counts
    # Small-image stem: 3x3, stride 1, padding 1, no max-pool.
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert model.conv1.padding == (1, 1) and model.conv1.bias is None
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    layers = model.feature_layers
    assert len(layers) == 1 + sum(counts) and layers[0] == "relu"
    got = capture_outputs(model, [*layers, "flatten"], torch.randn(2, 3, 32, 32))
    expansion = 4 if block == "bottleneck" else 1
    assert tuple(got["relu"].shape) == (2, 64, 32, 32)
    for i, (planes, hw) in enumerate(zip((64, 128, 256, 512), (32, 16, 8, 4), strict=True)):
        for j in range(counts[i]):
            assert tuple(got[f"layer{i + 1}.{j}"].shape) == (2, planes * expansion, hw, hw)
    assert tuple(got["flatten"].shape) == (2, 512 * expansion)
    assert got["logits"].shape == (2, 10)
    check_convention(model)


def test_basic_block_matches_functional_formula() -> None:
    torch.manual_seed(1)
    model = resnet18(in_channels=1, n_classes=3, width_multiplier=0.125).double().eval()
    blk = model.layer2[0]  # strided, with a projection shortcut
    with torch.no_grad():  # non-trivial eval-mode BatchNorm
        for m in blk.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_()
                m.bias.normal_()
    x = torch.randn(2, 8, 8, 8, dtype=torch.float64)

    def bn(z, m):
        return F.batch_norm(z, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)

    with torch.no_grad():
        out = F.relu(bn(F.conv2d(x, blk.conv1.weight, stride=2, padding=1), blk.bn1))
        out = bn(F.conv2d(out, blk.conv2.weight, padding=1), blk.bn2)
        short = bn(F.conv2d(x, blk.downsample[0].weight, stride=2), blk.downsample[1])
        torch.testing.assert_close(blk(x), F.relu(out + short), rtol=0, atol=1e-12)


def test_resnet_init_is_he_normal_fan_out() -> None:
    torch.manual_seed(2)
    w = resnet18().layer4[1].conv2.weight.detach().double()  # 512 x 512 x 3 x 3
    assert float(w.var()) == pytest.approx(2.0 / (512 * 9), rel=0.01)


@pytest.mark.parametrize("factory", [resnet18, resnet34, resnet50])
def test_resnet_cheap_instances(factory) -> None:
    model = factory(in_channels=1, n_classes=4, width_multiplier=0.0625)
    assert model.conv1.out_channels == 4
    got = capture_outputs(model, model.feature_layers, torch.randn(2, 1, 28, 28))
    assert got["logits"].shape == (2, 4)
    assert tuple(got[model.feature_layers[-1]].shape)[2:] == (4, 4)  # 28 -> 14 -> 7 -> 4


VGG_CONVS = {
    "vgg11": [64, 128, 256, 256, 512, 512, 512, 512],
    "vgg13": [64, 64, 128, 128, 256, 256, 512, 512, 512, 512],
}


def _vgg_param_count(convs: list[int], n_classes: int = 10) -> int:
    total, prev = 0, 3
    for c in convs:
        total += _conv_params(prev, c, 3, bias=True) + 2 * c
        prev = c
    return total + prev * n_classes + n_classes


@pytest.mark.parametrize(("factory", "name"), [(vgg11, "vgg11"), (vgg13, "vgg13")])
def test_vgg_structure_and_shapes(factory, name: str) -> None:
    torch.manual_seed(3)
    model = factory().eval()
    convs = VGG_CONVS[name]
    assert sum(p.numel() for p in model.parameters()) == _vgg_param_count(convs)
    mods = list(model.features)
    # every conv is followed by BatchNorm then ReLU; five 2x2 max-pools
    for i, m in enumerate(mods):
        if isinstance(m, nn.Conv2d):
            assert m.kernel_size == (3, 3) and m.padding == (1, 1)
            assert isinstance(mods[i + 1], nn.BatchNorm2d) and isinstance(mods[i + 2], nn.ReLU)
    assert sum(isinstance(m, nn.MaxPool2d) for m in mods) == 5
    assert len(model.feature_layers) == len(convs)
    got = capture_outputs(model, [*model.feature_layers, "flatten"], torch.randn(2, 3, 32, 32))
    n_pools_before = 0
    relu_idx = {int(n.split(".")[1]) for n in model.feature_layers}
    k = 0
    for i, m in enumerate(mods):
        if isinstance(m, nn.MaxPool2d):
            n_pools_before += 1
        if i in relu_idx:
            hw = 32 // 2**n_pools_before
            assert tuple(got[f"features.{i}"].shape) == (2, convs[k], hw, hw)
            k += 1
    assert tuple(got["flatten"].shape) == (2, 512)
    assert float(model.classifier.weight.detach().std()) == pytest.approx(0.01, rel=0.1)
    check_convention(model)


def test_vgg_cheap_instance_and_small_input_error() -> None:
    model = vgg11(in_channels=1, n_classes=5, width_multiplier=0.125)
    assert model(torch.randn(2, 1, 32, 32)).shape == (2, 5)
    assert model(torch.randn(2, 1, 96, 96)).shape == (2, 5)  # STL10-sized
    with pytest.raises(ValueError, match="H, W >= 32"):
        model(torch.randn(2, 1, 28, 28))
