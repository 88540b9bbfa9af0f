"""Issue 35 item 5: the paper presets that are the paper's experiment, dry-run on tiny
dataset files written here (CIFAR in both layouts, Fashion-MNIST's IDX files), and the
estimated GPU hours ``--dry-run`` prints, against an independent count."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from collapselab.cli.main import app
from collapselab.experiments import get_experiment
from collapselab.experiments.dry_run import dry_run_experiment
from collapselab.experiments.gpu_hours import THROUGHPUT, forward_flops
from collapselab.models import StVGG, vgg19
from tests._cifar_files import write_cifar10, write_cifar100
from tests._idx_files import write_idx_dataset

runner = CliRunner()


def _stvgg_macs(k: int) -> int:
    """st-VGG's multiply-adds on one 3 x 32 x 32 image, layer by layer (App. D.2's layers,
    'same' padding: stage s at (32 / 2^s)^2 pixels)."""
    convs = [(3, 32, 3), (32, 32, 3), (32, 64, 3), (64, 64, 3), (64, 128, 3), (128, 128, 3),
             (128, 256, 2), (256, 256, 2)]  # fmt: skip
    macs = sum((32 >> (i // 2)) ** 2 * c_out * c_in * kk * kk
               for i, (c_in, c_out, kk) in enumerate(convs))  # fmt: skip
    return macs + 1024 * 512 + 512 * k


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper-files")
    write_cifar10(root, "binary", n=20)
    write_cifar100(root, "python", n_train=60, n_test=20)
    write_idx_dataset(root, n_train=2000, n_test=500)
    return root


def test_forward_flops_count_every_multiply_add():
    import torch

    assert forward_flops(StVGG(5), torch.zeros(2, 3, 32, 32)) == 2 * _stvgg_macs(5) == 90_903_552
    convs = [64, 64, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512, 512, 512, 512, 512]
    sides = [32, 32, 16, 16, 8, 8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 2]
    macs = sum(
        s * s * c * c_in * 9 for s, c, c_in in zip(sides, convs, [3, *convs[:-1]], strict=True)
    )
    assert forward_flops(vgg19(3, 10), torch.zeros(1, 3, 32, 32)) == 2 * (macs + 512 * 10)


def test_002_paper_preset_dry_run_on_fixture_files(files):
    result = runner.invoke(app, ["reproduce", "002", "--preset", "paper", "--data-dir",
                                 str(files), "--dry-run"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "dry run of 10 experiment(s): ok" in text
    assert "net: st_vgg" in text and "nonlinear net: vgg19" in text
    assert text.count("estimated GPU hours:") == 10


@pytest.mark.parametrize(
    ("exp_id", "networks"),
    [("pcbias-projections", 200), ("pcbias-amplification", 600), ("pcbias-separable", 600)],
)
def test_stvgg_presets_train_the_paper_networks(files, exp_id, networks):
    result = dry_run_experiment(get_experiment(exp_id), "paper", files)
    assert result.ok, result.error
    built = result.built
    assert (
        built["net"] == "st_vgg" and built["dataset"] == "cifar100" and built["input_dim"] == 3072
    )
    assert built["parameters"] == {"nonlinear": 1_208_101, "linear": 1_208_101}
    assert built["networks"] == networks and built["epochs"] == 100
    preset = get_experiment(exp_id).presets["paper"]
    assert (preset.lr, preset.batch_size, preset.members) == (0.05, 100, 100)
    # the fixture's small mammals: 30 training and 10 test images (every other image)
    n, m = 30, 10
    pcs = len(built["pcs"])
    flops = 2 * _stvgg_macs(5)
    expected = networks * flops * (3 * n * 100 + (n + m * (1 + pcs)) * 101) / THROUGHPUT / 3600
    assert result.gpu_hours == pytest.approx(expected, rel=1e-12)


def test_loc_paper_preset_trains_vgg19_on_cifar10(files):
    result = dry_run_experiment(get_experiment("pcbias-loc"), "paper", files)
    assert result.ok, result.error
    built = result.built
    assert built["nonlinear_net"] == "vgg19" and built["nonlinear_dataset"] == "cifar10"
    assert built["nonlinear_n_train"] == 100 and built["n_train"] == 20  # all ten / cats, dogs
    assert built["parameters"][-1] == 20_040_522
    vgg = next(w for w in built["gpu_work"] if w["what"].startswith("vgg19"))
    assert vgg["networks"] == 40 + 10  # 2 x 10 per condition, and the rate grid's 5 x 2


def test_004_paper_preset_runs_papyan_vgg11(files):
    result = runner.invoke(app, ["reproduce", "004", "--preset", "paper", "--data-dir",
                                 str(files), "--dry-run"])  # fmt: skip
    assert result.exit_code == 0, result.output
    for loss in ("ce", "mse"):
        built = dry_run_experiment(get_experiment(f"curvature-conv-{loss}"), "paper", files).built
        assert built["net"] == "vgg11" and built["input_shape"] == [1, 32, 32]
        assert built["hessian_sizes"] == {"features.25": 512 * 512 * 9, "classifier": 5120}
        preset = get_experiment(f"curvature-conv-{loss}").presets["paper"]
        assert (preset.epochs, preset.batch_size, preset.momentum, preset.weight_decay) == (
            350,
            128,
            0.9,
            5e-4,
        )
        assert preset.milestones == (116, 233)


def test_a_missing_file_is_one_line_naming_it_and_the_layout(tmp_path):
    write_cifar100(tmp_path, "binary")
    (tmp_path / "cifar-100-binary" / "train.bin").unlink()
    result = dry_run_experiment(get_experiment("pcbias-separable"), "paper", tmp_path)
    assert not result.ok and "\n" not in result.error
    assert str(tmp_path / "cifar-100-binary" / "train.bin") in result.error
    assert "Expected:" in result.error and "cifar-100-binary" in result.error
