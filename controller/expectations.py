"""A scenario's ``expect:`` block, checked against a replay's summary.

Each expectation the scenario sets is compared with the figure the replay measured (the
same summary keys on the simulator and on Spark, where latency is the batch duration):
``max_mean_latency_s`` with ``mean_latency``, ``max_p99_latency_s`` with ``p99_latency``,
``max_dropped_fraction`` with ``dropped_fraction`` and ``zero_lost_tuples`` with
``lost_tuples``. ``trimtab replay`` reports every check and exits 4 when one fails, or when
the run did not measure its figure, so a scenario file is a regression test for the controller
it configures.
"""

from __future__ import annotations

from typing import Any

from controller.scenario import Expectations

__all__ = ["CHECKS", "check_expectations", "unmet"]

# expectation -> the summary key it bounds from above
CHECKS = {
    "max_mean_latency_s": "mean_latency",
    "max_p99_latency_s": "p99_latency",
    "max_dropped_fraction": "dropped_fraction",
    "zero_lost_tuples": "lost_tuples",
}


def check_expectations(expect: Expectations, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per expectation the scenario sets: the bound, the measured figure and
    whether it holds (``met`` is None when the summary lacks the figure).

    >>> s = {"mean_latency": 0.2, "lost_tuples": 0.0}
    >>> [(c["expectation"], c["met"]) for c in check_expectations(
    ...     Expectations(max_mean_latency_s=0.1, zero_lost_tuples=True), s)]
    [('max_mean_latency_s', False), ('zero_lost_tuples', True)]
    """
    out = []
    for name, key in CHECKS.items():
        limit = getattr(expect, name)
        if limit is None or limit is False:
            continue
        bound = 0.0 if name == "zero_lost_tuples" else float(limit)
        measured = summary.get(key)
        met = None if measured is None else bool(float(measured) <= bound)
        out.append(
            {"expectation": name, "key": key, "bound": bound, "measured": measured, "met": met}
        )
    return out


def unmet(checks: list[dict[str, Any]]) -> list[str]:
    """One line per check that does not hold, naming the expectation and both numbers, or
    that its figure was not measured: a check nothing measured is not met (a Spark run whose
    batches read no row times none, and was reported as meeting its latency bound).

    >>> unmet(check_expectations(Expectations(max_p99_latency_s=1.0), {"p99_latency": None}))
    ['max_p99_latency_s: p99_latency was not measured']
    """
    return [
        f"{c['expectation']}: {c['key']} was not measured"
        if c["met"] is None
        else f"{c['expectation']}: {c['key']} {c['measured']:.4g} > {c['bound']:.4g}"
        for c in checks
        if c["met"] is not True
    ]
