"""LaMO (paper 001): its claims' experiments."""
