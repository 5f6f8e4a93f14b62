"""neurodyn's laboratory: the experiments that test the papers' claims with the ``neurodyn`` library.

One module per claim, grouped by paper (``neurodyn_lab/<paper>/<claim>.py``: ``lamo``, ``geomano``, ``stssm``,
``chonn``, ``nac``; ``operators`` and ``time_series`` for comparisons across papers), the experiment queue
(:mod:`~neurodyn_lab.queue`), the records they write (:mod:`~neurodyn_lab.records`, ``lab/records/<paper>/<claim>``)
and one command per paper table (:mod:`~neurodyn_lab.reproduce`). The library never imports this package.
"""
