"""collapselab.families: the measurement engine (docs/catalogue.md, "Families and what their
keys need").

A metric family declares what its keys need from a pass over the data (class statistics,
per-sample signals, a procedure on the model) and computes them; the catalogue is the
registry of families; :func:`measure` and :class:`collapselab.track.Monitor` both plan
their work through it and collect only what the requested keys need.

Public API:

- :func:`measure`: the catalogue metrics of one feature matrix.
- The built-in families: :class:`NC`, :class:`MSE`, :class:`PFC`, :class:`Diversity`,
  :class:`Curvature`, :class:`PCBias`, :class:`LearningOrder` (one module each).
- The protocol a family implements: :class:`Family`, :class:`Key`, :class:`Needs`,
  :class:`Layout`, :class:`LayerView`, :class:`SplitView`, :class:`ModelAccess`,
  :data:`MODEL_LAYER` (:mod:`collapselab.families.family`); its distributed mode,
  :data:`DISTRIBUTED_MODES`, and what a model procedure may ask of the processes,
  :class:`Processes`, :func:`global_order` (:mod:`collapselab.families.processes`).
- The catalogue: :func:`register_family`, :func:`unregister_family`, :func:`catalogue`,
  :func:`family_names`, :func:`family_class` (:mod:`collapselab.families.catalogue`).
- Reading a family's stored measurements back: :func:`measurement_arrays`,
  :func:`array_name`; :func:`accessibility_from_runs` and :func:`correctness_from_run`
  (``learning_order``); :func:`compact_pc_from_runs` (``pcbias``).
"""

from collapselab.families.arrays import array_name, measurement_arrays
from collapselab.families.builtin import (
    MSE,
    NC,
    PFC,
    Curvature,
    Diversity,
    LearningOrder,
    PCBias,
)
from collapselab.families.catalogue import (
    catalogue,
    family_class,
    family_names,
    register_family,
    unregister_family,
)
from collapselab.families.family import (
    MODEL_LAYER,
    Family,
    Key,
    LayerView,
    Layout,
    ModelAccess,
    Needs,
    SplitView,
)
from collapselab.families.learning_order import accessibility_from_runs, correctness_from_run
from collapselab.families.measure import measure
from collapselab.families.pcbias import compact_pc_from_runs
from collapselab.families.processes import DISTRIBUTED_MODES, Processes, global_order

__all__ = [
    "DISTRIBUTED_MODES",
    "MODEL_LAYER",
    "MSE",
    "NC",
    "PFC",
    "Curvature",
    "Diversity",
    "Family",
    "Key",
    "LayerView",
    "Layout",
    "LearningOrder",
    "ModelAccess",
    "Needs",
    "PCBias",
    "Processes",
    "SplitView",
    "accessibility_from_runs",
    "array_name",
    "catalogue",
    "compact_pc_from_runs",
    "correctness_from_run",
    "family_class",
    "family_names",
    "global_order",
    "measure",
    "measurement_arrays",
    "register_family",
    "unregister_family",
]
