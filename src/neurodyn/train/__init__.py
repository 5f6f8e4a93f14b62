"""Training: the trainer, tasks, run folders and the run API; ``neurodyn.train.fit`` trains any ``nn.Module``;
``SequenceClassifier`` / ``SequenceRegressor`` (``train.estimator``) train sequence presets on arrays."""


def __getattr__(name: str):
    if name == "fit":  # imported on first use, like the rest of the package
        from .fitting import fit

        return fit
    if name in ("SequenceClassifier", "SequenceRegressor"):
        from . import estimator

        return getattr(estimator, name)
    raise AttributeError(f"module 'neurodyn.train' has no attribute {name!r}")
