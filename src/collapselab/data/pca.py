"""Principal-component manipulations of inputs (paper 002 §4): projection onto the top
P PCs, ZCA whitening, PC amplification and P-separable relabelling.

All are fitted on training inputs flattened to ``(N, D)`` and computed in float64. The
principal directions come from the covariance ``(1/N) X_c^T X_c`` (``X_c`` centred with the
training mean, or uncentred with ``center=False``, which is the paper's ``Sigma_XX / N``).
No ``D x D`` matrix is formed when ``D > N``: then the thin SVD of ``X_c`` is used instead.
"""

from __future__ import annotations

import numpy as np
import torch

from collapselab.checks import check_choice, check_float, check_int
from collapselab.data.dataset import DataSplits, LabeledData
from collapselab.data.transforms import FittedTransform, Standardize, _blocks, _note, _samples


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], -1)


class PCA:
    """Principal directions of training inputs.

    After :meth:`fit`:

    * ``mean``: ``(D,)`` training mean (zeros when ``center=False``);
    * ``components``: ``(D, r)`` orthonormal principal directions, eigenvalue order
      (largest first), ``r`` the numerical rank; each column's largest-magnitude entry is
      positive, so the signs are reproducible;
    * ``eigenvalues``: ``(r,)`` variances along them (covariance normalised by ``N``).

    Directions whose eigenvalue is zero to working precision (relative threshold
    ``max(N, D) * eps_float64`` on the covariance spectrum, squared for the SVD route) are
    dropped, so ``r <= min(N, D)``.

    Args:
        center: subtract the training mean before computing the PCs.
    """

    def __init__(self, center: bool = True) -> None:
        self.center = bool(center)
        self.mean: torch.Tensor | None = None
        self.components: torch.Tensor | None = None
        self.eigenvalues: torch.Tensor | None = None
        self.input_shape: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return f"PCA(center={self.center})"

    @property
    def rank(self) -> int:
        self._check_fitted()
        return int(self.components.shape[1])

    def _check_fitted(self) -> None:
        if self.components is None:
            raise RuntimeError("PCA is not fitted; call fit(x) first")

    def fit(self, x: torch.Tensor) -> PCA:
        """Fit on ``x`` of shape ``(N, ...)`` (flattened to ``(N, D)``)."""
        x = _samples(x)
        n, d = x.shape[0], int(np.prod(x.shape[1:]))
        self.input_shape = tuple(x.shape[1:])
        flat = _flat(x)
        mean = torch.zeros(d, dtype=torch.float64)
        if self.center:
            for block in _blocks(flat):
                mean += flat[block].to(torch.float64).sum(0)
            mean /= n
        tol = max(n, d) * torch.finfo(torch.float64).eps
        if d <= n:
            cov = torch.zeros(d, d, dtype=torch.float64)
            for block in _blocks(flat):
                xc = flat[block].to(torch.float64) - mean
                cov += xc.T @ xc
            evals, evecs = torch.linalg.eigh(cov / n)
            evals, evecs = evals.flip(0), evecs.flip(1)
            keep = evals > tol * max(float(evals[0]), 0.0)
        else:
            xc = flat.to(torch.float64) - mean
            _, svals, vh = torch.linalg.svd(xc, full_matrices=False)
            evals, evecs = svals**2 / n, vh.T
            keep = svals > tol * float(svals[0])
        evals, evecs = evals[keep], evecs[:, keep]
        if evecs.shape[1]:
            pivot = evecs.abs().argmax(0)
            signs = torch.sign(evecs[pivot, torch.arange(evecs.shape[1])])
            evecs = evecs * signs
        self.mean, self.components, self.eigenvalues = mean, evecs.contiguous(), evals
        return self

    def _centred(self, x: torch.Tensor) -> torch.Tensor:
        self._check_fitted()
        if tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(
                f"x has per-sample shape {tuple(x.shape[1:])} but the PCA was fitted on "
                f"{self.input_shape}"
            )
        return _flat(x).to(torch.float64) - self.mean

    def transform(self, x: torch.Tensor, n_components: int | None = None) -> torch.Tensor:
        """Coordinates ``(x - mean) V_P`` along the first ``n_components`` PCs (all if None),
        float64 of shape ``(N, P)``."""
        x = _samples(x, allow_empty=True)
        v = self.components if n_components is None else self.components[:, :n_components]
        return self._centred(x) @ v

    def inverse_transform(self, coords: torch.Tensor) -> torch.Tensor:
        """``mean + coords V_P^T`` reshaped to the input shape, float64; ``P = coords.shape[1]``."""
        self._check_fitted()
        p = coords.shape[1]
        if p > self.rank:
            raise ValueError(f"coords has {p} columns but the PCA has rank {self.rank}")
        flat = coords.to(torch.float64) @ self.components[:, :p].T + self.mean
        return flat.reshape(coords.shape[0], *self.input_shape)


def _map_rows(x: torch.Tensor, fn) -> torch.Tensor:
    """``fn`` on float64 row blocks of the flattened ``x``; result in ``x``'s shape and dtype."""
    flat = _flat(x)
    out = torch.empty_like(flat)
    for block in _blocks(flat):
        out[block] = fn(flat[block].to(torch.float64)).to(x.dtype)
    return out.reshape(x.shape)


class _PCATransform(FittedTransform):
    def __init__(self, center: bool) -> None:
        self.pca = PCA(center=center)

    def fit(self, x: torch.Tensor):
        self.pca.fit(x)
        return self

    def _checked(self, x: torch.Tensor) -> torch.Tensor:
        self._check_fitted_pca()
        x = _samples(x, allow_empty=True)
        if tuple(x.shape[1:]) != self.pca.input_shape:
            raise ValueError(
                f"x has per-sample shape {tuple(x.shape[1:])} but {type(self).__name__} was "
                f"fitted on {self.pca.input_shape}"
            )
        return x

    def _check_fitted_pca(self) -> None:
        if self.pca.components is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(x) first")


class PCAProjection(_PCATransform):
    r"""Project onto the top ``P`` principal components, reconstructed in input space.

    ``x' = m + V_P V_P^T (x - m)`` (paper 002 §4, "projection onto the first P PCs", R3), so
    models consume the result unchanged. ``P`` larger than the numerical rank ``r`` of the
    training data is clipped to ``r`` (see ``n_components_used``); with ``P = r = D`` the map is
    the identity up to rounding.

    Args:
        n_components: ``P >= 1``, at most the input dimension ``D``.
        center: use the centred covariance (``m`` = training mean) or the uncentred one.
    """

    def __init__(self, n_components: int, center: bool = True) -> None:
        super().__init__(center)
        self.n_components = check_int("n_components", n_components, minimum=1)
        self.n_components_used: int | None = None

    def __repr__(self) -> str:
        return f"PCAProjection(n_components={self.n_components}, center={self.pca.center})"

    def fit(self, x: torch.Tensor) -> PCAProjection:
        x = _samples(x)
        d = int(np.prod(x.shape[1:]))
        if self.n_components > d:
            raise ValueError(f"n_components={self.n_components} exceeds the input dimension {d}")
        self.pca.fit(x)
        self.n_components_used = min(self.n_components, self.pca.rank)
        return self

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        x = self._checked(x)
        v, m = self.pca.components[:, : self.n_components_used], self.pca.mean
        return _map_rows(x, lambda rows: (rows - m) @ v @ v.T + m)


class ZCAWhitening(_PCATransform):
    r"""ZCA whitening: ``x' = V (Lambda + eps I)^{-1/2} V^T (x - m)`` (paper 002 R2).

    ``V, Lambda`` are the training principal directions and variances (covariance normalised
    by ``N``), so the whitened training covariance is ``V Lambda (Lambda + eps)^{-1} V^T``: the
    identity for ``eps = 0`` and full-rank data, and ``1 - eps / (lambda_j + eps)`` along PC
    ``j`` otherwise. ``eps`` (absolute, in the units of the input variance) keeps
    near-degenerate directions from being blown up; the paper gives no value. Directions with
    no training variance (beyond the numerical rank) are projected out rather than scaled by
    ``eps^{-1/2}``. The output stays in input space (images stay images).

    Invariance (note 002 R33): with ``center=False`` and full-rank data the map is linear and
    invertible, ``x' = A x``, so the least-squares solution ``W`` of a bias-free linear model
    becomes ``W A^{-1}`` and its predictions do not change (the tests: to 1e-10, measured
    4e-14). With ``center=True`` the map is **affine**, ``x' = A x - A m``: a bias-free linear
    model cannot absorb the shift, so its least-squares predictions change on data with a
    non-zero mean (the tests measure a largest change of 0.41 on predictions of magnitude
    up to 0.75, the argmax changing for 28% of the points; an audit measured 0.95 on
    other data). A model with a bias is unaffected either way.

    Args:
        eps: non-negative regulariser added to every eigenvalue.
        center: subtract the training mean (``m``) first; ``False`` whitens the uncentred
            second moment and sets ``m = 0``.
    """

    def __init__(self, eps: float = 1e-5, center: bool = True) -> None:
        super().__init__(center)
        self.eps = check_float("eps", eps, minimum=0.0)

    def __repr__(self) -> str:
        return f"ZCAWhitening(eps={self.eps}, center={self.pca.center})"

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        x = self._checked(x)
        v, m = self.pca.components, self.pca.mean
        scale = (self.pca.eigenvalues + self.eps).rsqrt()
        return _map_rows(x, lambda rows: ((rows - m) @ v) * scale @ v.T)


class PCAmplification(_PCATransform):
    r"""Amplify the top or bottom principal components, then renormalise (paper 002 §4, R4).

    With ``S`` the first (``which="top"``) or last (``"bottom"``) ``k = max(1,
    round(fraction * r))`` of the ``r`` training PCs (``r = D`` for full-rank data; 1.5% of
    3072 gives 46 for CIFAR), the PC coordinates in ``S`` are multiplied by ``factor``:

    ``x' = x + (factor - 1) V_S V_S^T (x - m)``,

    so the training spectrum changes from ``lambda_j`` to ``factor^2 lambda_j`` on ``S`` with
    the same eigenvectors. Then, with ``renormalize``, every channel is standardised to mean 0
    and std 1 with a :class:`~collapselab.data.transforms.Standardize` fitted on the amplified
    training inputs. The paper speaks of amplifying "in the training set"; apply the fitted
    transform to the test split too or not, as the experiment requires.

    Args:
        fraction: fraction of the PCs to amplify, in ``(0, 1]`` (paper: 0.015).
        factor: multiplier of their coordinates (paper: 10).
        which: ``"top"`` or ``"bottom"``.
        renormalize: standardise per channel after amplifying.
        center: centred (default) or uncentred PCs.
    """

    def __init__(
        self,
        fraction: float = 0.015,
        factor: float = 10.0,
        which: str = "top",
        renormalize: bool = True,
        center: bool = True,
    ) -> None:
        super().__init__(center)
        self.fraction = check_float("fraction", fraction, minimum=0.0, maximum=1.0, strict=True)
        self.factor = check_float("factor", factor)
        self.which = check_choice("which", which, ("top", "bottom"))
        self.renormalize = bool(renormalize)
        self.selected: torch.Tensor | None = None
        self.standardize: Standardize | None = None

    def __repr__(self) -> str:
        return (
            f"PCAmplification(fraction={self.fraction}, factor={self.factor}, "
            f"which={self.which!r}, renormalize={self.renormalize}, center={self.pca.center})"
        )

    def _amplify(self, x: torch.Tensor) -> torch.Tensor:
        v, m = self.pca.components[:, self.selected], self.pca.mean
        gain = self.factor - 1.0
        return _map_rows(x, lambda rows: rows + gain * ((rows - m) @ v) @ v.T)

    def fit(self, x: torch.Tensor) -> PCAmplification:
        self.pca.fit(x)
        r = self.pca.rank
        if r == 0:
            raise ValueError("x has no variance: there is no principal component to amplify")
        k = max(1, round(self.fraction * r))
        self.selected = torch.arange(k) if self.which == "top" else torch.arange(r - k, r)
        self.standardize = Standardize().fit(self._amplify(x)) if self.renormalize else None
        return self

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        x = self._checked(x)
        out = self._amplify(x)
        return self.standardize.apply(out) if self.standardize is not None else out


SEPARATORS = ("least_squares", "logistic", "linear_svm")
"""The linear separators of :class:`SeparableRelabel`."""


def _sklearn_separator(
    kind: str, features: torch.Tensor, y: torch.Tensor, n_classes: int
) -> torch.Tensor:
    """``[W; b]`` ``(P + 1, K)`` of a scikit-learn separator fitted on ``features[:, :-1]``
    (the last column is the constant 1 of the bias)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    z, labels = features[:, :-1].numpy(), y.numpy()
    present = np.unique(labels)
    weight = np.zeros((z.shape[1] + 1, n_classes))
    weight[-1, np.setdiff1d(np.arange(n_classes), present)] = -np.inf
    if len(present) == 1:  # one class: every point gets it
        return torch.from_numpy(weight)
    if kind == "logistic":
        model = LogisticRegression(C=1.0, max_iter=10_000)
    else:
        model = LinearSVC(C=1.0, loss="hinge", dual=True, max_iter=100_000, random_state=0)
    model.fit(z, labels)
    coef = np.vstack([model.coef_.T, model.intercept_[None, :]])  # (P + 1, K') or (P + 1, 1)
    if coef.shape[1] == 1:  # binary: one discriminant s, class present[1] where s > 0
        weight[:, present[1]] = coef[:, 0]
        weight[:, present[0]] = 0.0
    else:
        weight[:, present] = coef
    return torch.from_numpy(weight)


class SeparableRelabel:
    r"""P-separable relabelling (paper 002 §4): labels that a linear map of the top P PCs
    separates.

    1. Fit a :class:`PCA` on the training inputs; ``z = (x - m) V_P`` are the P-PC coordinates.
    2. Fit a linear separator with bias, ``argmax_k (z W + b)_k``, of the type ``separator``
       (note 002 R5, §7.22: the paper says only "the optimal linear separator"):

       * ``"least_squares"`` (default): ``[W; b] = argmin ||[z, 1][W; b] - T||_F^2`` on
         ``+-1`` one-vs-rest targets ``T = 2 onehot(y) - 1`` (``N x K``; for ``K = 2`` the
         sign of the single least-squares discriminant on ``+-1`` labels);
       * ``"logistic"``: scikit-learn's ``LogisticRegression`` (L2 penalty, ``C = 1``,
         lbfgs; multinomial for ``K > 2``);
       * ``"linear_svm"``: scikit-learn's ``LinearSVC`` with the hinge loss (L2 penalty,
         ``C = 1``, dual coordinate descent, ``random_state=0``; one-vs-rest for
         ``K > 2``).

       For the scikit-learn separators ``W, b`` are their ``coef_, intercept_`` (for
       ``K = 2`` the single discriminant ``s`` becomes the columns ``[0, s]``, so the argmax
       is scikit-learn's ``s > 0`` rule); a class absent from the labels gets the score
       ``-inf``.
    3. Replace every label by that prediction, i.e. flip the misclassified ones, in the
       training and (with the same separator) the test split.

    After one round (the paper's procedure, ``rounds=1``) the new labels are exactly the
    predictions of the stored separator, hence linearly separable in P-PC space. A separator
    of the same type fitted *to the new labels* can still misclassify a few of them; with
    ``rounds > 1`` steps 2-3 are repeated on the new labels until the refitted separator
    reproduces them (``converged``) or the rounds run out. ``converged`` reports, in either
    case, whether a fresh fit to the final training labels classifies all of them correctly.

    Args:
        n_components: ``P >= 1`` (clipped to the numerical rank of the training inputs).
        rounds: fit-and-flip rounds, ``>= 1``.
        center: centred (default) or uncentred PCs; with the bias the separator is the same.
        separator: ``"least_squares"`` (default), ``"logistic"`` or ``"linear_svm"``.
    """

    def __init__(
        self,
        n_components: int,
        rounds: int = 1,
        center: bool = True,
        separator: str = "least_squares",
    ) -> None:
        self.n_components = check_int("n_components", n_components, minimum=1)
        self.rounds = check_int("rounds", rounds, minimum=1)
        self.separator = check_choice("separator", separator, SEPARATORS)
        self.pca = PCA(center=center)
        self.weight: torch.Tensor | None = None
        self.n_classes: int | None = None
        self.converged: bool | None = None
        self.rounds_used: int | None = None
        self.train_labels: torch.Tensor | None = None

    def __repr__(self) -> str:
        sep = "" if self.separator == "least_squares" else f", separator={self.separator!r}"
        return f"SeparableRelabel(n_components={self.n_components}, rounds={self.rounds}{sep})"

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        z = self.pca.transform(x, min(self.n_components, self.pca.rank))
        return torch.cat([z, torch.ones(z.shape[0], 1, dtype=torch.float64)], dim=1)

    def _least_squares(self, features: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        targets = 2.0 * torch.nn.functional.one_hot(y, self.n_classes).to(torch.float64) - 1.0
        return torch.linalg.lstsq(features, targets, driver="gelsd").solution

    def _fit_separator(self, features: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[W; b]`` of shape ``(P + 1, K)`` of the configured separator."""
        if self.separator == "least_squares":
            return self._least_squares(features, y)
        return _sklearn_separator(self.separator, features, y, self.n_classes)

    def fit(self, x: torch.Tensor, y: torch.Tensor, n_classes: int) -> SeparableRelabel:
        """Fit on training inputs and labels; the new training labels are ``train_labels``."""
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        if y.ndim != 1 or y.shape[0] != x.shape[0] or y.dtype != torch.int64:
            raise ValueError(
                f"y must be an int64 tensor of shape ({x.shape[0]},), got {y.dtype} "
                f"{tuple(y.shape)}"
            )
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= self.n_classes):
            raise ValueError(f"labels must lie in [0, {self.n_classes})")
        self.pca.fit(x)
        if self.pca.rank == 0:
            raise ValueError("x has no variance: no principal component to separate along")
        features = self._features(x)
        labels = y
        self.converged = False
        for round_ in range(1, self.rounds + 1):
            self.weight = self._fit_separator(features, labels)
            predicted = (features @ self.weight).argmax(1)
            self.rounds_used = round_
            if torch.equal(predicted, labels):
                self.converged = True
                break
            labels = predicted
        if not self.converged:
            refit = (features @ self._fit_separator(features, labels)).argmax(1)
            self.converged = bool(torch.equal(refit, labels))
        self.train_labels = labels
        return self

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """The separator's labels for inputs ``x`` (int64)."""
        if self.weight is None:
            raise RuntimeError("SeparableRelabel is not fitted; call fit(x, y, n_classes) first")
        return (self._features(_samples(x, allow_empty=True)) @ self.weight).argmax(1)


def separable_relabel(
    data: LabeledData | DataSplits,
    n_components: int,
    rounds: int = 1,
    center: bool = True,
    separator: str = "least_squares",
) -> LabeledData | DataSplits:
    """Relabel ``data`` so it is linearly separable in the space of its top ``n_components`` PCs.

    See :class:`SeparableRelabel`. The separator is fitted on the training split (or on the
    single :class:`LabeledData` given) and relabels the test split too. Start from
    :func:`~collapselab.data.transforms.shuffle_labels` output for the paper's
    shuffled-label variant. ``separator`` picks the linear separator (``"least_squares"``,
    the default, ``"logistic"`` or ``"linear_svm"``). ``meta["separable_relabel"]`` records
    P, the separator, the fraction of labels changed per split and ``converged``.
    """
    relabel = SeparableRelabel(n_components, rounds, center, separator)
    train = data.train if isinstance(data, DataSplits) else data
    if not isinstance(train, LabeledData):
        raise TypeError(f"data must be LabeledData or DataSplits, got {type(data).__name__}")
    relabel.fit(train.x, train.y, train.n_classes)

    def relabelled(split: LabeledData, y: torch.Tensor) -> LabeledData:
        changed = float((y != split.y).double().mean())
        info = {
            "n_components": min(n_components, relabel.pca.rank),
            "separator": relabel.separator,
            "fraction_changed": changed,
            "converged": relabel.converged,
            "rounds_used": relabel.rounds_used,
        }
        meta = {**_note(split.meta, repr(relabel)), "separable_relabel": info}
        return LabeledData(split.x, y, split.n_classes, split.name, meta)

    new_train = relabelled(train, relabel.train_labels)
    if isinstance(data, LabeledData):
        return new_train
    test = data.test
    if test is not None:
        test = relabelled(test, relabel.predict(test.x))
    return DataSplits(new_train, test)
