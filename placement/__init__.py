"""Operator placement: correlation-based (Borealis), ROD, feasible-set size and baselines."""
