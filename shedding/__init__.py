"""Distributed load shedding: load model, LP (PuLP + HiGHS), baselines and drop semantics."""
