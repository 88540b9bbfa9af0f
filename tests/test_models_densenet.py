"""DenseNets of paper 003: a functional reference forward, shapes, depths, parameter counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from collapselab.models import (
    DenseNet,
    build_model,
    check_convention,
    densenet40,
    densenet100,
    densenet201,
    densenet250,
    densenet_bc,
)


def _randomise_norms(model: nn.Module) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_()
                m.bias.normal_()


def _bn(x: torch.Tensor, bn: nn.BatchNorm2d) -> torch.Tensor:
    return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)


def _reference(model: DenseNet, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The forward pass written out with functional ops from the paper's definitions."""
    out = {}
    stem = model.stem
    if model.stem_kind == "small":
        h = F.conv2d(x, stem[0].weight, padding=1)
    else:
        h = F.conv2d(x, stem[0].weight, stride=2, padding=3)
        h = F.max_pool2d(F.relu(_bn(h, stem[1])), 3, stride=2, padding=1)
    out["stem"] = h
    n_blocks = len(model.block_config)
    for i in range(1, n_blocks + 1):
        maps = [h]
        for layer in getattr(model, f"block{i}").layers:
            z = torch.cat(maps, dim=1)
            if model.bottleneck:
                z = F.conv2d(F.relu(_bn(z, layer.norm1)), layer.conv1.weight)
            maps.append(F.conv2d(F.relu(_bn(z, layer.norm2)), layer.conv2.weight, padding=1))
        h = torch.cat(maps, dim=1)
        out[f"block{i}"] = h
        if i < n_blocks:
            t = getattr(model, f"transition{i}")
            h = F.avg_pool2d(F.conv2d(F.relu(_bn(h, t.norm)), t.conv.weight), 2)
            out[f"transition{i}"] = h
    h = F.relu(_bn(h, model.norm))
    out["relu"] = h
    out["flatten"] = h.mean(dim=(2, 3))
    out["logits"] = out["flatten"] @ model.classifier.weight.T + model.classifier.bias
    return out


def _capture(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    names = [*model.feature_layers, model.penultimate]
    got: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    hooks = [
        model.get_submodule(n).register_forward_hook(lambda _m, _i, o, n=n: got[n].append(o))
        for n in names
    ]
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in hooks:
            h.remove()
    assert all(len(v) == 1 for v in got.values()), "every feature layer fires once"
    return {"logits": logits, **{n: v[0] for n, v in got.items()}}


@pytest.mark.parametrize(
    ("kwargs", "size"),
    [
        ({"block_config": (2, 3, 2), "growth_rate": 3}, 8),
        ({"block_config": (2, 2), "growth_rate": 4, "bottleneck": False, "compression": 1.0}, 6),
        ({"block_config": (1, 2, 1, 1), "growth_rate": 2, "stem": "imagenet"}, 40),
    ],
)
def test_forward_matches_functional_reference(kwargs, size):
    torch.manual_seed(0)
    model = DenseNet(in_channels=2, n_classes=5, **kwargs).double()
    with torch.no_grad():
        model.classifier.bias.normal_()
    _randomise_norms(model)
    model.eval()
    x = torch.randn(3, 2, size, size, dtype=torch.float64)
    got = _capture(model, x)
    ref = _reference(model, x)
    assert set(got) == set(ref)
    for name, value in ref.items():
        torch.testing.assert_close(got[name], value, rtol=1e-12, atol=1e-12, msg=name)


def test_channel_bookkeeping_and_convention():
    model = DenseNet((2, 3, 2), growth_rate=3, in_channels=1, n_classes=4)
    check_convention(model)
    assert model.feature_layers == [
        "stem",
        "block1",
        "transition1",
        "block2",
        "transition2",
        "block3",
        "relu",
    ]
    assert model.penultimate == "flatten"
    got = _capture(model.eval(), torch.randn(2, 1, 8, 8))
    # BC defaults: 2k = 6 stem channels; a block adds n*k; a transition halves (floor).
    shapes = {n: tuple(t.shape[1:]) for n, t in got.items()}
    assert shapes["stem"] == (6, 8, 8)
    assert shapes["block1"] == (12, 8, 8) and shapes["transition1"] == (6, 4, 4)
    assert shapes["block2"] == (15, 4, 4) and shapes["transition2"] == (7, 2, 2)
    assert shapes["block3"] == (13, 2, 2) and shapes["relu"] == (13, 2, 2)
    assert shapes["flatten"] == (13,) and model.num_features == 13
    assert shapes["logits"] == (4,)
    assert model.classifier.in_features == 13


@pytest.mark.parametrize(
    ("factory", "depth", "blocks", "k", "n_params"),
    [
        # Huang et al. (2017), Table 2: DenseNet-BC (L=100, k=12) 0.8M, (L=250, k=24) 15.3M.
        (densenet40, 40, (6, 6, 6), 12, 176_122),
        (densenet100, 100, (16, 16, 16), 12, 769_162),
        (densenet250, 250, (41, 41, 41), 24, 15_324_406),
        (densenet201, 201, (6, 12, 48, 32), 32, 18_112_138),
    ],
)
def test_paper_depths(factory, depth, blocks, k, n_params):
    model = factory()
    assert model.depth == depth and model.block_config == blocks and model.growth_rate == k
    n_convs = sum(isinstance(m, (nn.Conv2d, nn.Linear)) for m in model.modules())
    # Conv + linear layers counted directly: the depth (the shortcut-free path) is all of them.
    assert n_convs == depth
    assert sum(p.numel() for p in model.parameters()) == n_params


def test_densenet201_has_torchvisions_parameter_count_with_1000_classes():
    # torchvision.models.densenet201() has 20,013,928 parameters (the same layout).
    model = densenet201(n_classes=1000)
    assert sum(p.numel() for p in model.parameters()) == 20_013_928


def test_small_inputs_and_registry():
    model = build_model("densenet40", in_channels=1, n_classes=3, growth_rate=2).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 1, 32, 32)).shape == (2, 3)
    assert isinstance(build_model("DenseNet100", growth_rate=2), DenseNet)
    big = build_model("densenet201", growth_rate=2).eval()
    with torch.no_grad():
        assert big(torch.randn(1, 3, 96, 96)).shape == (1, 10)
    assert build_model("densenet", block_config=[1, 1], growth_rate=2).depth == 7


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="6n \\+ 4"):
        densenet_bc(41)
    with pytest.raises(ValueError, match="compression"):
        DenseNet((2, 2), compression=1.5)
    with pytest.raises(ValueError, match="stem"):
        DenseNet((2, 2), stem="huge")
    with pytest.raises(TypeError, match="block_config"):
        DenseNet(3)
    with pytest.raises(ValueError, match="at least one"):
        DenseNet(())
    with pytest.raises(ValueError, match="x must have shape"):
        densenet40(growth_rate=2)(torch.randn(2, 1, 32, 32))
    with pytest.raises(ValueError, match="spatial size"):
        DenseNet((1, 1, 1), growth_rate=2)(torch.randn(1, 3, 2, 2))
