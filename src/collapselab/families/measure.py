r"""``collapselab.measure``: the catalogue metrics of one feature matrix in one call."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from collapselab._threads import small_work_threads, thread_streams
from collapselab.checks import (
    check_class_counts,
    check_classifier,
    check_features,
    check_finite,
    check_labels,
    infer_n_classes,
    warn_imbalanced_counts,
)
from collapselab.families.builtin import MSE, NC
from collapselab.families.catalogue import FamilySpec
from collapselab.families.collection import Collection, Request, StatsOptions
from collapselab.families.family import Layout
from collapselab.stats import DENSE_MAX_DIM

_LAYER = ""


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
    keys: Sequence[str] | None = None,
    families: Iterable[FamilySpec] | None = None,
    nc1_divide_by_c: bool = True,
    ddof: int = 1,
    pairs: str = "unordered",
    weighting: str = "auto",
    mode: str = "auto",
    dense_max_dim: int = DENSE_MAX_DIM,
    chunk_size: int | None = None,
) -> dict[str, float]:
    r"""Catalogue metrics (docs/catalogue.md) of one feature matrix, as floats.

    By default every key of the NC family (and of the MSE family when ``lam`` is given)
    that the inputs allow. ``keys=`` (or ``families=``) restricts the request, and only the
    statistics those keys need are collected: ``keys=["nc1", "nc1_trace_ratio",
    "nc2_etf_distance"]`` never forms the dense ``D x D`` scatter (the projected ``C x C``
    block is exact for them), which only ``nc1_snr`` and the MSE family need.

    The NC family (formulas in :mod:`collapselab.metrics.nc`):

    * ``nc1`` ``= Tr(Sigma_W Sigma_B^+)/C`` (003 §2.2; without ``/C`` if
      ``nc1_divide_by_c=False``), ``nc1_trace_ratio`` ``= Tr Sigma_W / Tr Sigma_B`` (001
      Eq. 7), ``nc1_cdnv`` (Galanti et al.);
    * ``nc1_snr`` ``= sum_j omega_j^{-2}``, omega the nonzero singular values of
      ``Sigma_W^{-1/2} M̄`` (003 Eq. 8): only with dense statistics and a nonsingular
      ``Sigma_W`` (``N - C >= D``), otherwise the key is absent;
    * ``nc2_equinorm_means``, ``nc2_equiangle_means``, ``nc2_maxangle_means`` (003 §2.3),
      ``nc2_etf_distance`` (001 Eq. 8), ``nc2_orthogonal_frame`` (004 §4, uncentred means);
    * ``ncc_accuracy`` (001 Eq. 9);
    * ``nc1_dense``: 1.0 if the within-class scatter was kept dense, 0.0 if projected;
    * with ``W`` (``(C, D)``; ``b`` ``(C,)``, default zero): ``nc2_equinorm_classifiers``,
      ``nc2_equiangle_classifiers``, ``nc2_maxangle_classifiers``, ``nc3_self_duality``,
      ``nc3_self_duality_classwise``, ``nc4_ncc_mismatch``, ``accuracy``.

    The MSE family, with ``lam`` (the paper's ``lam``, see
    :func:`~collapselab.metrics.mse.paper_lambda`): ``mse_ls_loss``, ``mse_nc1_term``,
    ``mse_nc23_term``; with ``W`` as well: ``mse_loss``, ``mse_ls_perp``,
    ``mse_ls_perp_ratio`` (``L_LS⊥/L_LS``) and ``mse_ls_distance`` (``||W~ - W~_LS||_F``)
    (003 §2.4). Needs dense statistics.

    With ``test_features``/``test_labels``: ``test_``-prefixed keys. NC1/NC2 of the test
    features use the test class means; ``test_ncc_accuracy`` and ``test_nc4_ncc_mismatch``
    use the *train* means (the NCC classifier of the training set); ``test_accuracy`` and
    ``test_nc3_*`` use ``W``. Keys that describe the classifier or the statistics
    (``nc1_dense``, ``nc2_*_classifiers``) and the MSE family are train-only.

    Args:
        features: ``(N, D)`` tensor or array, rows are samples.
        labels: ``(N,)`` integer labels in ``[0, C)``; every class needs two samples.
        W, b: optional last-layer classifier.
        lam: optional ``lam >= 0`` for the MSE decomposition.
        test_features, test_labels: optional held-out split (same ``D``, same classes).
        n_classes: ``C``; default ``max(labels) + 1``.
        keys: catalogue keys to compute (any family's whose keys need only features:
            :func:`collapselab.families.catalogue.catalogue` lists them); default: the NC
            family's, and the MSE family's with ``lam``.
        families: family objects or names to compute (e.g. ``[NC(ddof=0), "pfc"]``;
            per-layer keys only: the layer-path keys need a model's layers, see
            :class:`collapselab.track.Monitor`).
        nc1_divide_by_c, ddof, pairs: options of the NC family when it is built here:
            NC1 with (PNAS label) or without (MSE-NC notebook) the ``1/C``; delta degrees
            of freedom of the NC2 standard deviations (1 = unbiased); ``"unordered"`` or
            ``"ordered"`` class pairs for the cosine statistics.
        weighting: ``"auto"`` (default), ``"balanced"`` (class weights ``1/C``) or
            ``"sample"`` (``n_c/N``); the last two are identical for balanced data.
            ``"auto"`` resolves per split: ``"balanced"`` when all class counts are equal,
            else ``"sample"``. Imbalanced data triggers one warning per call, naming the
            counts of every imbalanced split; ``weighting="balanced"`` forces the papers'
            class-balanced definitions.
        mode: ``"auto"``, ``"dense"`` or ``"projected"`` within-class scatter
            (see :mod:`collapselab.stats.class_stats`); ``auto`` is dense where a requested
            key needs it and ``D <= dense_max_dim``, else projected.
        chunk_size: rows per chunk when accumulating (bounds the float64 copies);
            default: about 4 MiB of float64 per chunk, at least 64 rows while they stay
            within 64 MiB (:func:`collapselab.stats.class_stats.default_chunk_size`; small
            chunks keep the element-wise updates in cache).

    Raises:
        ValueError: malformed input (shapes, label range or dtype, NaN/Inf, a class with
            fewer than two samples, fewer than two classes, zero between-class scatter,
            ``W``/``b`` of the wrong shape), an unknown key or family, a key that needs
            more than a feature matrix, or ``lam`` with projected statistics.
    """
    # Small problems on one thread: many small torch calls stall in the thread pool's
    # waits on a busy machine (checks and statistics alike). Larger ones run their data
    # passes as row streams, one per thread (thread_streams), and the values with torch's
    # threads. No autograd: features taken from a layer without torch.no_grad (and a
    # classifier's weight) require grad, which the statistics' in-place kernels refuse;
    # the metrics are values, not graphs.
    entries = _entries(features) + _entries(test_features)
    with small_work_threads(entries), torch.no_grad():
        with thread_streams():
            classifier, collections = _collect(
                features,
                labels,
                W,
                b,
                test_features,
                test_labels,
                n_classes,
                _request(keys, families, lam, nc1_divide_by_c, ddof, pairs),
                StatsOptions(weighting, mode, dense_max_dim, chunk_size),
            )
        stats = {s: coll.stats[_LAYER] for s, coll in collections.items() if _LAYER in coll.stats}
        warn_imbalanced_counts({s: st.counts for s, st in stats.items()}, weighting)
        out: dict[str, float] = {}
        for split, coll in collections.items():
            prefix = "" if split == "train" else "test_"
            values = coll.results(classifier)[_LAYER]
            out |= {prefix + k: v for k, v in values.items()}
        return out


def _collect(
    features: object,
    labels: object,
    W: object | None,
    b: object | None,
    test_features: object | None,
    test_labels: object | None,
    n_classes: int | None,
    request: Request,
    options: StatsOptions,
) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, dict[str, Collection]]:
    """The checked classifier and the filled collection of each split (both passes)."""
    # NaN/Inf: checked after pass 1 (_check_finite), whose class sums read every entry.
    h = check_features(features, "features", finite=False)
    c = infer_n_classes(labels, n_classes)
    y = check_labels("labels", labels, h.shape[0], c)
    d = h.shape[1]
    classifier = None
    if W is not None:
        classifier = check_classifier(W, b, c, d, h.device)
    elif b is not None:
        raise ValueError("b was given without W")
    check_class_counts(torch.bincount(y, minlength=c), 2, "features/labels")
    if (test_features is None) != (test_labels is None):
        raise ValueError("test_features and test_labels must be given together")
    splits = {"train": (h, y, "features")}
    if test_features is not None:
        ht = check_features(test_features, "test_features", d, finite=False)
        yt = check_labels("test_labels", test_labels, ht.shape[0], c, source="test_features")
        check_class_counts(torch.bincount(yt, minlength=c), 2, "test_features/test_labels")
        splits["test"] = (ht, yt, "test_features")
    layout = Layout((_LAYER,), {_LAYER: d}, _LAYER, n_classes=c)
    request.setup(layout, options)
    collections: dict[str, Collection] = {}
    for split, (x, labels_, name) in splits.items():
        coll = Collection(request, split, layout, options, collections.get("train"))
        if "features" in request.needs.signals:  # families read the rows themselves
            check_finite(name, x)
        coll.add(_LAYER, "features", x, labels_)
        _check_finite(coll, x, name)
        coll.finalize(classifier)
        if _LAYER in coll.second_pass:
            coll.add_second(_LAYER, x, labels_)
        collections[split] = coll
    return classifier, collections


def _request(
    keys: Sequence[str] | None,
    families: Iterable[FamilySpec] | None,
    lam: float | None,
    divide_by_c: bool,
    ddof: int,
    pairs: str,
) -> Request:
    """The request of a :func:`measure` call.

    The NC family (and, with ``lam``, the MSE family) is built with the call's options:
    with all its keys by default or when named in ``families``, otherwise with none of its
    own, computing only the keys that ``keys`` or other families ask of it.
    """
    builders = {"nc": lambda ks: NC(ks, divide_by_c=divide_by_c, ddof=ddof, pairs=pairs)}
    if lam is not None:
        builders["mse"] = lambda ks: MSE(lam, ks)
    chosen = [
        builders[f](None) if isinstance(f, str) and f in builders else f for f in families or ()
    ]
    named = {f if isinstance(f, str) else f.name for f in chosen}
    everything = keys is None and families is None
    chosen += [make(None if everything else ()) for n, make in builders.items() if n not in named]
    request = Request(chosen, keys)
    for fam in request.families:
        for key in request.plan[fam]:
            needs = fam.key(key).needs
            if needs.model or needs.signals - {"features"}:
                raise ValueError(
                    f"key {key!r} needs more than a feature matrix ({sorted(needs.signals)} of "
                    "a model's layers); measure it with collapselab.track.Monitor"
                )
    return request


def _check_finite(coll: Collection, x: torch.Tensor, name: str) -> None:
    """``ValueError`` naming the NaN/Inf entries of ``x`` (:func:`check_finite`), checked
    after pass 1: a NaN or Inf entry makes its class sum non-finite, so the entries are
    read again only when a class sum is not finite, or when no class statistics were
    collected. This saves a whole read of the features (5-10 % of the NC request at
    ``D = 512``, benchmarks/README.md) with the same error as checking them first."""
    stats = coll.stats.get(_LAYER)
    if stats is None or not bool(torch.isfinite(stats.state()["sums"]).all()):
        check_finite(name, x)


def _entries(x: object) -> int:
    """Number of entries of an array-like (0 when it has no shape)."""
    shape = getattr(x, "shape", None)
    return math.prod(shape) if shape is not None else 0
