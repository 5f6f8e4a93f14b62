"""Features computed from raw signals, in one place that the readers of real files (:mod:`neurodyn.data.formats`)
and the generators (:mod:`neurodyn.data.generators`) both import: :mod:`.wavelets` (the bearing snapshots' Morlet-CWT
and statistical features), :mod:`.events` (the event encoding of images). They import neither side.
"""
