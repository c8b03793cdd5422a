"""Variance descent: local search after the Borealis global placement (trimtab extension).

Correlation-based placement (Xing, Zdonik, Hwang, ICDE 2005) aims at a low average node-load
variance with balanced mean loads. Its global greedy and pair-wise passes are one-shot choices,
so on small networks they can stop well above the best variance a balanced plan reaches. This
pass finishes the job on the paper's own objective:

* repeatedly apply the single-operator move or pairwise swap that most lowers the average
  variance of the capacity-normalised node series;
* only among plans that stay balanced: the spread of normalised node means
  (``max - min``) stays below the pair threshold (0.2, the level at which pair-wise balancing
  would act), or does not grow if it is already above it;
* operators lighter than the load-selection threshold (0.005) never move.

Every candidate is scored in closed form from centred series: with ``G = Xc Nc^T`` and
``Xc Xc^T``, a move or swap changes two nodes' squared norms by a few dot products, so one step
costs ``O(m n k)`` for moves and ``O(m^2)`` for swaps (skipped above ``swap_max_units``).

Above ``swap_max_units`` a step applies many moves at once (for scale): each unit's best
destination is scored, and the best moves whose nodes are all distinct are applied together
(their variance changes add exactly, as each touches its own two nodes), as long as the
spread of the node means stays within the limit; otherwise only the best move is applied.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from core.jit import njit

__all__ = ["reduce_variance"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]
TOL = 1e-9
LARGE = 4_000_000  # unit-node pairs above which a batched step scores a subset of units


def _excluding(mu: Array, a: IntArray, b: IntArray, largest: bool) -> Array:
    """max (or min) of ``mu`` over nodes other than ``a`` and ``b``, elementwise over (a, b)."""
    order = np.argsort(-mu if largest else mu, kind="stable")[:3]
    fill = -np.inf if largest else np.inf
    out = np.full(np.broadcast(a, b).shape, fill)
    for i in order[::-1]:
        out = np.where((a != i) & (b != i), mu[i], out)
    return out


def reduce_variance(
    unit_x: Array,
    assign: IntArray,
    capacity: Array,
    spread_threshold: float = 0.2,
    load_threshold: float = 0.005,
    max_steps: int = 100,
    swap_max_units: int = 400,
) -> int:
    """Lower the mean node variance of ``assign`` in place; returns the number of steps taken.

    Examples
    --------
    Two rising and two falling series on two nodes, started with like next to like: the
    descent pairs each rising series with a falling one, and both nodes become flat.

    >>> t = np.sin(np.linspace(0, 6, 10))
    >>> x = np.stack([0.3 + 0.1 * t, 0.3 + 0.1 * t, 0.3 - 0.1 * t, 0.3 - 0.1 * t])
    >>> a = np.array([0, 0, 1, 1])
    >>> reduce_variance(x, a, np.ones(2)), bool(a[0] != a[1])
    (1, True)
    """
    m, k = unit_x.shape
    n = capacity.size
    if m == 0 or k == 0 or n < 2:
        return 0
    cap = capacity.astype(float)
    xbar = unit_x.mean(axis=1)
    xc = unit_x - xbar[:, None]
    d = _Descent(
        cap, xbar, xc, (xc * xc).sum(axis=1), xbar >= load_threshold, 1.0 / (k * cap * cap)
    )
    xx = xc @ xc.T if m <= swap_max_units else None
    for step in range(max_steps):
        nc = np.zeros((n, k))
        np.add.at(nc, assign, xc)
        mu = np.bincount(assign, xbar, n) / cap
        limit = max(float(mu.max() - mu.min()), spread_threshold - TOL) + 1e-12
        node_var = d.w * (nc * nc).sum(axis=1)
        floor = -1e-9 * max(float(node_var.sum()), 1e-12)
        if xx is None:
            sub = _sources(assign, node_var, m)
            if not d.apply_batch(assign, sub, xc[sub] @ nc.T, mu, limit, floor):
                return step
            continue
        g = xc @ nc.T  # (m, n): xc_j . Nc_i
        best = d.best_move(assign, g, mu, limit)
        swap = d.best_swap(assign, g, mu, limit, xx)
        if swap[0] < best[0]:
            best = swap
        if not best[0] < floor:
            return step
        _, kind, j, o = best
        if kind == "move":
            assign[j] = o
        else:
            assign[j], assign[o] = assign[o], assign[j]
    return max_steps


def _sources(assign: IntArray, node_var: Array, m: int) -> IntArray:
    """The units a batched step scores: all of them, or above ``LARGE`` unit-node pairs the
    units on the eighth of the nodes with the highest variance (at least 32 nodes)."""
    n = node_var.size
    if m * n <= LARGE:
        return np.arange(m)
    top = np.argsort(-node_var, kind="stable")[: max(32, n // 8)]
    return np.flatnonzero(np.isin(assign, top))


class _Descent:
    """The exact variance change of every single move and swap, vectorized.

    The variance of node i is ``|Nc_i|^2 * w_i`` (``Nc_i`` its centred load series); a step is
    allowed only when the node mean-load spread stays within the limit.
    """

    def __init__(
        self, cap: Array, xbar: Array, xc: Array, sq: Array, movable: NDArray[np.bool_], w: Array
    ) -> None:
        self.cap, self.xbar, self.xc, self.sq, self.movable, self.w = cap, xbar, xc, sq, movable, w
        self.idx = np.arange(xbar.size)

    def best_move(
        self, src: IntArray, g: Array, mu: Array, limit: float
    ) -> tuple[float, str, int, int]:
        """The best move j: src -> b as (variance change, "move", j, b)."""
        m, n = g.shape
        cap, xbar, w = self.cap, self.xbar, self.w
        d_src = (-2 * g[self.idx, src] + self.sq) * w[src]
        d_dst = (2 * g + self.sq[:, None]) * w[None, :]
        gain = d_src[:, None] + d_dst
        mu_src = mu[src] - xbar / cap[src]
        mu_dst = mu[None, :] + xbar[:, None] / cap[None, :]
        bb = np.broadcast_to(np.arange(n)[None, :], (m, n))
        aa = np.broadcast_to(src[:, None], (m, n))
        hi = np.maximum(np.maximum(_excluding(mu, aa, bb, True), mu_src[:, None]), mu_dst)
        lo = np.minimum(np.minimum(_excluding(mu, aa, bb, False), mu_src[:, None]), mu_dst)
        ok = (hi - lo <= limit) & self.movable[:, None] & (bb != aa)
        gain = np.where(ok, gain, np.inf)
        j, b = np.unravel_index(int(np.argmin(gain)), gain.shape)
        return float(gain[j, b]), "move", int(j), int(b)

    def best_swap(
        self, src: IntArray, g: Array, mu: Array, limit: float, xx: Array
    ) -> tuple[float, str, int, int]:
        """The best swap j (on a) <-> l (on b): ``d = xc_l - xc_j`` enters a and leaves b."""
        cap, xbar, w, idx, mv = self.cap, self.xbar, self.w, self.idx, self.movable
        a_, b_ = src[:, None], src[None, :]
        d2 = self.sq[:, None] + self.sq[None, :] - 2 * xx
        na_d = g[idx[None, :], a_] - g[idx[:, None], a_]  # Nc_a . d
        nb_d = g[idx[None, :], b_] - g[idx[:, None], b_]  # Nc_b . d
        sgain = (2 * na_d + d2) * w[a_] + (-2 * nb_d + d2) * w[b_]
        dm = xbar[None, :] - xbar[:, None]
        ma, mb = mu[a_] + dm / cap[a_], mu[b_] - dm / cap[b_]
        aa2, bb2 = np.broadcast_arrays(a_, b_)
        hi = np.maximum(np.maximum(_excluding(mu, aa2, bb2, True), ma), mb)
        lo = np.minimum(np.minimum(_excluding(mu, aa2, bb2, False), ma), mb)
        ok = (hi - lo <= limit) & (aa2 != bb2) & mv[:, None] & mv[None, :]
        sgain = np.where(ok, sgain, np.inf)
        j, o = np.unravel_index(int(np.argmin(sgain)), sgain.shape)
        return float(sgain[j, o]), "swap", int(j), int(o)

    def apply_batch(
        self, assign: IntArray, sub: IntArray, g: Array, mu: Array, limit: float, floor: float
    ) -> bool:
        """Apply the best moves of the units ``sub`` (``g`` their rows) with pairwise distinct
        nodes (see the module); False when none lowers the variance by more than ``-floor``."""
        cap, w = self.cap, self.w
        xbar, sq, src, rows = self.xbar[sub], self.sq[sub], assign[sub], np.arange(sub.size)
        dst, into = _best_destinations(g, sq, w, src)
        total = into + (-2 * g[rows, src] + sq) * w[src]
        mu_src, mu_dst = mu[src] - xbar / cap[src], mu[dst] + xbar / cap[dst]
        hi = np.maximum(np.maximum(_excluding(mu, src, dst, True), mu_src), mu_dst)
        lo = np.minimum(np.minimum(_excluding(mu, src, dst, False), mu_src), mu_dst)
        cand = np.flatnonzero((hi - lo <= limit) & self.movable[sub] & (total < floor))
        if cand.size == 0:
            return False
        cand = cand[np.argsort(total[cand], kind="stable")][: 4 * cap.size]
        used = np.zeros(cap.size, bool)
        chosen = []
        for j in cand.tolist():
            a, b = src[j], dst[j]
            if not (used[a] or used[b]):
                used[a] = used[b] = True
                chosen.append(j)
        moved = np.array(chosen)
        trial = assign.copy()
        trial[sub[moved]] = dst[moved]
        new_mu = np.bincount(trial, self.xbar, cap.size) / cap
        if new_mu.max() - new_mu.min() > limit:
            moved = moved[:1]
        assign[sub[moved]] = dst[moved]
        return True


@njit
def _best_destinations(g: Array, sq: Array, w: Array, src: IntArray) -> tuple[IntArray, Array]:
    """For each row j, the node b != ``src[j]`` with the least ``(2 g[j, b] + sq[j]) w[b]`` (the
    variance a move adds at its destination; the first such node on a tie) and that value:
    ``argmin`` over the row without the ``(rows, n)`` temporaries (at 1,000 nodes a step scores
    12,500 rows, and the temporaries took most of the descent's time)."""
    rows, n = g.shape
    dst = np.empty(rows, dtype=np.int64)
    best = np.empty(rows)
    for j in range(rows):
        bj, vj = -1, np.inf
        for b in range(n):
            if b != src[j]:
                v = (2.0 * g[j, b] + sq[j]) * w[b]
                if v < vj:
                    bj, vj = b, v
        dst[j], best[j] = bj, vj
    return dst, best
