"""When to change the node count: DS2's estimate behind a cooldown, bounds and a scale-in hold.

Each round takes DS2's estimate (``scaling.ds2``) of the nodes the observed input needs at the
target utilization, clipped to ``[min_nodes, max_nodes]``:
* more than running: scale out to it at once (DS2 jumps, it does not step);
* fewer: scale in only after the estimate stayed below the running count for
  ``scale_in_rounds`` rounds, to the largest estimate of that low period;
* no change within ``cooldown_rounds`` rounds of the last one (the new layout's load must be
  measured before it is judged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scaling.ds2 import needed_cores, nodes_for, true_rate

__all__ = ["Autoscaler", "AutoscalerParams", "ScaleDecision"]


@dataclass(frozen=True)
class AutoscalerParams:
    """Target utilization, bounds, cooldown and the scale-in hold (in rounds)."""

    target_utilization: float = 0.7
    min_nodes: int = 1
    max_nodes: int = 1
    cooldown_rounds: int = 1
    scale_in_rounds: int = 6

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1:
            raise ValueError(
                f"target_utilization: must lie in (0, 1], got {self.target_utilization}"
            )
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(
                f"min_nodes: {self.min_nodes} must lie in [1, max_nodes = {self.max_nodes}]"
            )


@dataclass(frozen=True)
class ScaleDecision:
    """The node count to run (``nodes`` equals the running count when nothing changes)."""

    nodes: int
    changed: bool
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)


class Autoscaler:
    """The scaling rule with its memory (rounds since the last change, the low period)."""

    def __init__(self, params: AutoscalerParams) -> None:
        self.p = params
        self.round = 0
        self.last_change = -(10**9)
        self.low_rounds = 0
        self.low_max = 0

    def decide(
        self,
        running: int,
        input_rate: float,
        rows: float,
        busy_core_s: float,
        capacities: NDArray[np.float64],
    ) -> ScaleDecision:
        """One round: ``input_rate`` (rows/s arriving), ``rows`` processed in ``busy_core_s``
        busy core-seconds since the last round, ``capacities`` of the nodes in order."""
        self.round += 1
        rate = true_rate(rows, busy_core_s)
        nums: dict[str, Any] = {
            "running": running,
            "input_rate": round(float(input_rate), 3),
            "rows": round(float(rows), 3),
            "busy_core_s": round(float(busy_core_s), 4),
        }
        if rate is None:
            return ScaleDecision(running, False, "scaling: no busy time measured yet", nums)
        cores = needed_cores(input_rate, rate)
        cap = np.asarray(capacities, dtype=float)[: self.p.max_nodes]
        want = max(self.p.min_nodes, nodes_for(cores, cap, self.p.target_utilization))
        nums.update(true_rate=round(rate, 3), needed_cores=round(cores, 4), estimate=want)
        ceiling = cores > cap.sum() * self.p.target_utilization
        at = f"{want} node(s) for {cores:.2f} cores at {self.p.target_utilization:.0%} target"
        if want < running:
            self.low_rounds += 1
            self.low_max = max(self.low_max, want)
        else:
            self.low_rounds, self.low_max = 0, 0
        if self.round - self.last_change <= self.p.cooldown_rounds:
            return ScaleDecision(running, False, f"scaling: cooldown; estimate {at}", nums)
        if want > running:
            return self._change(running, want, f"scaled out {running} -> {want}: {at}", nums)
        if want < running and self.low_rounds >= self.p.scale_in_rounds:
            k = self.low_max
            why = f"scaled in {running} -> {k}: below {running} for {self.low_rounds} rounds; {at}"
            return self._change(running, k, why, nums)
        why = f"scaling: {running} node(s) kept; estimate {at}"
        if want < running:
            why += f" (low for {self.low_rounds}/{self.p.scale_in_rounds} rounds)"
        if ceiling:
            why += "; at the ceiling, shedding decides the rest"
        return ScaleDecision(running, False, why, {**nums, "at_ceiling": ceiling})

    def _change(self, running: int, to: int, why: str, nums: dict[str, Any]) -> ScaleDecision:
        self.last_change = self.round
        self.low_rounds, self.low_max = 0, 0
        return ScaleDecision(to, True, why, {**nums, "from": running, "to": to})
