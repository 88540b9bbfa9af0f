"""Datasets: generated, bundled with packages, or read from local files. Never downloaded."""

from collapselab.data import steps
from collapselab.data.bundled import digits, mnist1d
from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.data.errors import DatasetFileError
from collapselab.data.fourier import fourier_lowpass, lowpass_mask
from collapselab.data.frequency import (
    PAPER_KAPPA,
    PAPER_PHI,
    frequency_dataset,
    frequency_function,
    frequency_partial_sums,
)
from collapselab.data.pairs import (
    dataset_confused_pair,
    least_squares_confusion,
    most_confused_pair,
)
from collapselab.data.pca import (
    PCA,
    PCAmplification,
    PCAProjection,
    SeparableRelabel,
    ZCAWhitening,
    separable_relabel,
)
from collapselab.data.readers import (
    read_cifar10,
    read_cifar100,
    read_fashion_mnist,
    read_mnist,
    read_stl10,
    read_svhn,
    read_tiny_imagenet,
)
from collapselab.data.registry import available_datasets, load_dataset
from collapselab.data.spec import DataSpec, load_data
from collapselab.data.steps import STEPS, Step
from collapselab.data.synthetic import (
    SpectrumModel,
    gaussian_mixture,
    gaussian_mixture_means,
    spectrum_gaussian,
    spectrum_gaussian_model,
)
from collapselab.data.transforms import (
    FittedTransform,
    Standardize,
    balanced_subset,
    center_crop,
    pad_to_size,
    shuffle_labels,
)

__all__ = [
    "PAPER_KAPPA",
    "PAPER_PHI",
    "PCA",
    "STEPS",
    "DataSpec",
    "DataSplits",
    "DatasetFileError",
    "FittedTransform",
    "LabeledData",
    "PCAProjection",
    "PCAmplification",
    "SeparableRelabel",
    "SpectrumModel",
    "Standardize",
    "Step",
    "ZCAWhitening",
    "available_datasets",
    "balanced_subset",
    "center_crop",
    "dataset_confused_pair",
    "digits",
    "fourier_lowpass",
    "frequency_dataset",
    "frequency_function",
    "frequency_partial_sums",
    "gaussian_mixture",
    "gaussian_mixture_means",
    "least_squares_confusion",
    "load_data",
    "load_dataset",
    "lowpass_mask",
    "mnist1d",
    "most_confused_pair",
    "pad_to_size",
    "read_cifar10",
    "read_cifar100",
    "read_fashion_mnist",
    "read_mnist",
    "read_stl10",
    "read_svhn",
    "read_tiny_imagenet",
    "separable_relabel",
    "shuffle_labels",
    "spectrum_gaussian",
    "spectrum_gaussian_model",
    "steps",
]
