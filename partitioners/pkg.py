"""Partial Key Grouping (PKG): the power of both choices.

Nasir, De Francisci Morales, Garcia-Soriano, Kourtellis, Serafini, "The Power of Both Choices:
Practical Load Balancing for Distributed Stream Processing Engines", ICDE 2015 (reference:
gdfm/partial-key-grouping; Apache Storm ``PartialKeyGrouping``). Each key has two distinct
candidates ``H_1(k), H_2(k)`` (a clash moves the second to the next worker, as Storm does);
the tuple goes to the candidate this source has sent fewer tuples to (ties to the first).
Counters are cumulative (Storm), or with ``window`` > 0 they count only the last ``window``
tuples in slides of ``window / slides`` (the fair variant for windowed queries).
"""

from __future__ import annotations

import numpy as np

from core.jit import njit
from partitioners.base import IntArray, LocalOnly, as_keys, candidates

__all__ = ["PKG"]


@njit
def _route(
    cand: np.ndarray, sent: np.ndarray, ring: np.ndarray, pos: np.ndarray, slide: int
) -> np.ndarray:  # pragma: no cover
    out = np.empty(cand.shape[0], dtype=np.int64)
    n_slides = ring.shape[0]
    for i in range(cand.shape[0]):
        a, b = cand[i, 0], cand[i, 1]
        w = a if sent[a] <= sent[b] else b
        out[i] = w
        sent[w] += 1
        if slide > 0:
            ring[pos[0], w] += 1
            pos[1] += 1
            if pos[1] == slide:  # the oldest slide leaves the window
                pos[1] = 0
                pos[0] = (pos[0] + 1) % n_slides
                sent -= ring[pos[0]]
                ring[pos[0]] = 0
    return out


class PKG(LocalOnly):
    """PKG for one source.

    Examples
    --------
    >>> p = PKG(4)
    >>> w = p.route(np.zeros(100, dtype=np.int64))
    >>> sorted(np.bincount(w, minlength=4)[np.unique(w)].tolist())
    [50, 50]
    """

    name = "pkg"

    def __init__(self, n: int, seed: int = 0, window: int = 0, slides: int = 4) -> None:
        if n < 1:
            raise ValueError(f"n: need at least one worker (got {n})")
        self.n = n
        self.sent = np.zeros(n, dtype=np.int64)
        self.slide = max(1, window // slides) if window > 0 else 0
        self.ring = np.zeros((slides if window > 0 else 1, n), dtype=np.int64)
        self.pos = np.zeros(2, dtype=np.int64)

    def route(self, keys: IntArray) -> IntArray:
        """Route one batch in arrival order."""
        k = as_keys(keys)
        if self.n == 1:
            return np.zeros(k.size, dtype=np.int64)
        return _route(candidates(k, self.n, 2), self.sent, self.ring, self.pos, self.slide)
