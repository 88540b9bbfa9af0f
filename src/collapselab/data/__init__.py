"""Datasets: generated, bundled with packages, or read from local files. Never downloaded."""

from collapselab.data.dataset import DataSplits, LabeledData

__all__ = ["DataSplits", "LabeledData"]
