"""CHONN (paper 000): its claims' experiments (Figs. 3-5)."""
