"""st-VGG and VGG-19 against the sizes their papers state: paper 002 App. D.2's st-VGG (8
convolutions with 32, 32, 64, 64, 128, 128, 256, 256 filters, 3x3 then 2x2 for the last two,
a 2x2 max-pool and 0.25 dropout after every other one, FC 512, 0.5 dropout, FC K) and
Simonyan & Zisserman's configuration E (VGG-19: 16 3x3 convolutions, five max-pools).
Parameter counts are summed here from those layer lists, independently of the models."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from collapselab.models import StVGG, vgg19

STVGG_CONVS = [(32, 3), (32, 3), (64, 3), (64, 3), (128, 3), (128, 3), (256, 2), (256, 2)]
VGG19_CONVS = [64, 64, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512, 512, 512, 512, 512]


def _stvgg_count(k: int, channels: int = 3, side: int = 32) -> int:
    total, prev = 0, channels
    for c, kernel in STVGG_CONVS:
        total += prev * c * kernel * kernel + c
        prev = c
    flat = prev * (side // 16) ** 2  # four 2x2 pools
    return total + flat * 512 + 512 + 512 * k + k


@pytest.mark.parametrize("k", [2, 5, 10])
def test_stvgg_parameters_match_the_paper_layer_list(k):
    net = StVGG(k)
    assert sum(p.numel() for p in net.parameters()) == _stvgg_count(k)
    assert _stvgg_count(5) == 1_208_101  # small mammals: 680,736 conv + 524,800 FC + 2,565
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert [(m.out_channels, m.kernel_size[0]) for m in convs] == STVGG_CONVS


def test_stvgg_shapes_pools_and_dropout():
    net = StVGG(5).eval()
    shapes = []
    h = torch.zeros(2, 3, 32, 32)
    for stage in net.stages:
        assert isinstance(stage.pool, nn.MaxPool2d) and stage.drop.p == 0.25
        h = stage(h)
        shapes.append(tuple(h.shape[1:]))
    assert shapes == [(32, 16, 16), (64, 8, 8), (128, 4, 4), (256, 2, 2)]
    assert net.fc.in_features == 1024 and net.fc.out_features == 512 and net.fc_drop.p == 0.5
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 5)
    twin = StVGG(5, linear=True)
    assert all(isinstance(s.pool, nn.AvgPool2d) for s in twin.stages)  # "similar stride"
    assert sum(p.numel() for p in twin.parameters()) == _stvgg_count(5)


def test_vgg19_is_configuration_e():
    net = vgg19(n_classes=10)
    convs = [m for m in net.features if isinstance(m, nn.Conv2d)]
    assert [m.out_channels for m in convs] == VGG19_CONVS
    assert all(m.kernel_size == (3, 3) and m.padding == (1, 1) for m in convs)
    assert sum(isinstance(m, nn.MaxPool2d) for m in net.features) == 5
    assert sum(isinstance(m, nn.BatchNorm2d) for m in net.features) == 16
    conv_params = sum(p.numel() for m in convs for p in m.parameters())
    prev, expected = 3, 0
    for c in VGG19_CONVS:
        expected += prev * c * 9 + c
        prev = c
    assert conv_params == expected == 20_024_384
    total = sum(p.numel() for p in net.parameters())
    assert total == expected + 2 * sum(VGG19_CONVS) + 512 * 10 + 10 == 20_040_522
    with torch.no_grad():
        assert net.eval()(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
