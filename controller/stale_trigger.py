"""The stale-placement trigger: re-place when the placement has gone stale.

trimtab's extension, not Borealis (whose global step runs once, after the warm-up). After a
global step the trigger remembers what it achieved on its window: the mean node-load variance
and the mean pairwise node-load correlation. It fires when, over ``rounds`` consecutive control
rounds, the current window's variance exceeds ``factor`` x that (floored at ``var_floor``), its
distance from perfect correlation, ``1 - corr``, exceeds ``factor`` x that (floored at
``corr_floor``; judged only where the node loads vary, their variance at least ``var_floor``:
flat loads are the best a placement can give, and their correlation is noise, a constant
series counting 0), or its overload (load above 0.9 of capacity,
``placement.migration_cost.overload``) exceeds ``factor`` x ``overload_floor``. Before any
global step (another method made the initial placement) only the overload counts. Off
(``enabled`` False), the single Borealis global step is all there is.

The overload limit is absolute (``absolute_overload``, set when moves are migration-aware):
overload is what queues, and a global step that left some, as one made on a window that shows
a drift only in part does, is no level to accept. A firing costs only a search: when it leads
to no re-placement (none worth its pauses: ``held``), the baseline stays what the last global
step achieved, and the next firing of the same episode needs twice as many worse rounds (2x,
4x, ... at most ``max_backoff`` x ``rounds``); a round that is not worse ends the episode.
Without migration-aware moves every firing re-places, so the overload limit is relative, as
the others are: ``factor`` x the overload the last global step left (floored).

Two rules this replaced, both measured on ``diurnal-phase-flip``: a held firing that took the
drifted state as its new baseline never fired again when the drift, seen half-way through
the window, only doubled later (5 s rounds: never recovered); and an overload limit relative
to a global step made on a half-drifted window let that step's leftover overload stand (1 s
rounds: never recovered).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StaleTrigger"]


@dataclass
class StaleTrigger:
    """Fires when the node loads are worse than after the last global step, for long enough.

    >>> t = StaleTrigger(factor=2.0, rounds=2)
    >>> t.rebase({"node_variance_mean": 0.01, "node_correlation_mean": 0.5})
    >>> t.observe({"node_variance_mean": 0.05, "node_correlation_mean": 0.5}) is None
    True
    >>> t.observe({"node_variance_mean": 0.05, "node_correlation_mean": 0.5})
    'node-load variance 0.05 > 2 x 0.01 for 2 rounds'
    >>> t.observe({"node_variance_mean": 0.011, "node_correlation_mean": 0.6}) is None
    True

    A firing that was held (no re-placement paid) backs off: the next needs 4 worse rounds, and
    the baseline is still the global step's:

    >>> _ = [t.observe({"node_variance_mean": 0.05, "node_correlation_mean": 0.5}) for _ in "ab"]
    >>> t.held()
    >>> [t.observe({"node_variance_mean": 0.08, "node_correlation_mean": 0.5}) for _ in "abcd"]
    [None, None, None, 'node-load variance 0.08 > 2 x 0.01 for 4 rounds']

    Without a global step, a placement that overloads its nodes is stale:

    >>> u = StaleTrigger(factor=2.0, rounds=1)
    >>> u.observe({"node_variance_mean": 9.0, "node_correlation_mean": -1.0, "overload": 0.01})
    >>> u.observe({"node_variance_mean": 0.0, "node_correlation_mean": 1.0, "overload": 0.3})
    'overload 0.3 cores > 2 x 0.01 for 1 rounds'

    The limits are floored; a reason names the level it was judged against:

    >>> w = StaleTrigger(factor=2.0, rounds=1)
    >>> w.rebase({"node_variance_mean": 1e-6, "node_correlation_mean": 0.5})
    >>> w.observe({"node_variance_mean": 3e-4, "node_correlation_mean": 0.5})
    'node-load variance 0.0003 > 2 x 0.0001 for 1 rounds'

    Flat node loads (variance below the floor) are not stale, whatever their correlation, which
    for a constant series is counted 0; loads that vary are judged by it:

    >>> f = StaleTrigger(factor=2.0, rounds=1)
    >>> f.rebase({"node_variance_mean": 1e-5, "node_correlation_mean": 1.0})
    >>> f.observe({"node_variance_mean": 1e-32, "node_correlation_mean": 0.0}) is None
    True
    >>> f.observe({"node_variance_mean": 1.5e-4, "node_correlation_mean": 0.0})
    'node-load correlation 0: 1 - corr > 2 x 0.05 for 1 rounds'

    Overload a global step left is no level to accept (migration-aware); without migration-aware
    moves it is the baseline:

    >>> v = StaleTrigger(factor=2.0, rounds=1)
    >>> v.rebase({"node_variance_mean": 0.01, "node_correlation_mean": 0.5, "overload": 0.05})
    >>> v.observe({"node_variance_mean": 0.01, "node_correlation_mean": 0.5, "overload": 0.05})
    'overload 0.05 cores > 2 x 0.01 for 1 rounds'
    >>> v.absolute_overload = False
    >>> v.observe({"node_variance_mean": 0.01, "node_correlation_mean": 0.5, "overload": 0.05})
    """

    factor: float = 2.0
    rounds: int = 3
    var_floor: float = 1e-4
    corr_floor: float = 0.05
    overload_floor: float = 0.01
    enabled: bool = True
    max_backoff: int = 8
    absolute_overload: bool = True
    base_var: float | None = None
    base_corr: float | None = None
    base_overload: float = 0.0
    worse: int = 0
    holds: int = 0  # firings of this episode that led to no re-placement

    @property
    def needed(self) -> int:
        """Consecutive worse rounds the next firing needs."""
        return self.rounds * min(2**self.holds, self.max_backoff)

    def held(self) -> None:
        """The last firing led to no re-placement: keep the baseline, back off."""
        self.holds += 1
        self.worse = 0

    def rebase(self, summary: dict[str, float]) -> None:
        """Remember what a global step achieved (``loadstats.node_summary`` of its plan)."""
        self.base_var = summary["node_variance_mean"]
        self.base_corr = summary["node_correlation_mean"]
        self.base_overload = summary.get("overload", 0.0)
        self.worse = self.holds = 0

    def observe(self, summary: dict[str, float]) -> str | None:
        """One control round's node summary; the reason when the trigger fires, else None."""
        if not self.enabled:
            return None
        over = summary.get("overload", 0.0)
        floor = self.overload_floor
        base = floor if self.absolute_overload else max(self.base_overload, floor)
        over_limit = self.factor * base
        if self.base_var is not None and self.base_corr is not None:
            var, corr = summary["node_variance_mean"], summary["node_correlation_mean"]
            var_limit = self.factor * max(self.base_var, self.var_floor)
            gap_limit = self.factor * max(1.0 - self.base_corr, self.corr_floor)
        else:  # no global step yet: only overload counts
            var, corr, var_limit, gap_limit = 0.0, 1.0, 1.0, 1.0
        if var > var_limit:
            why = f"node-load variance {var:.3g} > {self.factor:g} x {var_limit / self.factor:.3g}"
        elif var >= self.var_floor and 1.0 - corr > gap_limit:  # flat loads: no correlation
            why = (
                f"node-load correlation {corr:.3g}: 1 - corr > {self.factor:g} x "
                f"{gap_limit / self.factor:.3g}"
            )
        elif over > over_limit:
            base_s = (
                f"{floor:g}"
                if self.absolute_overload
                else f"max({self.base_overload:.3g}, {floor:g})"
            )
            why = f"overload {over:.3g} cores > {self.factor:g} x {base_s}"
        else:
            self.worse = self.holds = 0
            return None
        self.worse += 1
        needed = self.needed
        if self.worse < needed:
            return None
        self.worse = 0
        return f"{why} for {needed} rounds"
