"""GeoMaNO (paper 003): its claims' experiments."""
