"""neurodyn: neural-dynamics operators for PDEs and irregular time series.

``neurodyn.load_run(path).predict(x)``: a trained run as a predictor in physical units
(:mod:`neurodyn.train.predict`); ``neurodyn.SequenceClassifier`` / ``SequenceRegressor``: scikit-learn-style
estimators over the sequence presets (:mod:`neurodyn.train.estimator`); the subpackages hold the rest
(``models``, ``data``, ``train``, ``ops``, ``nn``).
"""

from ._version import __version__ as __version__


def __getattr__(name: str):
    if name == "load_run":  # imported on first use: `import neurodyn` stays light
        from .train.predict import load_run

        return load_run
    if name in ("SequenceClassifier", "SequenceRegressor"):
        from .train import estimator

        return getattr(estimator, name)
    raise AttributeError(f"module 'neurodyn' has no attribute {name!r}")
