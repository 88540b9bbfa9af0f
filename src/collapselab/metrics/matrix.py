r"""The NC and MSE catalogue keys of one feature matrix, from their formulas.

:func:`matrix_metrics` computes what :func:`collapselab.measure` gives for the NC family
(and the MSE family with ``lam``) on one in-memory ``(N, D)`` feature matrix with
``mode="dense"``, equal to it bit for bit (``tests/test_metrics_matrix.py``): the same
statistics (:class:`~collapselab.stats.ClassStats`, dense, accumulated in the same row
blocks, rescaled by the same power of two when every requested key is scale invariant) and
the same formulas (:func:`~collapselab.metrics.nc.nc_values`,
:func:`~collapselab.metrics.mse.mse_decomposition`).

It exists for the layer below the measurement engine: the theory modules measure the
points their solvers visit (:mod:`collapselab.theory.central_path`,
:mod:`collapselab.theory.ufm_mse`, :mod:`collapselab.theory.dlufm_layerwise`) and may not
import :mod:`collapselab.families`. Everything else measures through
:func:`collapselab.measure` or :class:`collapselab.track.Monitor`, which plan through the
catalogue (other families, test splits, projected statistics for large ``D``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch

from collapselab._threads import small_work_threads
from collapselab.checks import (
    check_class_counts,
    check_classifier,
    check_features,
    check_float,
    check_labels,
    infer_n_classes,
    warn_imbalanced_counts,
)
from collapselab.metrics.mse import mse_decomposition
from collapselab.metrics.nc import NC_DECISION_KEYS, NC_KEYS, nc_values
from collapselab.stats import ClassStats
from collapselab.stats.class_stats import (
    default_chunk_size,
    largest_magnitude,
    power_of_two_scale,
)
from collapselab.stats.scratch import as_float64

__all__ = ["MSE_KEYS", "matrix_metrics"]

MSE_KEYS = (
    "mse_ls_loss",
    "mse_nc1_term",
    "mse_nc23_term",
    "mse_loss",
    "mse_ls_perp",
    "mse_ls_perp_ratio",
    "mse_ls_distance",
)
"""The MSE family's catalogue keys (docs/catalogue.md, "mse"); they need ``lam``."""


def matrix_metrics(
    features: object,
    labels: object,
    W: object | None = None,
    b: object | None = None,
    lam: float | None = None,
    *,
    n_classes: int | None = None,
    keys: Sequence[str] | None = None,
) -> dict[str, float]:
    r"""Catalogue keys of the NC and MSE families of one feature matrix, as floats.

    Equal to ``collapselab.measure(features, labels, W, b, lam, n_classes=n_classes,
    keys=keys, mode="dense")`` bit for bit, computed without the measurement engine (see
    the module docstring): by default every key of :data:`~collapselab.metrics.nc.NC_KEYS`
    that the inputs allow (the classifier keys with ``W``; ``nc1_snr`` only where
    ``Sigma_W`` is nonsingular), then, with ``lam``, those of :data:`MSE_KEYS` (003 §2.4;
    without ``W`` only the ``L_LS`` terms); ``keys=`` restricts them. The within-class
    scatter is kept dense (``D x D``): for the small matrices of the theory layer.

    Args:
        features: ``(N, D)`` tensor or array, rows are samples.
        labels: ``(N,)`` integer labels in ``[0, C)``; every class needs two samples.
        W, b: optional last-layer classifier ``(C, D)``, ``(C,)`` (default zero bias).
        lam: the paper's ``lam >= 0`` for the MSE keys.
        n_classes: ``C``; default ``max(labels) + 1``.
        keys: NC keys, and MSE keys when ``lam`` is given.

    Raises:
        ValueError: malformed input (as :func:`collapselab.measure`), an unknown key, zero
            between-class scatter, or features whose squares leave float64's range while an
            MSE key (which depends on their scale) is requested.
    """
    with small_work_threads(_entries(features)):
        h = check_features(features, "features")
        c = infer_n_classes(labels, n_classes)
        y = check_labels("labels", labels, h.shape[0], c)
        classifier = None
        if W is not None:
            classifier = check_classifier(W, b, c, h.shape[1], h.device)
        elif b is not None:
            raise ValueError("b was given without W")
        if lam is not None:
            lam = check_float("lam", lam, minimum=0.0)
        nc_keys, mse_keys = _split_keys(keys, lam)
        check_class_counts(torch.bincount(y, minlength=c), 2, "features/labels")
        stats = _dense_stats(h, y, c, nc_keys, mse_keys, classifier)
        warn_imbalanced_counts({"train": stats.counts}, "auto")
        w = classifier[0] if classifier is not None else None
        out = nc_values(stats, nc_keys, W=w) if nc_keys else {}
        if mse_keys:
            bias = classifier[1] if classifier is not None else None
            values = mse_decomposition(stats, lam, w, bias).as_dict()
            out |= {k: v for k, v in values.items() if k in mse_keys}
        return out


def _split_keys(keys: Sequence[str] | None, lam: float | None) -> tuple[list[str], list[str]]:
    """The requested NC and MSE keys, each in catalogue order."""
    allowed = NC_KEYS + (MSE_KEYS if lam is not None else ())
    wanted = allowed if keys is None else tuple(keys)
    unknown = [k for k in wanted if k not in allowed]
    if unknown:
        hint = " (the MSE keys need lam)" if set(unknown) <= set(MSE_KEYS) else ""
        raise ValueError(f"unknown keys {unknown}{hint}; known: {list(allowed)}")
    return [k for k in NC_KEYS if k in wanted], [k for k in MSE_KEYS if k in wanted]


def _dense_stats(
    h: torch.Tensor,
    y: torch.Tensor,
    c: int,
    nc_keys: Sequence[str],
    mse_keys: Sequence[str],
    classifier: tuple[torch.Tensor, torch.Tensor] | None,
) -> ClassStats:
    """Both passes over ``h`` in the engine's row blocks (``Collection.add``/``add_second``):
    float64 blocks, rescaled by the power of two of the first block's largest entry when
    every requested key is scale invariant (the NC keys; not the MSE keys)."""
    decisions = NC_DECISION_KEYS & set(nc_keys)
    stats = ClassStats(
        c,
        mode="dense",
        warn_imbalanced=False,
        ncc=bool(decisions),
        norms=False,
        check_finite=False,
    )
    rows = default_chunk_size(h.shape[1])
    peak = largest_magnitude(as_float64("block", h[:rows]))
    scale = power_of_two_scale(peak)
    if scale != 1.0 and mse_keys:
        raise ValueError(
            f"features have entries of magnitude {peak:.3g}: their squares "
            f"over- or underflow float64, and the requested MSE keys ({', '.join(mse_keys)}) "
            "depend on the features' scale; rescale the features, or request the NC keys "
            "alone (rescaled automatically)"
        )

    def blocks(first_pass: bool) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        # pass 1 reads float64 blocks; pass 2 the features' own dtype unless rescaled
        for start in range(0, h.shape[0], rows):
            block = h[start : start + rows]
            if first_pass or scale != 1.0:
                block = as_float64("block", block)
            yield (block * scale if scale != 1.0 else block), y[start : start + rows]

    for block, labels in blocks(True):
        stats.update_means(block, labels)
    kwargs: dict[str, torch.Tensor] = {}
    if classifier is not None and decisions - {"ncc_accuracy"}:
        w, bias = classifier
        kwargs = {"W": w, "b": bias if scale == 1.0 else bias * scale}
    stats.finalize_means(**kwargs)
    for block, labels in blocks(False):
        stats.update_scatter(block, labels)
    return stats


def _entries(x: object) -> int:
    """Number of entries of an array-like (0 when it has no shape)."""
    shape = getattr(x, "shape", None)
    return math.prod(shape) if shape is not None else 0
