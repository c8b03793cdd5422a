"""D-Choices and W-Choices: more choices for the heavy hitters.

Nasir, De Francisci Morales, Kourtellis, Serafini, "When Two Choices Are not Enough:
Balancing at Scale in Distributed Stream Processing", ICDE 2016 (reference:
anisnasir/SLBSimulator ``LBDChoice``/``LBWChoice``). A SpaceSaving summary (100 counters) finds
the head: keys whose count upper bound (count since insertion + inherited error) exceeds
``theta M``, ``theta = 1 / (5 n)``. [Project choice] the summary keeps ``max(100, 2 / theta)``
counters, so that its error bound ``M / counters`` stays below ``theta / 2``; the summary finds
a key's counter through an index, and the one to evict through a heap (``space_saving``): a
scan of its ``10 n`` counters per key made routing O(n) per tuple. Head keys go to the
least-loaded of ``d`` hashed candidates (D-Choices; ``d`` solved from the head's shares so the
expected balance holds, see ``solve_d``) or of all ``n`` workers (W-Choices); tail keys use PKG.
One load vector counts everything this source sent. ``d`` is re-solved every 1024 tuples
[project choice]; round-half-up is used where Python's ``round`` would round half to even.
"""

from __future__ import annotations

import math

import numpy as np

from core.jit import njit
from partitioners.base import Array, IntArray, LocalOnly, as_keys, mix64_mod
from partitioners.space_saving import SpaceSaving
from partitioners.space_saving import update as space_saving_update

__all__ = ["DChoices", "WChoices", "solve_d"]

SS_COUNTERS = 100
RESOLVE_EVERY = 1024


def solve_d(n: int, p1: float, p_head: float, h: int, eps: float = 0.001) -> int:
    """Smallest ``d >= max(2, round_half_up(p1 n))`` passing both balance checks (<= n).

    Examples
    --------
    >>> [solve_d(20, 0.2, 0.2, 1), solve_d(50, 0.1, 0.3, 5), solve_d(100, 0.05, 0.2, 10), solve_d(10, 0.3, 0.5, 3)]
    [6, 6, 6, 10]
    """
    p_tail = 1.0 - p_head
    d = max(2, math.floor(p1 * n + 0.5))
    while d < n:
        b_h = 1.0 - ((n - 1) / n) ** (h * d)
        b_1 = 1.0 - ((n - 1) / n) ** d
        ok_h = p_head + p_tail * b_h**2 <= b_h + eps
        ok_1 = p1 + (p_head - p1) * b_1**d + p_tail * b_1**2 <= b_1 + eps
        if ok_h and ok_1:
            return d
        d += 1
    return n


@njit
def _cand(k: int, j: int, n: int) -> int:  # pragma: no cover
    return mix64_mod(np.int64(k), np.int64(j + 1), np.int64(n))


@njit
def _route(
    keys, n, sent, ss, state, theta, d_cur, all_workers, ring, pos, slide
):  # pragma: no cover
    out = np.empty(keys.size, dtype=np.int64)
    chosen = np.empty(n, dtype=np.int64)
    taken = np.zeros(n, dtype=np.int64)  # taken[c] == i + 1: c is already a candidate of i
    ss_cnt = ss[1]
    n_slides = ring.shape[0]
    for i in range(keys.size):
        k = keys[i]
        state[0] += 1  # messages seen
        s = space_saving_update(ss, k)
        head = ss_cnt[s] / state[0] > theta  # ss_cnt already includes the error: upper bound
        if head and all_workers:
            w = 0
            for c in range(1, n):
                if sent[c] < sent[w]:
                    w = c
        else:
            d = d_cur[0] if head else 2
            if d > n:
                d = n
            m = 0
            for j in range(d):  # distinct candidates H_1..H_d: a clash takes the next worker
                c = _cand(k, j, n)
                while taken[c] == i + 1:
                    c = (c + 1) % n
                taken[c] = i + 1
                chosen[m] = c
                m += 1
            w = chosen[0]
            for q in range(1, m):
                if sent[chosen[q]] < sent[w]:
                    w = chosen[q]
        out[i] = w
        sent[w] += 1
        if slide > 0:  # windowed load: the oldest slide leaves the window
            ring[pos[0], w] += 1
            pos[1] += 1
            if pos[1] == slide:
                pos[1] = 0
                pos[0] = (pos[0] + 1) % n_slides
                sent -= ring[pos[0]]
                ring[pos[0]] = 0
        if state[0] % 1024 == 0:
            state[1] = 1  # ask Python to re-solve d
            return out[: i + 1]
    return out


class DChoices(LocalOnly):
    """D-Choices for one source (``all_workers=True`` gives W-Choices).

    Examples
    --------
    >>> dc = DChoices(10)
    >>> w = dc.route(np.zeros(3000, dtype=np.int64))  # one very hot key: d is re-solved
    >>> len(np.unique(w)) > 2
    True
    """

    name = "dchoices"
    all_workers = False

    def __init__(
        self,
        n: int,
        seed: int = 0,
        theta: float | None = None,
        eps: float = 0.001,
        window: int = 0,
        slides: int = 4,
    ) -> None:
        if n < 1:
            raise ValueError(f"n: need at least one worker (got {n})")
        self.n = n
        self.theta = 1.0 / (5 * n) if theta is None else theta
        self.eps = eps
        self.sent = np.zeros(n, dtype=np.int64)
        # SpaceSaving overestimates by at most M / counters: with fewer than 2 / theta counters
        # (the reference's 100 when n > 10) tail keys would pass the head test spuriously
        self.ss = SpaceSaving(max(SS_COUNTERS, int(np.ceil(2.0 / self.theta))))
        self.state = np.zeros(2, dtype=np.int64)  # messages seen, re-solve flag
        self.d = np.array([2], dtype=np.int64)
        # window > 0 [project choice, as for PKG on windowed queries]: loads count the last
        # ``window`` tuples, and the summary halves every window so a hot-key shift shows soon
        self.window = window
        self.slide = max(1, window // slides) if window > 0 else 0
        self.ring = np.zeros((slides if window > 0 else 1, n), dtype=np.int64)
        self.pos = np.zeros(2, dtype=np.int64)
        self.last_decay = 0

    def __setstate__(self, state: dict) -> None:
        """Unpickle; a state saved before the summary had its index (arrays ``ss_key``,
        ``ss_cnt``, ``ss_err``) gets one, with the same counters."""
        if "ss" not in state:
            ss = SpaceSaving(0)
            ss.key, ss.cnt, ss.err = (state.pop(f"ss_{a}") for a in ("key", "cnt", "err"))
            ss.reindex()
            state["ss"] = ss
        self.__dict__.update(state)

    @property
    def ss_key(self) -> IntArray:
        return self.ss.key

    @property
    def ss_cnt(self) -> IntArray:
        return self.ss.cnt

    def head(self) -> tuple[IntArray, Array]:
        """Head keys and their estimated shares."""
        m = max(int(self.state[0]), 1)
        est = self.ss_cnt / m  # upper bound: the count since insertion plus the inherited error
        mask = (self.ss_key >= 0) & (est > self.theta)
        order = np.argsort(-est[mask], kind="stable")
        return self.ss_key[mask][order], est[mask][order]

    def _decay(self) -> None:
        """Halve the summary once per window (windowed mode)."""
        if self.window > 0 and self.state[0] - self.last_decay >= self.window:
            self.ss.cnt //= 2
            self.ss.err //= 2
            self.ss.reindex()  # halving can reorder counters of equal halves
            self.state[0] //= 2
            self.last_decay = int(self.state[0])

    def _resolve(self) -> None:
        keys, share = self.head()
        if keys.size:
            self.d[0] = solve_d(
                self.n, float(share[0]), float(min(share.sum(), 1.0)), int(keys.size), self.eps
            )

    def route(self, keys: IntArray) -> IntArray:
        """Route one batch in arrival order."""
        k = as_keys(keys)
        if self.n == 1:
            return np.zeros(k.size, dtype=np.int64)
        parts = []
        while k.size:
            out = _route(
                k,
                self.n,
                self.sent,
                self.ss.arrays(),
                self.state,
                self.theta,
                self.d,
                self.all_workers,
                self.ring,
                self.pos,
                self.slide,
            )
            parts.append(out)
            k = k[out.size :]
            if self.state[1]:
                self.state[1] = 0
                self._decay()
                self._resolve()
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class WChoices(DChoices):
    """W-Choices: head keys may go to any of the n workers."""

    name = "wchoices"
    all_workers = True
