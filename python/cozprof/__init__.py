"""Causal profiler front end: `coz run`, `coz report`, `coz plot`, `coz view`."""

__version__ = "0.1.0"
