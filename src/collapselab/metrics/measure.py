r"""``collapselab.measure``: every catalogue metric of one feature matrix in one call."""

from __future__ import annotations

import torch

from collapselab.checks import (
    MODES,
    PAIRS,
    WEIGHTINGS,
    check_choice,
    check_class_counts,
    check_classifier,
    check_features,
    check_float,
    check_int,
    check_labels,
    infer_n_classes,
    warn_imbalanced_counts,
)
from collapselab.metrics.mse import mse_decomposition, nc1_snr_if_defined
from collapselab.metrics.nc import nc_metrics
from collapselab.stats import DENSE_MAX_DIM, ClassStats, class_stats_from_features

_NOT_PER_SPLIT = (
    "nc1_dense",
    "nc2_equinorm_classifiers",
    "nc2_equiangle_classifiers",
    "nc2_maxangle_classifiers",
)


def measure(
    features: object,
    labels: object,
    W: object | None = None,
    b: object | None = None,
    lam: float | None = None,
    *,
    test_features: object | None = None,
    test_labels: object | None = None,
    n_classes: int | None = None,
    nc1_divide_by_c: bool = True,
    ddof: int = 1,
    pairs: str = "unordered",
    weighting: str = "auto",
    mode: str = "auto",
    dense_max_dim: int = DENSE_MAX_DIM,
    chunk_size: int | None = None,
) -> dict[str, float]:
    r"""Every metric-catalogue key (DESIGN.md) that the inputs allow, as Python floats.

    Always (formulas in :mod:`collapselab.metrics.nc`):

    * ``nc1`` ``= Tr(Sigma_W Sigma_B^+)/C`` (003 §2.2; without ``/C`` if
      ``nc1_divide_by_c=False``), ``nc1_trace_ratio`` ``= Tr Sigma_W / Tr Sigma_B`` (001
      Eq. 7), ``nc1_cdnv`` (Galanti et al.);
    * ``nc1_snr`` ``= sum_j omega_j^{-2}``, omega the nonzero singular values of
      ``Sigma_W^{-1/2} M̄`` (003 Eq. 8): only with dense statistics and a nonsingular
      ``Sigma_W`` (``N - C >= D``), otherwise the key is absent;
    * ``nc2_equinorm_means``, ``nc2_equiangle_means``, ``nc2_maxangle_means`` (003 §2.3),
      ``nc2_etf_distance`` (001 Eq. 8), ``nc2_orthogonal_frame`` (004 §4, uncentred means);
    * ``ncc_accuracy`` (001 Eq. 9);
    * ``nc1_dense``: 1.0 if the within-class scatter was kept dense, 0.0 if projected.

    With ``W`` (``(C, D)``; ``b`` ``(C,)``, default zero): ``nc2_equinorm_classifiers``,
    ``nc2_equiangle_classifiers``, ``nc2_maxangle_classifiers``, ``nc3_self_duality``,
    ``nc3_self_duality_classwise``, ``nc4_ncc_mismatch``, ``accuracy``.

    With ``lam`` (the paper's ``lam``, see :func:`~collapselab.metrics.mse.paper_lambda`):
    ``mse_ls_loss``, ``mse_nc1_term``, ``mse_nc23_term``; with ``W`` as well:
    ``mse_loss``, ``mse_ls_perp``, ``mse_ls_perp_ratio`` (``L_LS⊥/L_LS``) and
    ``mse_ls_distance`` (``||W~ - W~_LS||_F``) (003 §2.4). Needs dense statistics.

    With ``test_features``/``test_labels``: ``test_``-prefixed keys. NC1/NC2 of the test
    features use the test class means; ``test_ncc_accuracy`` and ``test_nc4_ncc_mismatch``
    use the *train* means (the NCC classifier of the training set); ``test_accuracy`` and
    ``test_nc3_*`` use ``W``.

    Args:
        features: ``(N, D)`` tensor or array, rows are samples.
        labels: ``(N,)`` integer labels in ``[0, C)``; every class needs two samples.
        W, b: optional last-layer classifier.
        lam: optional ``lam >= 0`` for the MSE decomposition.
        test_features, test_labels: optional held-out split (same ``D``, same classes).
        n_classes: ``C``; default ``max(labels) + 1``.
        nc1_divide_by_c: NC1 with (PNAS label) or without (MSE-NC notebook) the ``1/C``.
        ddof: delta degrees of freedom of the NC2 standard deviations (1 = unbiased).
        pairs: ``"unordered"`` or ``"ordered"`` class pairs for the cosine statistics.
        weighting: ``"auto"`` (default), ``"balanced"`` (class weights ``1/C``) or
            ``"sample"`` (``n_c/N``); the last two are identical for balanced data.
            ``"auto"`` resolves per split: ``"balanced"`` when all class counts are equal,
            else ``"sample"``. Imbalanced data triggers one warning per call, naming the
            counts of every imbalanced split; ``weighting="balanced"`` forces the papers'
            class-balanced definitions.
        mode: ``"auto"``, ``"dense"`` or ``"projected"`` within-class scatter
            (see :mod:`collapselab.stats.class_stats`); ``auto`` is dense for
            ``D <= dense_max_dim``.
        chunk_size: rows per chunk when accumulating (bounds the float64 copies);
            default: about 4 MiB of float64 per chunk, at least 64 rows while they stay
            within 64 MiB (:func:`collapselab.stats.class_stats.default_chunk_size`; small
            chunks keep the element-wise updates in cache).

    Raises:
        ValueError: malformed input (shapes, label range or dtype, NaN/Inf, a class with
            fewer than two samples, fewer than two classes, zero between-class scatter,
            ``W``/``b`` of the wrong shape), or ``lam`` with projected statistics.
    """
    h = check_features(features, "features")
    c = infer_n_classes(labels, n_classes)
    y = check_labels("labels", labels, h.shape[0], c)
    d = h.shape[1]
    if W is not None:
        check_classifier(W, b, c, d, h.device)
    elif b is not None:
        raise ValueError("b was given without W")
    ddof = check_int("ddof", ddof, minimum=0)
    pairs = check_choice("pairs", pairs, PAIRS)
    weighting = check_choice("weighting", weighting, WEIGHTINGS)
    mode = check_choice("mode", mode, MODES)
    resolved = mode if mode != "auto" else ("dense" if d <= dense_max_dim else "projected")
    if lam is not None:
        lam = check_float("lam", lam, minimum=0.0)
        if resolved != "dense":
            raise ValueError(
                f"the MSE family (lam={lam}) needs the dense D x D within-class covariance, "
                f"but mode={mode!r} with D={d} (dense_max_dim={dense_max_dim}) is projected; "
                "pass mode='dense' to allow it"
            )
    check_class_counts(torch.bincount(y, minlength=c), 2, "features/labels")
    if (test_features is None) != (test_labels is None):
        raise ValueError("test_features and test_labels must be given together")
    if test_features is not None:
        ht = check_features(test_features, "test_features", d)
        yt = check_labels("test_labels", test_labels, ht.shape[0], c, source="test_features")
        check_class_counts(torch.bincount(yt, minlength=c), 2, "test_features/test_labels")

    options = {
        "weighting": weighting,
        "mode": resolved,
        "chunk_size": chunk_size,
        "warn_imbalanced": False,  # one warning for all splits, below
    }
    train = class_stats_from_features(h, y, c, W=W, b=b, **options)
    splits = {"train": train}
    if test_features is not None:
        splits["test"] = class_stats_from_features(
            ht, yt, c, W=W, b=b, ncc_means=train.means, **options
        )
    warn_imbalanced_counts({k: s.counts for k, s in splits.items()}, weighting)

    nc_options = {"nc1_divide_by_c": nc1_divide_by_c, "ddof": ddof, "pairs": pairs}
    out = _split_metrics(train, nc_options)
    if lam is not None:
        out |= mse_decomposition(train, lam, W, b).as_dict()
    if "test" in splits:
        test = _split_metrics(splits["test"], nc_options)
        out |= {f"test_{k}": v for k, v in test.items() if k not in _NOT_PER_SPLIT}
    return out


def _split_metrics(stats: ClassStats, nc_options: dict[str, object]) -> dict[str, float]:
    out = nc_metrics(stats, **nc_options)
    snr = nc1_snr_if_defined(stats)
    if snr is not None:
        out["nc1_snr"] = snr
    out["nc1_dense"] = 1.0 if stats.mode == "dense" else 0.0
    return out
