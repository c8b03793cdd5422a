"""The stale-placement trigger: run the global step again when the placement has gone stale.

trimtab's extension, not Borealis (whose global step runs once, after the warm-up). After a
global step the trigger remembers what it achieved on its window: the mean node-load variance
and the mean pairwise node-load correlation. When, over ``rounds`` consecutive control rounds,
the current window's variance exceeds ``factor`` x that (floored at ``var_floor``) or its
distance from perfect correlation, ``1 - corr``, exceeds ``factor`` x that (floored at
``corr_floor``), the trigger fires and the placement method runs its global step again. Off
(``enabled`` False), the single Borealis global step is all there is.
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
    """

    factor: float = 2.0
    rounds: int = 3
    var_floor: float = 1e-4
    corr_floor: float = 0.05
    enabled: bool = True
    base_var: float | None = None
    base_corr: float | None = None
    worse: int = 0

    def rebase(self, summary: dict[str, float]) -> None:
        """Remember what a global step achieved (``loadstats.node_summary`` of its plan)."""
        self.base_var = summary["node_variance_mean"]
        self.base_corr = summary["node_correlation_mean"]
        self.worse = 0

    def observe(self, summary: dict[str, float]) -> str | None:
        """One control round's node summary; the reason when the trigger fires, else None."""
        if not self.enabled or self.base_var is None or self.base_corr is None:
            return None
        var, corr = summary["node_variance_mean"], summary["node_correlation_mean"]
        var_limit = self.factor * max(self.base_var, self.var_floor)
        gap_limit = self.factor * max(1.0 - self.base_corr, self.corr_floor)
        if var > var_limit:
            why = f"node-load variance {var:.3g} > {self.factor:g} x {self.base_var:.3g}"
        elif 1.0 - corr > gap_limit:
            why = (
                f"node-load correlation {corr:.3g}: 1 - corr > {self.factor:g} x "
                f"{1.0 - self.base_corr:.3g}"
            )
        else:
            self.worse = 0
            return None
        self.worse += 1
        if self.worse < self.rounds:
            return None
        self.worse = 0
        return f"{why} for {self.rounds} rounds"
