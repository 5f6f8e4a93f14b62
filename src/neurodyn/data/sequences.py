"""Ragged, irregularly sampled sequences, in one name: the public names of the sequence modules, which hold them
by what they do (each with its part of the story in its module doc):

* :mod:`neurodyn.data.sequence_store`: the store layout (``fields/x, t, mask, y`` [, ``observed``]) and how a
  reader's ragged :class:`Cases` become it (:func:`build_sequences`: padding, masks, missing values, timestamps,
  class lists, the options every reader takes); a generator's :func:`pad_sequences` / :func:`take_sequences`;
* :mod:`neurodyn.data.sequence_missing`: missing values (``data.missing``: :data:`MISSING`), the observed
  indicators, ``drop_steps``, and :func:`prepare_raw_inputs` (a trained run's raw inputs, filled alike);
* :mod:`neurodyn.data.sequence_pooling`: long sequences average-pooled in time (``data.max_steps``:
  :func:`pool_factor`, :func:`pool_in_time`);
* :mod:`neurodyn.data.sequence_arrays`: the one set of checks of sequence arrays handed in by a user;
* :mod:`neurodyn.data.sequence_dataset`: :class:`SequenceDataset`, the torch Dataset over a store (windows, the
  training data's class indices, :func:`store_classes`).

They sit below the readers of :mod:`neurodyn.data.formats` (which import them) and import nothing from them.
"""

from __future__ import annotations

from .sequence_dataset import SequenceDataset, store_classes
from .sequence_missing import MISSING, prepare_raw_inputs
from .sequence_pooling import AUTO_MAX_STEPS, pool_factor, pool_in_time
from .sequence_store import (
    COMMON_OPTIONS,
    TIME_PRECISION,
    Cases,
    build_sequences,
    check_sequence_arrays,
    class_list,
    label_index,
    pad_sequences,
    sequence_options,
    take_sequences,
)

__all__ = [
    "AUTO_MAX_STEPS",
    "COMMON_OPTIONS",
    "MISSING",
    "TIME_PRECISION",
    "Cases",
    "SequenceDataset",
    "build_sequences",
    "check_sequence_arrays",
    "class_list",
    "label_index",
    "pad_sequences",
    "pool_factor",
    "pool_in_time",
    "prepare_raw_inputs",
    "sequence_options",
    "store_classes",
    "take_sequences",
]
