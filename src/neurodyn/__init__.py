"""neurodyn: neural-dynamics operators for PDEs and irregular time series."""
__version__ = "0.1.0"
