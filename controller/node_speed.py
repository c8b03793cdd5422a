"""Node capacities as measured: each partition's speed from the batches it ran.

The scenario declares a node's capacity; on Spark a partition's real speed is only known once
it has run batches (a slow executor, a CPU share, ``spark.partition_speeds``). Each round the
policy folds the fresh batches' rows and busy seconds per partition into a smoothed speed
(``partitioners.micro_batch.NodeSpeeds``: rows per busy second, mean 1), and placement and
shedding plan with ``nominal x speed`` once the speeds spread by more than
``placement.speed_tolerance`` from equal. Within the tolerance (or with
``placement.measured_speeds`` off, or on the simulator, which reports no batches) the nominal
capacities stand, so measurement noise never moves a unit. A partition's batch counts only
when it was busy at least ``MIN_BUSY_S``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from core.observation import Observation
from partitioners.micro_batch import NodeSpeeds

__all__ = ["MIN_BUSY_S", "MeasuredCapacity", "shape_differs"]

Array = NDArray[np.float64]

# A partition's batch counts only when it was busy this long: a task's fixed cost (tens of ms
# on these machines) would otherwise make a lightly loaded partition look slow, and placing
# by that would starve it further.
MIN_BUSY_S = 0.1


def shape_differs(a: Array, b: Array, tolerance: float) -> bool:
    """True when two capacity vectors, each scaled to mean 1, differ by more than
    ``tolerance`` on some node.

    >>> shape_differs(np.array([1.0, 1.0]), np.array([2.0, 2.0]), 0.2)
    False
    >>> shape_differs(np.array([1.0, 1.0]), np.array([0.5, 1.5]), 0.2)
    True
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size != b.size or a.size == 0:
        return a.size != b.size
    return bool(np.max(np.abs(a / a.mean() - b / b.mean())) > tolerance)


class MeasuredCapacity:
    """The controller's capacities: nominal, or nominal x measured speed when the speeds
    spread beyond ``tolerance``."""

    def __init__(self, nominal: Array, tolerance: float, enabled: bool = True) -> None:
        self.nominal = np.asarray(nominal, dtype=float)
        self.tolerance, self.enabled = tolerance, enabled
        self.speeds = NodeSpeeds(self.nominal.size)

    def observe(self, obs: Observation) -> None:
        """Fold the observation's fresh batches (a steered pipeline's; none on the simulator)."""
        n = self.nominal.size
        for b in obs.batches:
            if len(b.partition_rows) == n:
                busy = np.asarray(b.partition_busy_s, dtype=float)
                rows = np.where(busy >= MIN_BUSY_S, np.asarray(b.partition_rows, float), 0.0)
                self.speeds.update(rows, busy)

    @property
    def measured(self) -> bool:
        """True when the capacities follow the measured speeds."""
        if not (self.enabled and self.speeds.known):
            return False
        return shape_differs(np.ones(self.nominal.size), self.speeds.capacities(), self.tolerance)

    def capacities(self) -> Array:
        """Capacity per node in cores."""
        if not self.measured:
            return self.nominal.copy()
        return self.nominal * self.speeds.capacities()

    def details(self) -> dict[str, list[float]]:
        """The numbers behind the capacities, for a decision's record."""
        return {
            "speeds_measured": [round(float(s), 3) for s in self.speeds.capacities()],
            "capacities": [round(float(c), 3) for c in self.capacities()],
        }
