"""DS2's parallelism estimate: Kalavri et al., "Three steps is all you need: fast, accurate,
automatic scaling decisions for distributed streaming dataflows", OSDI 2018.

An operator's *true processing rate* is what it processes per second of useful time:
``true_rate = rows_processed / busy_seconds`` (rows per busy core-second), measured, so it
holds whether the operator is idle, keeping up or backlogged. The parallelism that keeps up
with an observed input rate ``lambda`` at a target utilization ``u`` is then the fewest
instances whose capacity covers ``lambda / true_rate / u`` cores. Estimating from true rates
rather than observed ones is what lets DS2 jump to the right parallelism in one step instead of
probing.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["needed_cores", "nodes_for", "true_rate"]


def true_rate(rows: float, busy_core_s: float) -> float | None:
    """Rows per busy core-second; None without a measurement (nothing busy, or nothing
    finished yet).

    >>> true_rate(5000, 2.5), true_rate(0, 0.0), true_rate(0, 1.0)
    (2000.0, None, None)
    """
    if not (busy_core_s > 0 and rows > 0):
        return None
    return float(rows) / float(busy_core_s)


def needed_cores(input_rate: float, rate: float) -> float:
    """Cores the observed input rate needs at the measured true rate.

    >>> needed_cores(3000.0, 2000.0)
    1.5
    """
    if not rate > 0:
        raise ValueError(f"true rate: must be > 0, got {rate}")
    return max(0.0, float(input_rate)) / rate


def nodes_for(cores: float, capacities: NDArray[np.float64], target: float) -> int:
    """The fewest nodes, taken in order, whose capacity at ``target`` utilization covers
    ``cores``; every node when even all of them do not (the ceiling).

    >>> nodes_for(1.5, np.ones(4), 0.7), nodes_for(0.0, np.ones(4), 0.7)
    (3, 1)
    >>> nodes_for(9.0, np.ones(4), 0.7)
    4
    """
    if not 0 < target <= 1:
        raise ValueError(f"target utilization: must lie in (0, 1], got {target}")
    room = np.cumsum(np.asarray(capacities, dtype=float)) * target
    k = int(np.searchsorted(room, cores - 1e-12, side="left")) + 1
    return max(1, min(k, room.size)) if math.isfinite(cores) else room.size
