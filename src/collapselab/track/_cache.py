"""Pass-1 features kept for pass 2 of a Monitor's data pass, within a byte budget.

A data pass needs the class means before it can accumulate the within-class scatter, so it
reads every feature twice. Running the model a second time costs a whole forward pass; when
the features of every measured layer fit in ``budget`` bytes, pass 1 keeps them and pass 2
reads them back instead. The kept tensors are the very outputs the layers returned (no
copy) together with their version counters: a later in-place operation on an output (an
``nn.ReLU(inplace=True)`` after the measured layer, say) changes the counter, which
:meth:`FeatureCache.end_batch` detects; the cache is then dropped, pass 2 runs the model
again, and from then on the cache keeps copies.

Reading the features back instead of recomputing them also means pass 2 sees exactly the
features of pass 1, even under a loader that augments at random.
"""

from __future__ import annotations

import torch

from collapselab.probe._inplace import InPlaceGuard


class FeatureCache:
    """Per-batch ``{layer: features}`` and labels of pass 1, while they fit in ``budget``.

    Args:
        budget: the most bytes of features to keep (``0``: keep nothing). A kept view
            counts the whole storage it keeps alive.
        copy: keep copies instead of the layers' own output tensors.
    """

    def __init__(self, budget: int, *, copy: bool = False) -> None:
        self.budget = budget
        self.copy = copy
        self.active = budget > 0
        self.nbytes = 0
        self.batches: list[tuple[dict[str, torch.Tensor], torch.Tensor]] = []
        self._guard = InPlaceGuard()
        self.overwritten = False

    def start_batch(self, labels: torch.Tensor) -> None:
        if self.active:
            self.batches.append(({}, labels))
            self._guard.clear()

    def add(self, name: str, features: torch.Tensor) -> None:
        """Keep one layer's ``(n, D)`` features of the current batch, if the budget allows."""
        if not self.active:
            return
        size = features.numel() * features.element_size()
        if not self.copy:
            # A view keeps its whole storage alive (an output sliced from a larger buffer).
            size = max(size, features.untyped_storage().nbytes())
        if self.nbytes + size > self.budget:
            self.drop()
            return
        self.nbytes += size
        if self.copy:
            features = features.clone()
        else:
            self._guard.watch(name, features)
        self.batches[-1][0][name] = features

    def end_batch(self) -> None:
        """Drop the cache if a kept output was modified in place after its layer ran."""
        if self.active and self._guard.changed():  # copies are never watched
            self.overwritten = True
            self.drop()

    def drop(self) -> None:
        self.active = False
        self.batches = []
        self.nbytes = 0
        self._guard.clear()
