"""Training: the trainer, tasks, run folders and the run API; ``neurodyn.train.fit`` trains any ``nn.Module``."""


def __getattr__(name: str):
    if name == "fit":  # imported on first use, like the rest of the package
        from .fitting import fit

        return fit
    raise AttributeError(f"module 'neurodyn.train' has no attribute {name!r}")
