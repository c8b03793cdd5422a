"""The simulator as a long-running substrate: each observation advances a round of ticks.

When the scenario ends it starts again from its first tick under the current plan, so a
daemon can steer it until stopped.
"""

from __future__ import annotations

from collections.abc import Callable

from core.observation import Observation
from core.plans import Plan
from simulator.model import Simulator

__all__ = ["LoopingSimulator"]


class LoopingSimulator:
    """``observe()`` advances ``ticks`` simulated ticks; the scenario repeats when it ends."""

    def __init__(self, make: Callable[[], Simulator], ticks: int) -> None:
        if ticks < 1:
            raise ValueError(f"ticks: a round advances at least one tick (got {ticks})")
        self._make = make
        self.sim = make()
        self.ticks = ticks
        self.plan: Plan | None = None
        self.cycles = 0

    def observe(self) -> Observation:
        """Advance one round of simulated time and report it."""
        if self.sim.done:
            self.sim = self._make()
            self.cycles += 1
            if self.plan is not None:
                self.sim.apply(self.plan)
        self.sim.step(self.ticks)
        return self.sim.observe()

    def apply(self, plan: Plan) -> None:
        """Adopt the plan (the simulator keeps applying it until the next one)."""
        self.plan = plan
        self.sim.apply(plan)
