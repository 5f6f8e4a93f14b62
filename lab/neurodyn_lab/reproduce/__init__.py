"""One command per paper table: ``python -m neurodyn_lab reproduce <paper> [--table T] [--scale cpu|paper]
[--device cuda] [--seeds ...] [--dry-run]``.

* :mod:`~neurodyn_lab.reproduce.tables` -- the tables: per paper, the models (presets and overrides), seeds, epochs
  per scale, the metric and the paper's numbers as the pages cite them;
* :mod:`~neurodyn_lab.reproduce.cost` -- the estimated cost of a table's runs from the seconds per epoch the records
  measured for the same presets;
* :mod:`~neurodyn_lab.reproduce.command` -- the command: plan and cost, the runs as a resumable queue
  (:func:`neurodyn_lab.queue.run_jobs`), then ours beside the paper's, written as the page section ``table.md``.
"""
