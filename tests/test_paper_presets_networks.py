"""Issue 35 item 5: the paper presets' own networks train through the experiments' members
(one epoch on tiny fixture files, on the CPU): st-VGG and its linear twin for Figs 5a, 9, 11,
VGG-19 for Fig. 7b."""

from __future__ import annotations

import numpy as np
import torch

from collapselab.experiments.pcbias._common import pcb_data
from collapselab.experiments.pcbias.image_nets import FlatImageNet, image_network
from collapselab.experiments.pcbias.linear_sgd import LinearSGDMember
from collapselab.experiments.pcbias.projections import MLPMember
from collapselab.models import StVGG
from tests._cifar_files import write_cifar10, write_cifar100


def test_flat_rows_are_the_channels_first_images():
    torch.manual_seed(0)
    net = image_network("st_vgg", 3072, 5).eval()
    assert isinstance(net.net, StVGG) and net.shape == (3, 32, 32)
    images = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(net(images.reshape(4, -1)), net.net(images))
        features = net.penultimate(images.reshape(4, -1))
    assert features.shape == (4, 512)
    twin = image_network("st_vgg", 3072, 5, linear=True)
    assert isinstance(twin, FlatImageNet) and twin.net.linear


def test_stvgg_members_train_on_small_mammals(tmp_path):
    write_cifar100(tmp_path, "binary", n_train=40, n_test=20)
    spec = pcb_data("cifar100", {"superclass": "small_mammals"})
    results = {}
    for kind in ("nonlinear", "linear"):
        member = MLPMember(data=spec, kind=kind, width=8, depth=1, lr=0.05, batch_size=10,
                           epochs=1, pcs=(1, 10), net="st_vgg", data_dir=str(tmp_path))  # fmt: skip
        assert member.batch_key() is None  # trained one by one
        results[kind] = member.train()
    got = results["nonlinear"]
    assert got["correct"].shape == (2, 20) and got["projected"].shape == (2, 2)
    assert np.allclose(got["train_accuracy"], got["correct"].mean(1))
    assert got["penultimate"].shape == (20,)
    assert "penultimate" not in results["linear"]
    assert results["linear"]["projected"].shape == (2, 2)


def test_vgg19_member_trains_on_cifar10(tmp_path):
    write_cifar10(tmp_path, "python", n=4)
    member = LinearSGDMember(data=pcb_data("cifar10"), init="glorot_uniform", dropout=0.5,
                             lr=0.01, batch_size=10, epochs=1, checkpoints=2,
                             record_correct=True, network="vgg19",
                             data_dir=str(tmp_path))  # fmt: skip
    assert member.batch_key() is None
    out = member.train()
    assert out["diverged"] is False and out["correct"].shape[1] == 20
    assert np.allclose(out["train_accuracy"], out["correct"].mean(1))
    assert out["steps"][-1] == 2  # 20 images in batches of 10, one epoch
