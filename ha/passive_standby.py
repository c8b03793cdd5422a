"""Passive standby: periodic checkpoints to a standby placed apart from its primary.

Hwang et al. (ICDE 2005): the primary checkpoints its state every k batches (or ticks); on
failure the standby loads the last checkpoint and replays what came after it. The interval
follows Young/Daly, ``interval ~ sqrt(2 * checkpoint_cost * MTBF)``, from the measured
checkpoint cost and failure rate, bounded by configuration. Standbys go to a node other than
the primary, spread so that no node backs up more than its share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["CheckpointCadence", "place_standbys", "young_daly_batches"]


def young_daly_batches(
    checkpoint_cost_s: float, mtbf_s: float, batch_s: float, lo: int = 1, hi: int = 100
) -> int:
    """Checkpoint every k batches with ``k = sqrt(2 C MTBF) / batch``, clamped to [lo, hi].

    Examples
    --------
    >>> young_daly_batches(0.5, 3600, 1.0)
    60
    >>> young_daly_batches(0.5, 3600, 1.0, hi=20)
    20
    """
    if checkpoint_cost_s < 0 or mtbf_s <= 0 or batch_s <= 0:
        raise ValueError("checkpoint_cost_s >= 0, mtbf_s > 0 and batch_s > 0 are required")
    k = round(math.sqrt(2.0 * checkpoint_cost_s * mtbf_s) / batch_s)
    return int(min(hi, max(lo, k)))


@dataclass
class CheckpointCadence:
    """When to checkpoint next: Young/Daly on the measured checkpoint cost and batch time.

    Starts at ``k`` batches; after every checkpoint the cost (and, every batch, the batch
    duration) enter exponentially weighted means, and ``k`` becomes
    ``young_daly_batches(cost, mtbf_s, batch)`` within ``[lo, hi]``.

    Examples
    --------
    >>> c = CheckpointCadence(mtbf_s=3600, k=2)
    >>> [c.batch_done(1.0) for _ in range(2)]
    [False, True]
    >>> c.checkpointed(0.5)  # sqrt(2 * 0.5 * 3600) / 1 = 60, capped at hi = 50
    50
    >>> c = CheckpointCadence(mtbf_s=60, k=2)
    >>> _ = c.batch_done(2.0); _ = c.batch_done(2.0)
    >>> c.checkpointed(0.2)  # sqrt(2 * 0.2 * 60) / 2 = 2.4
    2
    """

    mtbf_s: float
    k: int = 2
    lo: int = 1
    hi: int = 50
    alpha: float = 0.3
    cost_s: float | None = None
    batch_s: float | None = None
    since: int = 0

    def __post_init__(self) -> None:
        if self.mtbf_s <= 0:
            raise ValueError(f"mtbf_s: {self.mtbf_s} must be > 0")
        if not 1 <= self.lo <= self.k <= self.hi:
            raise ValueError(f"k: {self.k} must lie in [lo={self.lo}, hi={self.hi}]")

    def _mean(self, old: float | None, new: float) -> float:
        return new if old is None else (1 - self.alpha) * old + self.alpha * new

    def batch_done(self, duration_s: float) -> bool:
        """Record a batch; True when a checkpoint is due after it."""
        self.batch_s = self._mean(self.batch_s, max(duration_s, 1e-3))
        self.since += 1
        return self.since >= self.k

    def checkpointed(self, cost_s: float) -> int:
        """Record a checkpoint's cost; returns the new interval ``k`` in batches."""
        self.cost_s = self._mean(self.cost_s, max(cost_s, 0.0))
        self.since = 0
        self.k = young_daly_batches(self.cost_s, self.mtbf_s, self.batch_s or 1.0, self.lo, self.hi)
        return self.k


def place_standbys(
    primary: NDArray[np.int64],
    load: NDArray[np.float64],
    n: int,
    alive: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """A standby node for each unit: never its primary, heaviest units first onto the node with
    the least standby load.

    Examples
    --------
    >>> place_standbys(np.array([0, 0, 1]), np.array([3.0, 1.0, 2.0]), 2).tolist()
    [1, 1, 0]
    """
    ok = np.ones(n, dtype=bool) if alive is None else alive.copy()
    if ok.sum() < 2:
        raise ValueError("standbys need at least two live nodes")
    backup = np.zeros(n)
    out = np.empty(primary.size, dtype=np.int64)
    for u in np.argsort(-load, kind="stable"):
        cand = np.flatnonzero(ok & (np.arange(n) != primary[u]))
        j = int(cand[np.argmin(backup[cand])])
        out[u] = j
        backup[j] += load[u]
    return out
