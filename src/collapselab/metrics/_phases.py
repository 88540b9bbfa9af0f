"""Phase detection on training curves (paper 000, M5, R9, note A14).

The paper never defines the end of the first phase operationally. Its one worked example
(the phase ends "at around the 1300-th iteration", where feature and gradient diversity are
lowest) reads as the argmax of the cross-class feature similarity M2; the loss starts to
fall at the same time. Both criteria are computed here.

A run that never leaves phase 1 (a "learning-sticking" run, App. B) gets no boundary: the
M2 criterion needs the smoothed curve to fall after its peak (a peak at the last recorded
step is no boundary), the loss criterion needs the loss to drop. Neither invents one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collapselab.checks import ArrayLike, as_series, check_float, check_int


def smooth_curve(values: ArrayLike, window: int = 1) -> np.ndarray:
    """Centred moving average with a window of ``window`` points (odd, >= 1).

    Near the ends the window is truncated to the points that exist, so the output has the
    input's length and a constant curve stays constant. ``window=1`` returns a copy.
    """
    v = as_series("values", values)
    window = check_int("window", window, minimum=1)
    if window % 2 == 0:
        raise ValueError(f"window must be an odd integer >= 1, got {window}")
    half = window // 2
    csum = np.concatenate([[0.0], np.cumsum(v)])
    idx = np.arange(v.shape[0])
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + half + 1, v.shape[0])
    return (csum[hi] - csum[lo]) / (hi - lo)


@dataclass(frozen=True)
class PhaseDetection:
    """End and length of the first training phase.

    Attributes:
        phase1_end: step at which the smoothed similarity curve peaks (first occurrence
            of the maximum), or None when no peak is followed by a fall (the curve is
            still at its maximum at the last recorded step, or falls by no more than
            ``peak_drop`` after it): the run never left phase 1 by this criterion.
        phase1_length: ``phase1_end - steps[0]`` (None with ``phase1_end``).
        plateau_end: first step at which the loss is below its initial value by more than
            δ; None when it never is (a "stuck" run, note A22), or when no loss was given.
        plateau_length: ``plateau_end - steps[0]`` (None with ``plateau_end``).
        smoothed: the smoothed similarity curve.
    """

    phase1_end: float | None
    phase1_length: float | None
    plateau_end: float | None
    plateau_length: float | None
    smoothed: np.ndarray
    loss_given: bool = False

    @property
    def left_phase1(self) -> bool:
        """Whether the run left phase 1: by the loss criterion when a loss was given (the
        loss really falling is what phase 2 means), else by the M2 peak."""
        if self.loss_given:
            return self.plateau_end is not None
        return self.phase1_end is not None

    def as_dict(self) -> dict[str, float | None]:
        """The scalars for a run's summary: ends, lengths and ``left_phase1`` (0/1)."""
        return {
            "phase1_end": self.phase1_end,
            "phase1_length": self.phase1_length,
            "plateau_end": self.plateau_end,
            "plateau_length": self.plateau_length,
            "left_phase1": float(self.left_phase1),
        }


def detect_phases(
    steps: ArrayLike,
    similarity: ArrayLike,
    loss: ArrayLike | None = None,
    window: int = 1,
    loss_drop: float | None = None,
    relative: bool = False,
    peak_drop: float = 0.0,
) -> PhaseDetection:
    """Detect the end of the first phase (paper 000, M5, R9, note A14).

    * Phase-1 end: ``argmax_t`` of the centred moving average (``window`` points) of the
      similarity curve, normally the cross-class feature cosine M2, provided the smoothed
      curve at the last step lies more than ``peak_drop`` below the peak; otherwise None
      (no fall observed: the run has not left phase 1).
    * Loss-plateau end (when ``loss`` is given): the first step t with
      ``loss[0] - loss[t] > δ``, where ``δ = loss_drop`` (absolute) or
      ``δ = loss_drop * loss[0]`` (``relative=True``).

    Args:
        steps: ``(T,)`` strictly increasing iteration (or epoch) numbers.
        similarity: ``(T,)`` metric values at those steps.
        loss: optional ``(T,)`` training loss at those steps.
        window: odd smoothing window, in points.
        loss_drop: δ, required with ``loss``; must be > 0.
        relative: read ``loss_drop`` as a fraction of the initial loss.
        peak_drop: how far (absolute, >= 0) the smoothed curve must fall after its peak
            for the peak to count as the end of phase 1.
    """
    s = as_series("steps", steps)
    m = as_series("similarity", similarity)
    if s.shape[0] == 0:
        raise ValueError("steps must not be empty")
    if m.shape != s.shape:
        raise ValueError(f"similarity has {m.shape[0]} points but steps has {s.shape[0]}")
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    smoothed = smooth_curve(m, window)
    peak_drop = check_float("peak_drop", peak_drop, minimum=0.0)
    peak = int(np.argmax(smoothed))
    fell = smoothed[-1] < smoothed[peak] - peak_drop
    end = float(s[peak]) if fell else None
    plateau_end = None
    if loss is not None:
        lo = as_series("loss", loss)
        if lo.shape != s.shape:
            raise ValueError(f"loss has {lo.shape[0]} points but steps has {s.shape[0]}")
        if loss_drop is None:
            raise ValueError("loss_drop must be a positive number when loss is given, got None")
        loss_drop = check_float("loss_drop", loss_drop, minimum=0.0, strict=True)
        delta = loss_drop * lo[0] if relative else loss_drop
        hits = np.nonzero(lo[0] - lo > delta)[0]
        plateau_end = float(s[hits[0]]) if hits.size else None
    return PhaseDetection(
        phase1_end=end,
        phase1_length=None if end is None else end - float(s[0]),
        plateau_end=plateau_end,
        plateau_length=None if plateau_end is None else plateau_end - float(s[0]),
        smoothed=smoothed,
        loss_given=loss is not None,
    )


def select_window(steps: ArrayLike, start: float, end: float) -> np.ndarray:
    """Indices of the recorded steps in ``[start, end]`` (the window of Eq. 5, note A8).

    Raises ``ValueError`` naming the window and the recorded range when the window reaches
    outside the recorded steps, is empty or reversed: an analysis window is never silently
    clipped.
    """
    s = as_series("steps", steps)
    if s.shape[0] == 0:
        raise ValueError("steps must not be empty: no iterations were recorded")
    start = check_float("start", start)
    end = check_float("end", end)
    lo, hi = float(s.min()), float(s.max())
    if start > end:
        raise ValueError(f"window [{start:g}, {end:g}] is reversed; expected start <= end")
    if start < lo or end > hi:
        raise ValueError(
            f"window [{start:g}, {end:g}] lies outside the recorded iterations "
            f"[{lo:g}, {hi:g}]; expected a window within them"
        )
    idx = np.nonzero((s >= start) & (s <= end))[0]
    if idx.size == 0:
        raise ValueError(
            f"window [{start:g}, {end:g}] contains no recorded iteration; expected at least one"
        )
    return idx
