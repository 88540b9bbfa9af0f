"""Models the papers use: plain ``torch.nn.Module`` subclasses with addressable layers.

The layer convention
--------------------
Every model here (and any model you hand to collapselab's probes, see
:func:`check_convention`) exposes three things:

``feature_layers: list[str]``
    Ordered names, as they appear in ``model.named_modules()``, of the modules whose
    **outputs** are the per-layer features researchers measure. For ResNets: the stem /
    input-projection output first ("layer0"), then every residual block's output. For
    MLPs: every hidden layer's post-activation module (``layers.{i}.act``). Each model's
    docstring states its list and the feature shapes. Register a forward hook on
    ``model.get_submodule(name)`` to capture them.
``classifier: nn.Linear``
    The final linear layer: ``classifier.weight`` is W (C x D), ``classifier.bias`` is b or
    None. Named ``classifier`` in ``named_modules()`` except in :class:`DeepLinear`, where it
    is the last weight matrix ``layers.{L-1}``.
``penultimate: str``
    The name of the module whose output is the classifier's input (the D-dimensional
    features of neural-collapse metrics), e.g. ``"flatten"`` after global pooling. It may
    or may not be the last entry of ``feature_layers``.

Every model returns logits of shape ``(N, n_outputs)``. Modules are never applied in
place, and every module is called at most once per forward pass, so forward hooks see each
feature exactly once. Inputs are checked: a wrong shape raises ``ValueError`` naming ``x``.

Models
------
* :class:`MLP`: deep plain MLP of 000 (bias off, optional BatchNorm / affine-free norm,
  Xavier-normal init with variance scaled by gamma).
* :class:`DeepLinear`: bias-free deep linear network of 002 with Def. 3 / Glorot / He init
  and :meth:`DeepLinear.product`; :class:`DeepReLU`, the same with a ReLU after every
  hidden layer.
* :class:`TwoLayerReLU`: ``a^T ReLU(W x)`` with fixed ``a`` and paired init (002 §2.5).
* :class:`FCResNet`, :class:`ConvResNet` and the Table I presets of 001
  (:func:`pfc_mnist`, :func:`pfc_fashion_mnist`, :func:`pfc_cifar10`, :func:`pfc_stl10`,
  :func:`pfc_cifar100`).
* :func:`resnet18`, :func:`resnet34`, :func:`resnet50`, :func:`vgg11`, :func:`vgg13`:
  small-image classics of 003; :func:`vgg19`, 002's VGG-19.
* :class:`DenseNet`, :func:`densenet40`, :func:`densenet100`, :func:`densenet201`,
  :func:`densenet250`, :func:`densenet_bc`: DenseNets of 003.
* :class:`StVGG`: st-VGG of 002 and its linear twin.
* :func:`build_model` / :func:`available_models`: construction by name.
* :func:`compact_representation` / :func:`linearised_copy`: the compact matrix
  ``W e_j = f(e_j) - f(0)`` of any model, exact or through the paper 002 linearisation
  (activations -> identity, max-pool -> average pool).
"""

from collapselab.models.convention import FeatureModel, check_convention
from collapselab.models.deep_linear import (
    DeepLinear,
    DeepReLU,
    def3_variances,
    layer_variances,
)
from collapselab.models.densenet import (
    DenseNet,
    densenet40,
    densenet100,
    densenet201,
    densenet250,
    densenet_bc,
)
from collapselab.models.linearise import compact_representation, linearised_copy
from collapselab.models.mlp import MLP, xavier_normal_variance
from collapselab.models.registry import available_models, build_model
from collapselab.models.resnet_classic import (
    BasicBlock,
    Bottleneck,
    ResNet,
    resnet18,
    resnet34,
    resnet50,
)
from collapselab.models.resnet_conv import (
    PFC_TABLE_I,
    ConvResNet,
    pfc_cifar10,
    pfc_cifar100,
    pfc_fashion_mnist,
    pfc_stl10,
)
from collapselab.models.resnet_fc import FCResNet, pfc_mnist
from collapselab.models.st_vgg import StVGG
from collapselab.models.two_layer import TwoLayerReLU
from collapselab.models.vgg import VGG, vgg11, vgg13, vgg19

__all__ = [
    "MLP",
    "PFC_TABLE_I",
    "VGG",
    "BasicBlock",
    "Bottleneck",
    "ConvResNet",
    "DeepLinear",
    "DeepReLU",
    "DenseNet",
    "FCResNet",
    "FeatureModel",
    "ResNet",
    "StVGG",
    "TwoLayerReLU",
    "available_models",
    "build_model",
    "check_convention",
    "compact_representation",
    "def3_variances",
    "densenet40",
    "densenet100",
    "densenet201",
    "densenet250",
    "densenet_bc",
    "layer_variances",
    "linearised_copy",
    "pfc_cifar10",
    "pfc_cifar100",
    "pfc_fashion_mnist",
    "pfc_mnist",
    "pfc_stl10",
    "resnet18",
    "resnet34",
    "resnet50",
    "vgg11",
    "vgg13",
    "vgg19",
    "xavier_normal_variance",
]
