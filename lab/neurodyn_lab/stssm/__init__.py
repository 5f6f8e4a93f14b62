"""ST-SSM (paper 004): its claims' experiments."""
