"""The simulator's running nodes: which nodes a plan keeps, when a joining node is ready, and
what the run pays for them.

A plan's ``scale`` names how many nodes run (the first k). A node that joins is paid for at
once but serves nothing for ``node_startup_s`` (its units queue meanwhile); a node that leaves
stops at the plan that releases it (the plan has moved its units and their backlog away).
``node_seconds`` is the resource cost: running nodes times seconds, start-up included.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["NodePool"]


class NodePool:
    """Running and ready nodes over ticks, with the run's scale actions and node-seconds."""

    def __init__(self, n: int, tick_s: float, startup_s: float) -> None:
        self.n, self.tick_s = n, tick_s
        self.startup_ticks = max(0, round(startup_s / tick_s))
        self.running = np.ones(n, dtype=bool)
        self.ready_at = np.zeros(n, dtype=np.int64)
        self.actions = 0
        self.node_seconds = 0.0
        self.applied = False

    def apply(self, active: NDArray[np.bool_], t: int) -> None:
        """Adopt a plan's running set at tick ``t`` (the first plan sets it without a start-up:
        the nodes were deployed with the job)."""
        joining = active & ~self.running
        if self.applied and (joining.any() or (self.running & ~active).any()):
            self.actions += 1
            self.ready_at[joining] = t + self.startup_ticks
        self.running = active.copy()
        self.applied = True

    def ready(self, t: int) -> NDArray[np.bool_]:
        """Nodes that run and have started by tick ``t``."""
        return self.running & (self.ready_at <= t)

    def startup_left_s(self, t: int) -> NDArray[np.float64]:
        """Seconds until each running node has started (0 when ready or not running)."""
        left = np.maximum(self.ready_at - t, 0) * self.tick_s
        return np.where(self.running, left, 0.0).astype(float)

    def tick(self) -> int:
        """Charge one tick of the running nodes; returns how many run."""
        k = int(self.running.sum())
        self.node_seconds += k * self.tick_s
        return k
