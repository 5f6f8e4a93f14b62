"""Comparisons across the operator papers (LaMO, GeoMaNO, FNO, Transolver on Darcy and Navier-Stokes)."""
