"""Baseline placements (Borealis ``LMStaticDistributor``): LLF, random, connected.

* **LLF** (largest load first): operators by mean load, descending, each to the node with the
  lowest capacity-relative load.
* **Random**: operators in random order, each to the node with the fewest operators.
* **Connected**: take the heaviest unplaced operator and grow a connected group from it by
  breadth-first search while the target node stays at or below the average load ("keep chains
  together"); start each group on the least-loaded node.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

__all__ = ["connected", "inter_node_arcs", "llf", "random_placement"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


def llf(
    load: Array,
    capacity: Array,
    alive: NDArray[np.bool_] | None = None,
    base: Array | None = None,
) -> IntArray:
    """Largest-load-first onto the least capacity-relative loaded live node (ties: lowest id).

    ``base`` is load already on each node (from units that are not being placed).

    Examples
    --------
    >>> llf(np.array([1.0, 3.0, 2.0]), np.ones(2)).tolist()
    [1, 0, 1]
    """
    live = np.flatnonzero(np.ones(capacity.size, bool) if alive is None else alive)
    node = np.zeros(capacity.size) if base is None else np.asarray(base, float).copy()
    out = np.zeros(load.size, dtype=np.int64)
    for u in np.argsort(-load, kind="stable"):
        j = live[np.argmin(node[live] / capacity[live])]
        out[u] = j
        node[j] += load[u]
    return out


def random_placement(m: int, n: int, seed: int = 0) -> IntArray:
    """Random order, each operator to the node with the fewest operators (ties: lowest id)."""
    rng = np.random.default_rng([seed, 0x2A2D])  # salted: independent of workload streams
    count = np.zeros(n, dtype=np.int64)
    out = np.zeros(m, dtype=np.int64)
    for u in rng.permutation(m):
        j = int(np.argmin(count))
        out[u] = j
        count[j] += 1
    return out


def connected(load: Array, capacity: Array, edges: IntArray) -> IntArray:
    """Connected load balancing: BFS groups of neighbours on one node up to the average load.

    Examples
    --------
    >>> connected(np.ones(4), np.ones(2), np.array([[0, 1], [2, 3]])).tolist()
    [0, 0, 1, 1]
    """
    m, n = load.size, capacity.size
    adj: list[list[int]] = [[] for _ in range(m)]
    for a, b in np.asarray(edges).reshape(-1, 2):
        adj[int(a)].append(int(b))
        adj[int(b)].append(int(a))
    target = load.sum() / capacity.sum()
    node = np.zeros(n)
    out = np.full(m, -1, dtype=np.int64)
    for start in np.argsort(-load, kind="stable"):
        if out[start] >= 0:
            continue
        j = int(np.argmin(node / capacity))
        queue = deque([int(start)])
        while queue:
            u = queue.popleft()
            if out[u] >= 0:
                continue
            if u != start and node[j] + load[u] > target * capacity[j] + 1e-12:
                continue
            out[u] = j
            node[j] += load[u]
            queue.extend(v for v in adj[u] if out[v] < 0)
    return out


def inter_node_arcs(edges: IntArray, assign: IntArray) -> int:
    """Number of unit arcs whose ends sit on different nodes (a bandwidth proxy)."""
    e = np.asarray(edges).reshape(-1, 2)
    return int(np.count_nonzero(assign[e[:, 0]] != assign[e[:, 1]])) if e.size else 0
