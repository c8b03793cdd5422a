"""Consistent Grouping (CG): equal-sized virtual workers assigned by capacity.

Nasir, Horii, Serafini, Kourtellis, Raymond, Girdzijauskas, Osogami, "Load Balancing for Skewed
Streams on Heterogeneous Clusters", arXiv 1705.09073, 2017 (reference: anisnasir/storm-simulator
``ConsistentGroupingPoRC``). ``V = R n`` virtual workers (VWs); worker i holds
``round(V C_i / C_T)`` of them (largest remainder). Routing is consistent hashing with bounded
loads (PoRC): ``v = H(k) mod V``, re-hashed with salts 1, 2, ... while the VW would exceed
``ceil((1 + eps) (messages + 1) / V)``; after V salts the least-loaded VW is used. Feedback
moves one VW (with all its keys) from each overloaded worker to an underloaded one: a worker
is overloaded above utilisation 0.9 and underloaded below 0.6 [project choice]. Without
measured utilisation, it is estimated from the window's tuple shares assuming a 75% loaded
cluster, i.e. overloaded above 1.2x and underloaded below 0.8x its fair share.
"""

from __future__ import annotations

import numpy as np

from core.jit import njit
from partitioners.base import Array, IntArray, as_keys, mix64_mod

__all__ = ["ConsistentGrouping", "vw_counts"]


def vw_counts(capacities: Array, v: int) -> IntArray:
    """VWs per worker proportional to capacity, largest-remainder rounding.

    Examples
    --------
    >>> vw_counts(np.array([1.0, 1.0, 2.0]), 8).tolist()
    [2, 2, 4]
    """
    exact = v * capacities / capacities.sum()
    base = np.floor(exact).astype(np.int64)
    rest = v - int(base.sum())
    order = np.lexsort((np.arange(exact.size), -(exact - base)))
    base[order[:rest]] += 1
    return base


@njit
def _route(keys, counts, vw_worker, total, eps):  # pragma: no cover
    V = counts.size
    out = np.empty(keys.size, dtype=np.int64)
    for i in range(keys.size):
        k = keys[i]
        bound = np.ceil((1.0 + eps) * (total[0] + 1) / V)
        v = mix64_mod(k, np.int64(0), np.int64(V))
        s = 1
        while counts[v] + 1 > bound and s <= V:
            v = mix64_mod(k, np.int64(1000 + s), np.int64(V))
            s += 1
        if counts[v] + 1 > bound:
            v = np.int64(np.argmin(counts))
        counts[v] += 1
        total[0] += 1
        out[i] = vw_worker[v]
    return out


class ConsistentGrouping:
    """CG (PoRC) for one source.

    Examples
    --------
    >>> cg = ConsistentGrouping(3, capacities=np.array([1.0, 1.0, 2.0]), replicas=8)
    >>> np.bincount(cg.vw_worker, minlength=3).tolist()
    [6, 6, 12]
    """

    name = "cg"

    def __init__(
        self,
        n: int,
        seed: int = 0,
        capacities: Array | None = None,
        replicas: int = 8,
        eps: float = 0.1,
    ) -> None:
        if n < 1:
            raise ValueError(f"n: need at least one worker (got {n})")
        self.n, self.eps = n, eps
        cap = np.ones(n) if capacities is None else np.asarray(capacities, float)
        if cap.size != n or np.any(cap <= 0):
            raise ValueError("capacities: need n positive values")
        self.capacities = cap
        counts = vw_counts(cap, replicas * n)
        self.vw_worker = np.repeat(np.arange(n, dtype=np.int64), counts)
        self.counts = np.zeros(self.vw_worker.size, dtype=np.int64)
        self.total = np.zeros(1, dtype=np.int64)
        self.moves: list[tuple[int, int, int]] = []  # (vw, from, to)

    def route(self, keys: IntArray) -> IntArray:
        """Route one batch in arrival order."""
        k = as_keys(keys)
        return _route(k, self.counts, self.vw_worker, self.total, self.eps)

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
        utilization: Array | None = None,
    ) -> None:
        """End of a window: move one VW off each overloaded worker, then reset the counts."""
        if utilization is None and loads is not None:
            cap = self.capacities if capacities is None else np.asarray(capacities, float)
            share = np.asarray(loads, float) / cap
            fair = max(float(np.sum(loads)) / cap.sum(), 1e-12)
            utilization = 0.75 * share / fair
        if utilization is not None:
            u = np.asarray(utilization, float)
            over = [int(w) for w in np.argsort(-u, kind="stable") if u[w] > 0.9]
            under = [int(w) for w in np.argsort(u, kind="stable") if u[w] < 0.6]
            for w, r in zip(over, under, strict=False):
                mine = np.flatnonzero(self.vw_worker == w)
                if mine.size > 1:  # never strip a worker of its last VW
                    v = int(mine[-1])
                    self.vw_worker[v] = r
                    self.moves.append((v, w, r))
        self.counts[:] = 0
        self.total[0] = 0
