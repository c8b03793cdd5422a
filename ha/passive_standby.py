"""Passive standby: periodic checkpoints to a standby placed apart from its primary.

Hwang et al. (ICDE 2005): the primary checkpoints its state every k batches (or ticks); on
failure the standby loads the last checkpoint and replays what came after it. The interval
follows Young/Daly, ``interval ~ sqrt(2 * checkpoint_cost * MTBF)``, from the measured
checkpoint cost and failure rate, bounded by configuration. Standbys go to a node other than
the primary, spread so that no node backs up more than its share.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["place_standbys", "young_daly_batches"]


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
