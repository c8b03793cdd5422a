"""Why units moved: every decision that moves units names its cause in ``details["cause"]``.

A run's migrations are the sum of the units its applied decisions moved (``details["moved"]``);
grouped by cause they say which rule moved them: a correlation method's first global step,
the stale-placement trigger's re-placements, the method's own pair-wise rounds, a static
plan restored once its nodes are up again, least-loaded re-placing for measured node speeds,
a scale action's placement on the nodes left running, or a move off failed nodes. The replay
summaries report ``migrations_by_cause`` and the daemon labels ``trimtab_migrations_total``
with it, so a run with many migrations says which rule made them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["Cause", "by_cause", "cause_of", "describe", "mean_by_cause", "moved_by"]


class Cause(StrEnum):
    """The rule that moved units."""

    GLOBAL_STEP = "global-step"  # a correlation method's global step after the warm-up
    STALE_TRIGGER = "stale-trigger"  # the global step run again by the stale-placement trigger
    PAIRWISE = "pairwise"  # the correlation method's own pair-wise round
    PLAN_RESTORED = "plan-restored"  # a method's plan, back on its nodes once they are up
    NODE_SPEEDS = "node-speeds"  # least-loaded re-placed for the node speeds measured
    SCALING = "scaling"  # placed on the nodes a scale action left running
    FAILOVER = "failover"  # moved off failed nodes
    OTHER = "other"  # a decision that moved units and named no cause


class _Decision(Protocol):
    applied: bool
    details: dict[str, Any]


def moved_by(details: dict[str, Any]) -> int:
    """Units a decision moved (its ``moved`` number, 0 when it has none)."""
    moved = details.get("moved", 0)
    return int(moved) if isinstance(moved, int | float) else 0


def cause_of(details: dict[str, Any]) -> Cause:
    """The cause a decision names (``other`` when it names none).

    >>> cause_of({"moved": 3, "cause": "pairwise"}), cause_of({"moved": 1})
    (<Cause.PAIRWISE: 'pairwise'>, <Cause.OTHER: 'other'>)
    """
    try:
        return Cause(details.get("cause", Cause.OTHER))
    except ValueError:
        return Cause.OTHER


def by_cause(records: Iterable[_Decision]) -> dict[str, int]:
    """Units the applied decisions moved, per cause, causes with no move left out; the values
    sum to the units the decisions moved.

    >>> from types import SimpleNamespace as D
    >>> by_cause([D(applied=True, details={"moved": 4, "cause": "global-step"}),
    ...           D(applied=False, details={"moved": 9, "cause": "pairwise"}),
    ...           D(applied=True, details={"moved": 2, "cause": "pairwise"}),
    ...           D(applied=True, details={"moved": 0, "cause": "failover"})])
    {'global-step': 4, 'pairwise': 2}
    """
    out: dict[str, int] = {}
    for d in records:
        n = moved_by(d.details) if d.applied else 0
        if n:
            c = str(cause_of(d.details))
            out[c] = out.get(c, 0) + n
    return out


def mean_by_cause(runs: list[dict[str, int]]) -> dict[str, float]:
    """The mean over runs of each cause's moves (0 in a run it moved none in).

    >>> mean_by_cause([{"pairwise": 3, "global-step": 4}, {"global-step": 2}])
    {'global-step': 3.0, 'pairwise': 1.5}
    """
    causes = sorted({c for r in runs for c in r})
    return {c: sum(r.get(c, 0) for r in runs) / len(runs) for c in causes}


def describe(by: dict[str, float]) -> str:
    """One line for a report: each cause and its moves, or "none".

    >>> describe({"global-step": 18, "stale-trigger": 20.0}), describe({})
    ('global-step 18, stale-trigger 20', 'none')
    """
    return ", ".join(f"{c} {n:g}" for c, n in by.items()) or "none"
