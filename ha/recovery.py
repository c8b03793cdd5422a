"""Recovery after a loss: re-place the lost units on the survivors, shed any shortfall.

Borealis / Flux (Shah et al., SIGMOD 2004): after a failure the lost operators are re-placed on
the surviving nodes with the placement algorithms (largest load first onto the least-loaded
survivor), and when the survivors cannot carry the load the shedding LP restores feasibility.
The recovery time is detection plus restore plus replay, recorded per fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["Placer", "RecoveryPlan", "recovery_time", "replace_lost"]

Placer = Callable[
    [NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]],
    NDArray[np.int64],
]
"""(unit loads, node capacities, alive nodes, node base loads) -> a node per unit, e.g.
``placement.baselines.llf``: ``ha`` does not import ``placement``, its caller chooses."""


@dataclass(frozen=True)
class RecoveryPlan:
    """New assignment, the units moved, and the capacity shortfall (cores) left on survivors."""

    assignment: NDArray[np.int64]
    moved: NDArray[np.int64]
    shortfall: float


def replace_lost(
    assign: NDArray[np.int64],
    alive: NDArray[np.bool_],
    load: NDArray[np.float64],
    capacity: NDArray[np.float64],
    place: Placer,
) -> RecoveryPlan:
    """Units on dead nodes are placed on the survivors by ``place`` (Borealis: least-loaded
    first, heaviest unit first, ``placement.baselines.llf``).

    Examples
    --------
    >>> from placement.baselines import llf
    >>> r = replace_lost(np.array([0, 1, 1]), np.array([True, False]), np.array([0.5, 0.4, 0.3]), np.ones(2), llf)
    >>> r.assignment.tolist(), r.moved.tolist(), round(r.shortfall, 6)
    ([0, 0, 0], [1, 2], 0.2)
    """
    lost = np.flatnonzero(~alive[assign])
    out = assign.copy()
    if lost.size and alive.any():
        keep = np.ones(assign.size, dtype=bool)
        keep[lost] = False
        base = np.bincount(assign[keep], weights=load[keep], minlength=capacity.size)
        out[lost] = place(load[lost], capacity, alive, base)
    node = np.bincount(out, weights=load, minlength=capacity.size)
    short = float(np.clip(node - capacity * alive, 0.0, None).sum())
    return RecoveryPlan(out, lost, short)


def recovery_time(
    detection_s: float, restore_s: float, replay_work_s: float, spare_capacity: float
) -> float:
    """Detection + restore + the time spare capacity needs to redo the replayed work.

    Examples
    --------
    >>> recovery_time(3.0, 0.5, 2.0, 0.5)
    7.5
    """
    if spare_capacity <= 0:
        return float("inf")
    return detection_s + restore_s + replay_work_s / spare_capacity
