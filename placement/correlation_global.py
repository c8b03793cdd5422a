"""The global step of correlation placement (Borealis), run once after warm-up.

Xing, Zdonik, Hwang, ICDE 2005, as restated in the project's algorithm spec: the global
greedy (``placement.correlation.global_greedy``), one one-way pass over the imbalanced pairs,
the correlation improvement over node pairs with rho < 0.8, then trimtab's variance descent
(``placement.variance_descent``). The pair-wise rounds that follow are in
``placement.correlation``.
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import NDArray

from core import loadstats
from placement.correlation import (
    DEFAULTS,
    CorrelationParams,
    global_greedy,
    imbalanced_pairs,
    one_way,
)
from placement.variance_descent import reduce_variance

__all__ = ["IMPROVE_FLOOR", "improve_correlation", "initial_placement"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]
IMPROVE_FLOOR = 10_000  # correlation improvement may always re-place this many units


def improve_correlation(
    unit_x: Array, assign: IntArray, capacity: Array, p: CorrelationParams = DEFAULTS
) -> int:
    """Borealis' correlation improvement: the node pairs with rho < 0.8, lowest first, each
    re-placed with the greedy on its two nodes and kept when their correlation rose; a kept
    pair's nodes drop their other pairs and re-enter with the pairs still below 0.8. At most
    ``n^2 / 2`` attempts, and (trimtab's bound for scale) once the attempts have re-placed
    ``p.improve_units`` times all units (at least ``IMPROVE_FLOOR``) no more: the variance
    descent that follows does the fine work. Returns the number of re-placements kept
    (mutates ``assign``)."""
    n = capacity.size
    nx = loadstats.node_series(unit_x, assign, n)
    c = loadstats.correlation(nx)
    version = np.zeros(n, dtype=np.int64)  # a pair entry is stale once a node of it changed
    heap = [
        (float(c[i, j]), i, j, 0, 0)
        for i in range(n)
        for j in range(i + 1, n)
        if c[i, j] < p.improve_threshold
    ]
    heapq.heapify(heap)
    kept = attempts = replaced = 0
    budget = max(p.improve_units * unit_x.shape[0], IMPROVE_FLOOR)
    while heap and attempts < max(1, n * n // 2) and replaced < budget:
        rho, i, j, vi, vj = heapq.heappop(heap)
        if vi != version[i] or vj != version[j]:
            continue
        attempts += 1
        units = np.flatnonzero((assign == i) | (assign == j))
        replaced += units.size
        trial = global_greedy(unit_x, n, capacity, p, units, np.array([i, j]))
        ni = unit_x[units[trial == i]].sum(axis=0)
        nj = unit_x[units[trial == j]].sum(axis=0)
        if loadstats.cross_correlation(ni[None, :], nj[None, :])[0, 0] <= rho + 1e-9:
            continue
        assign[units] = trial
        nx[i], nx[j] = ni, nj
        version[[i, j]] += 1
        kept += 1
        rows = loadstats.cross_correlation(nx[[i, j]], nx)  # (2, n)
        for a, row in ((i, rows[0]), (j, rows[1])):
            for o in np.flatnonzero(row < p.improve_threshold):
                if o not in (i, j) or (a == i and o == j):
                    lo, hi = (a, int(o)) if a < o else (int(o), a)
                    heapq.heappush(heap, (float(row[o]), lo, hi, version[lo], version[hi]))
    return kept


def initial_placement(
    unit_x: Array, capacity: Array, p: CorrelationParams = DEFAULTS, improve: bool = True
) -> IntArray:
    """Global greedy, a one-way pass over imbalanced pairs, correlation improvement, then the
    variance descent (``placement.variance_descent``, ``p.refine_steps`` steps at most)."""
    n = capacity.size
    a = global_greedy(unit_x, n, capacity, p)
    if unit_x.shape[1] >= p.min_samples:
        node_mean = loadstats.means(loadstats.node_series(unit_x, a, n)) / capacity
        for s, r in imbalanced_pairs(node_mean, None, p.pair_threshold):
            one_way(unit_x, a, s, r, capacity, p)
        if improve:
            improve_correlation(unit_x, a, capacity, p)
        if p.refine_steps > 0:
            reduce_variance(
                unit_x, a, capacity, p.pair_threshold, p.load_threshold, int(p.refine_steps)
            )
    return a
