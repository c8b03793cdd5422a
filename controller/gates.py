"""The hysteresis around a placement round: when the controller holds instead of moving.

``Gates`` answers with the reason to hold, or None to go on:

* before the round: warm-up (fewer samples than ``warmup_samples``), ``max_moves`` 0 (placement
  frozen: only a failover, which runs before the gates, moves units), cooldown (the
  ``cooldown_rounds`` rounds after a change hold), a blackout window;
* on a proposal: more moves than ``max_moves``, or an expected drop of the mean node-load
  variance below ``min_gain``.

``HoldList`` keeps units whose last move did not lower the mean node-load variance where they
are for ``ineffective_hold_rounds`` rounds, and bounds churn: a unit moved in the last
``churn_rounds`` rounds is not moved again by a pair-wise round (the per-operator migration
cool-down of the Borealis pitfalls; a global step or a recovery may still move it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from controller.settings import PlacementSettings

__all__ = ["DecisionKind", "Gates", "HoldList", "in_blackout"]

WARMUP_SAMPLES = 3  # a variance and a correlation need a few samples


def in_blackout(windows: list[str], now: datetime | None = None) -> bool:
    """True when the UTC time of day lies in one of the ``HH:MM-HH:MM`` windows (may wrap midnight).

    Examples
    --------
    >>> in_blackout(["22:00-02:00"], datetime(2026, 1, 1, 23, 30, tzinfo=UTC))
    True
    >>> in_blackout(["09:00-10:00"], datetime(2026, 1, 1, 10, 30, tzinfo=UTC))
    False
    """
    t = (now or datetime.now(UTC)).strftime("%H:%M")
    for w in windows:
        a, b = w.split("-")
        if (a <= t < b) if a <= b else (t >= a or t < b):
            return True
    return False


class DecisionKind(StrEnum):
    """What a control round did; combined kinds join with ``+`` (``place+shed``)."""

    HOLD = "hold"
    PLACE = "place"
    RECOVER = "recover"
    SHED = "shed"
    REROUTE = "reroute"
    SCALE = "scale"


class Gates:
    """Hysteresis gates of the placement round.

    >>> g = Gates(PlacementSettings(cooldown_rounds=2, max_moves=3, min_gain=0.01))
    >>> g.before_round(samples=2, rounds_since_change=9)
    'warm-up: 2 samples, fewer than 3'
    >>> g.before_round(samples=5, rounds_since_change=1)
    'cooldown: 1 round(s) since the last change, cooldown_rounds=2'
    >>> g.before_round(samples=5, rounds_since_change=2)  # the second round after it holds too
    'cooldown: 2 round(s) since the last change, cooldown_rounds=2'
    >>> g.before_round(samples=5, rounds_since_change=3) is None
    True
    >>> Gates(PlacementSettings(max_moves=0)).before_round(samples=5, rounds_since_change=9)
    'max_moves=0: placement frozen (only units on failed nodes move)'
    >>> g.on_proposal(moves=4, gain=1.0)
    '4 moves exceed max_moves=3'
    >>> g.on_proposal(moves=1, gain=0.001)
    'expected gain 0.001 below min_gain 0.01'
    >>> g.on_proposal(moves=1, gain=-0.5, judged_by="borealis acceptance") is None
    True
    """

    def __init__(
        self,
        settings: PlacementSettings,
        in_blackout: Callable[[], bool] | None = None,
        warmup_samples: int = WARMUP_SAMPLES,
    ) -> None:
        self.s = settings
        self.in_blackout = in_blackout or (lambda: False)
        self.warmup_samples = warmup_samples

    def before_round(self, samples: int, rounds_since_change: int) -> str | None:
        """A reason to skip the round, or None."""
        if samples < self.warmup_samples:
            return f"warm-up: {samples} samples, fewer than {self.warmup_samples}"
        if self.s.max_moves == 0:
            return "max_moves=0: placement frozen (only units on failed nodes move)"
        if rounds_since_change <= self.s.cooldown_rounds:
            return (
                f"cooldown: {rounds_since_change} round(s) since the last change, "
                f"cooldown_rounds={self.s.cooldown_rounds}"
            )
        if self.in_blackout():
            return "blackout window: no changes"
        return None

    def on_proposal(self, moves: int, gain: float, judged_by: str | None = None) -> str | None:
        """A reason to refuse a proposal of ``moves`` moves with this expected gain (drop of
        the mean node-load variance), or None. A proposal the method already judged by its
        own objective (``judged_by``: the Borealis acceptance rule on a pair's load gap) is
        not vetoed again on the variance."""
        if moves > self.s.max_moves:
            return f"{moves} moves exceed max_moves={self.s.max_moves}"
        if judged_by is None and gain < self.s.min_gain:
            return f"expected gain {gain:.3g} below min_gain {self.s.min_gain}"
        return None


class HoldList:
    """Units whose move did not help stay where they are for a while."""

    def __init__(self, hold_rounds: int, churn_rounds: int = 0) -> None:
        self.hold_rounds, self.churn_rounds = hold_rounds, churn_rounds
        self.until: dict[int, int] = {}  # unit -> last round it is held
        self.last_moved: dict[int, int] = {}  # unit -> round of its last move
        self.pending: tuple[list[int], float] | None = None  # last move: units, variance before

    def moved(self, units: list[int], variance_before: float, round_now: int = 0) -> None:
        """Record a move, to be judged next round."""
        self.pending = (units, variance_before)
        for u in units:
            self.last_moved[int(u)] = round_now

    def judge(self, variance_now: float, round_now: int) -> None:
        """Hold the last move's units when the mean node-load variance did not fall."""
        p, self.pending = self.pending, None
        if p is None or self.hold_rounds <= 0:
            return
        if variance_now >= p[1] - 1e-12:
            for u in p[0]:
                self.until[int(u)] = round_now + self.hold_rounds
        self.until = {u: r for u, r in self.until.items() if r >= round_now}  # bounded
        horizon = round_now - self.churn_rounds
        self.last_moved = {u: r for u, r in self.last_moved.items() if r >= horizon}

    def filter(
        self, new: NDArray[np.int64], assign: NDArray[np.int64], round_now: int
    ) -> list[int]:
        """Undo the proposed moves of held units in ``new``, and of units moved in the last
        ``churn_rounds`` rounds; returns those units (a global step's plan is not filtered).

        A move after which the variance did not fall holds its units ``hold_rounds`` rounds:

        >>> h = HoldList(hold_rounds=3)
        >>> h.moved([0], 1.0, round_now=5)
        >>> h.judge(1.2, round_now=6)  # the variance rose: unit 0 stays put through round 9
        >>> new, old = np.array([1, 1]), np.array([0, 0])
        >>> h.filter(new.copy(), old, round_now=9), h.filter(new.copy(), old, 10)
        ([0], [])
        >>> h.moved([1], 1.0, round_now=10)
        >>> h.judge(0.8, round_now=11)  # it fell: unit 1 may move again
        >>> h.filter(new.copy(), old, round_now=11)
        []

        >>> h = HoldList(hold_rounds=0, churn_rounds=2)
        >>> h.moved([0], 1.0, round_now=5)
        >>> new, old = np.array([1, 1]), np.array([0, 0])
        >>> h.filter(new.copy(), old, round_now=7), h.filter(new.copy(), old, 8)
        ([0], [])
        """
        recent = {u for u, r in self.last_moved.items() if round_now - r <= self.churn_rounds}
        held = {u for u, r in self.until.items() if r >= round_now} | recent
        held_list = sorted(u for u in held if new[u] != assign[u])
        new[held_list] = assign[held_list]
        return held_list
