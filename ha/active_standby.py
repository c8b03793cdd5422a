"""Active standby: every unit also runs on a replica node (the fast-recovery baseline).

Hwang et al. (ICDE 2005): the replica processes the same input and buffers its output; on
failure it takes over at once (recovery is about detection time), at the cost of roughly twice
the processing. Replicas are placed like passive standbys (never on the primary, spread).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ha.passive_standby import place_standbys

__all__ = ["place_replicas", "replica_load"]


def place_replicas(
    primary: NDArray[np.int64],
    load: NDArray[np.float64],
    n: int,
    alive: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """Replica node of each unit (apart from its primary, load-spread)."""
    return place_standbys(primary, load, n, alive)


def replica_load(
    replica: NDArray[np.int64], load: NDArray[np.float64], n: int
) -> NDArray[np.float64]:
    """Extra load each node carries for the replicas it hosts.

    Examples
    --------
    >>> replica_load(np.array([1, 1, 0]), np.array([1.0, 2.0, 3.0]), 2).tolist()
    [3.0, 3.0]
    """
    return np.bincount(replica, weights=load, minlength=n).astype(float)
