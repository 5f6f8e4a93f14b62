"""Data: what a run reads, made by a generator or read from a user's file, always through one HDF5 store layout.

* ``generators/``: one module per PDE or sequence task, deterministic in (config, seed, sample id);
* ``formats/``: one reader per file format, found by the reader table (``formats/table.py``), the one way a real
  file enters (``neurodyn convert``);
* ``store`` (the HDF5 layout), ``memory_store`` (a store's arrays served from memory), ``public_dataset`` (what every
  reader hands on), ``datasets`` (steady / autoregressive datasets and windows), ``normalize``;
* the sequence store below the readers: ``sequence_store`` (padding, masks, classes), ``sequence_missing``,
  ``sequence_pooling``, ``sequence_dataset``, ``sequence_arrays`` (the one set of checks of sequence arrays),
  ``sequences`` (their public names); ``features/`` (wavelet and event features of raw signals);
* ``config`` (``DataConfig``: the ``data`` section typed and validated) and ``assembly`` (``build_data``: the store,
  splits, windows and fitted normalizers of a config).

The sub-layers (``tests/test_layering.py``): the sequence store modules, ``public_dataset`` and ``features/`` import
neither ``formats/`` nor ``generators/``; a generator imports no reader, a reader no generator.
"""
