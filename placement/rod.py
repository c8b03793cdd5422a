"""Resilient Operator Distribution (ROD).

Xing, Hwang, Cetintemel, Zdonik, "Providing Resiliency to Load Variations in Distributed
Stream Processing", VLDB 2006 (Borealis ``LMStaticDistributor``). One static placement whose
feasible set of input rates is as large as possible:

1. normalise each operator's load-coefficient row by the stream totals, ``p_j = l_j / l``;
2. visit operators by decreasing ``||p_j||``;
3. put each on a *Class I* node (``P_i + p_j <= C_i / C_T`` on every axis) if any, preferring
   the one with the most already-placed graph neighbours; otherwise on the node with the
   largest resulting plane distance (smallest ``||P'_i / C_i|| / (1 - P'_i . b / C_i)``);
   remaining ties go to a seeded random choice.

A lexicographic key replaces the reference's additive 10000 penalties. ``b`` is an optional
lower bound on the workload (average or minimum rates), normalised by ``l_k / n``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["normalized_coefficients", "rod"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


def normalized_coefficients(coeff: Array) -> tuple[Array, NDArray[np.bool_]]:
    """``p = coeff / column sums`` with zero-load streams dropped (returns p and the kept mask)."""
    tot = coeff.sum(axis=0)
    keep = tot > 0
    return coeff[:, keep] / tot[keep], keep


def _neighbours(m: int, edges: IntArray | None) -> list[list[int]]:
    """Each unit's neighbours along the unit arcs (both directions)."""
    nbrs: list[list[int]] = [[] for _ in range(m)]
    if edges is not None:
        for a, c in np.asarray(edges).reshape(-1, 2):
            nbrs[int(a)].append(int(c))
            nbrs[int(c)].append(int(a))
    return nbrs


def rod(
    coeff: Array,
    capacity: Array,
    edges: IntArray | None = None,
    lower_bound: Array | None = None,
    seed: int = 0,
) -> IntArray:
    """ROD placement of units with load coefficients ``coeff`` (m, d) on nodes with ``capacity``.

    Parameters
    ----------
    coeff : (m, d) CPU-seconds per tuple of each stream
    capacity : (n,) node capacities
    edges : (e, 2) unit arcs, for the neighbour preference among Class I nodes
    lower_bound : (d,) rates b; None for b = 0
    seed : tie-breaking seed

    Examples
    --------
    Two streams, each a chain of two unit-cost operators, on two nodes: ROD cuts both chains.

    >>> c = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]])
    >>> a = rod(c, np.ones(2), np.array([[0, 1], [2, 3]]))
    >>> bool(a[0] != a[1] and a[2] != a[3])
    True
    """
    m = coeff.shape[0]
    n = capacity.size
    p, keep = normalized_coefficients(coeff)
    share = capacity / capacity.sum()
    b = np.zeros(p.shape[1])
    if lower_bound is not None:
        tot = coeff.sum(axis=0)[keep]
        b = np.asarray(lower_bound, float)[keep] * tot / n  # normalised by l_k / n
    order = np.argsort(-np.linalg.norm(p, axis=1), kind="stable")
    P = np.zeros((n, p.shape[1]))
    placed = np.full(m, -1, dtype=np.int64)
    nbrs = _neighbours(m, edges)
    rng = np.random.default_rng([seed, 0x20D])  # salted: independent of workload streams
    for j in order:
        cand = P + p[j]
        cls1 = np.all(cand <= share[:, None] + 1e-12, axis=1)
        scaled = cand / capacity[:, None]
        slack = 1.0 - scaled @ b
        base = np.where(
            slack > 0, np.linalg.norm(scaled, axis=1) / np.where(slack > 0, slack, 1), np.inf
        )
        conn = np.zeros(n)
        for nb in nbrs[j]:
            if placed[nb] >= 0:
                conn[placed[nb]] += 1
        conn = np.where(cls1, conn, 0.0)  # neighbour preference only among Class I nodes
        tie = rng.random(n)
        i = int(np.lexsort((tie, np.round(base, 12), -conn, ~cls1))[0])
        placed[j] = i
        P[i] += p[j]
    return placed
