"""NAC (paper 002): its claims' experiments (Tables 1 and 5)."""
