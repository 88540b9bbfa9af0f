"""build_model / available_models, and the layer convention checked on every model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from collapselab.models import FeatureModel, available_models, build_model, check_convention

# Small instances of every registered model, with the input each expects.
CASES: dict[str, tuple[dict, tuple[int, ...], int]] = {
    "mlp": ({"in_dim": 12, "n_classes": 3, "width": 8, "depth": 4}, (12,), 3),
    "deep_linear": ({"widths": [12, 8, 6, 3]}, (12,), 3),
    "two_layer_relu": ({"in_dim": 12, "width": 8}, (12,), 1),
    "fc_resnet": ({"in_dim": 12, "width": 8, "n_blocks": 3, "n_classes": 3}, (12,), 3),
    "conv_resnet": (
        {"in_channels": 2, "n_classes": 3, "stages": [(4, 1, 1), (6, 2, 2)]},
        (2, 10, 10),
        3,
    ),
    "pfc_mnist": ({"width_multiplier": 0.01}, (1, 28, 28), 10),
    "pfc_fashion_mnist": ({"width_multiplier": 0.125}, (1, 28, 28), 10),
    "pfc_cifar10": ({"width_multiplier": 0.0625}, (3, 32, 32), 10),
    "pfc_stl10": ({"width_multiplier": 0.0625}, (3, 96, 96), 10),
    "pfc_cifar100": ({"width_multiplier": 0.0625}, (3, 32, 32), 100),
    "resnet18": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "resnet34": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "resnet50": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "vgg11": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "vgg13": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "vgg19": ({"n_classes": 3, "width_multiplier": 0.0625}, (3, 32, 32), 3),
    "densenet": ({"block_config": [1, 1], "growth_rate": 2, "n_classes": 3}, (3, 8, 8), 3),
    "densenet40": ({"n_classes": 3, "growth_rate": 2}, (3, 32, 32), 3),
    "densenet100": ({"n_classes": 3, "growth_rate": 2}, (3, 32, 32), 3),
    "densenet201": ({"n_classes": 3, "growth_rate": 2}, (3, 96, 96), 3),
    "densenet250": ({"n_classes": 3, "growth_rate": 2}, (3, 32, 32), 3),
    "st_vgg": ({"n_classes": 3, "width_multiplier": 0.125}, (3, 32, 32), 3),
    "st_vgg_linear": ({"n_classes": 3, "width_multiplier": 0.125}, (3, 32, 32), 3),
}


def test_available_models_lists_every_model() -> None:
    assert available_models() == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_model_follows_the_convention(name: str) -> None:
    torch.manual_seed(0)
    kwargs, in_shape, n_out = CASES[name]
    model = build_model(name, **kwargs).double().eval()
    check_convention(model)
    assert isinstance(model, FeatureModel)
    names = [*model.feature_layers, model.penultimate]
    calls: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    for n in dict.fromkeys(names):
        model.get_submodule(n).register_forward_hook(
            lambda _m, _i, o, n=n: calls[n].append(o.detach())
        )
    x = torch.randn(2, *in_shape, dtype=torch.float64)
    with torch.no_grad():
        logits = model(x)
    assert logits.shape == (2, n_out)
    for n in dict.fromkeys(names):
        assert len(calls[n]) == 1, f"{name}: {n} fired {len(calls[n])} times"
        assert calls[n][0].shape[0] == 2
    # The penultimate output is exactly the classifier's input.
    pen = calls[model.penultimate][0]
    assert pen.ndim == 2 and pen.shape[1] == model.classifier.in_features
    w, b = model.classifier.weight, model.classifier.bias
    expected = pen @ w.T + (0 if b is None else b)
    torch.testing.assert_close(logits, expected, rtol=1e-12, atol=1e-12)


def test_names_are_normalised() -> None:
    assert isinstance(build_model("ResNet18", width_multiplier=0.0625), nn.Module)
    model = build_model("st-vgg-linear", n_classes=2, width_multiplier=0.125)
    assert model.linear


def test_unknown_name_lists_available() -> None:
    with pytest.raises(ValueError, match=r"unknown model .resnet101.*resnet18"):
        build_model("resnet101")
    with pytest.raises(TypeError, match="name must be a str"):
        build_model(18)  # type: ignore[arg-type]


def test_bad_keyword_names_the_argument() -> None:
    with pytest.raises(TypeError, match="depthh"):
        build_model("mlp", in_dim=3, n_classes=2, width=4, depthh=2)
    with pytest.raises(TypeError, match="missing"):
        build_model("mlp", in_dim=3)
    with pytest.raises(TypeError, match="linear"):
        build_model("st_vgg_linear", n_classes=2, linear=False)


class _Custom(nn.Module):
    """A user model; ``classifier`` is looked up by name so tests can point it anywhere."""

    def __init__(self, feature_layers: list[str], penultimate: str, classifier: str) -> None:
        super().__init__()
        self.body = nn.Linear(2, 2)
        self.act = nn.ReLU()
        self.head = nn.Linear(2, 2)
        self.feature_layers = feature_layers
        self.penultimate = penultimate
        self._classifier_name = classifier

    @property
    def classifier(self) -> nn.Module:
        if self._classifier_name == "outside":
            return _OUTSIDE
        return self.get_submodule(self._classifier_name)


_OUTSIDE = nn.Linear(2, 2)


def test_check_convention_accepts_and_rejects_user_models() -> None:
    check_convention(_Custom(["body", "act"], "act", "head"))
    with pytest.raises(TypeError, match="feature_layers"):
        check_convention(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        check_convention("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'nope'"):
        check_convention(_Custom(["nope"], "act", "head"))
    with pytest.raises(ValueError, match="''"):
        check_convention(_Custom(["body"], "", "head"))
    with pytest.raises(ValueError, match="duplicate"):
        check_convention(_Custom(["body", "body"], "act", "head"))
    with pytest.raises(TypeError, match=r"nn\.Linear"):
        check_convention(_Custom(["body"], "act", "act"))
    with pytest.raises(ValueError, match="not a submodule"):
        check_convention(_Custom(["body"], "act", "outside"))
