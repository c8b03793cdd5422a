"""Prompt: a per-micro-batch greedy partitioning plan from the batch's key counts.

Abdelhamid, Mahmood, Daghistani, Aref, "Prompt: Dynamic Data-Partitioning for Distributed
Micro-batch Stream Processing Systems", SIGMOD 2020 (re-implemented from ezapridou/Dalton
``Prompt.java``, one chunk per hot key). With B tuples, ``psize = B / n``,
``scut = ceil(psize / (distinct / n))``:

1. keys by decreasing count (ties by key); while a key has more than ``scut`` tuples, give it
   one chunk of ``scut`` on the next partition (round-robin) and keep the residual;
2. remaining whole keys zig-zag over the partitions (0..n-1, n-1..0, ...);
3. each residual goes to its chunk's partition if it fits under ``psize``, else the best fit,
   else it is water-filled over partitions by leftover capacity (flagged) [project choice].

The plan ``key -> [(partition, quota)]`` is applied in arrival order, so the routing is
deterministic for a given batch. On an engine whose keys default to a key-group table
(``route_pinned``), the keys the engine does not let the partitioner move stay on their
table partition and count in each partition's size from the start; Prompt plans the rest by
the three phases, Phases 1 and 2 putting each chunk or whole key on the emptiest partition
(what round-robin and the zig-zag stand for on empty partitions) [project choice: there placement, not Phase 2, owns
the cold keys, and a plan blind to where they are would balance a batch that is not the one
the engine runs].
"""

from __future__ import annotations

import math

import numpy as np

from partitioners.base import IntArray, LocalOnly, as_keys

__all__ = ["Prompt", "prompt_plan"]


def prompt_plan(
    keys: IntArray, n: int, pinned: IntArray | None = None
) -> tuple[dict[int, list[tuple[int, int]]], bool]:
    """The batch plan and whether any residual had to be water-filled; ``pinned`` (per
    tuple, -1 where free) holds the tuples that stay on a given partition.

    Examples
    --------
    >>> plan, split = prompt_plan(np.array([1] * 6 + [2, 3]), 2)
    >>> sum(q for _, q in plan[1]), split
    (6, False)
    >>> plan, _ = prompt_plan(np.array([1] * 4 + [2] * 4), 2, np.array([-1] * 4 + [0] * 4))
    >>> plan[1], plan[2]
    ([(1, 4)], [(0, 4)])
    """
    uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
    B = int(counts.sum())
    if B == 0:
        return {}, False
    psize = B / n
    scut = max(1, math.ceil(psize / (uniq.size / n)))
    size = np.zeros(n, dtype=np.int64)
    plan: dict[int, list[tuple[int, int]]] = {}
    free = np.ones(uniq.size, dtype=bool)
    if pinned is not None:
        pin = np.asarray(pinned, np.int64)
        held = pin >= 0
        size += np.bincount(pin[held], minlength=n)
        free[inv[held]] = False
        where = np.full(uniq.size, -1, dtype=np.int64)
        where[inv[held]] = pin[held]
        for i in np.flatnonzero(~free):
            plan[int(uniq[i])] = [(int(where[i]), int(counts[i]))]
    order = np.lexsort((uniq, -counts))
    order = order[free[order]]
    residual: list[tuple[int, int, int]] = []
    b = 0
    rest = []
    for i in order:
        k, f = int(uniq[i]), int(counts[i])
        if f > scut:
            b = b if pinned is None else int(np.argmin(size))  # onto pinned load: the emptiest
            plan[k] = [(b, scut)]
            size[b] += scut
            residual.append((k, f - scut, b))
            b = (b + 1) % n
        else:
            rest.append((k, f))
    for j, (k, f) in enumerate(rest):  # zig-zag (onto pinned load: the emptiest partition)
        r, c = divmod(j, n)
        p = (c if r % 2 == 0 else n - 1 - c) if pinned is None else int(np.argmin(size))
        plan[k] = [(p, f)]
        size[p] += f
    cap = math.ceil(psize)
    split = False
    for k, f, p0 in residual:
        split |= _place_residual(plan[k], size, f, p0, cap, n)
    return plan, split


def _place_residual(
    quota: list[tuple[int, int]], size: IntArray, f: int, p0: int, cap: int, n: int
) -> bool:
    """Place a hot key's residual ``f`` tuples: with its first block when that fits, else
    in the tightest partition it fits, else water-filled over the leftover capacity and the
    rest spread evenly (True: the key was split further)."""
    if size[p0] + f <= cap:
        quota.append((p0, f))
        size[p0] += f
        return False
    left = cap - size
    fits = np.flatnonzero(left >= f)
    if fits.size:
        p = int(fits[np.argmin(left[fits])])
        quota.append((p, f))
        size[p] += f
        return False
    remaining = f
    for p in np.argsort(-left, kind="stable"):
        if remaining == 0 or left[p] <= 0:
            break
        q = int(min(left[p], remaining))
        quota.append((int(p), q))
        size[p] += q
        remaining -= q
    while remaining > 0:
        p = int(np.argmin(size))
        q = int(min(remaining, max(1, math.ceil(remaining / n))))
        quota.append((p, q))
        size[p] += q
        remaining -= q
    return True


class Prompt(LocalOnly):
    """Per-batch Prompt partitioning (a centralised, micro-batch partitioner).

    Examples
    --------
    >>> w = Prompt(3).route(np.array([0, 0, 0, 0, 0, 0, 1, 2, 3]))
    >>> np.bincount(w, minlength=3).tolist()
    [4, 3, 2]
    """

    name = "prompt"

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.water_filled = 0

    def route(self, keys: IntArray, pinned: IntArray | None = None) -> IntArray:
        """Plan the batch, then apply each key's quotas in arrival order."""
        k = as_keys(keys)
        if k.size == 0:
            return np.zeros(0, dtype=np.int64)
        plan, split = prompt_plan(k, self.n, pinned)
        self.water_filled += int(split)
        order = np.argsort(k, kind="stable")
        sk = k[order]
        starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
        out_sorted = np.empty(k.size, dtype=np.int64)
        for s0, s1 in zip(starts, np.r_[starts[1:], k.size], strict=True):  # per distinct key
            quotas = plan[int(sk[s0])]
            out_sorted[s0:s1] = np.repeat([p for p, _ in quotas], [q for _, q in quotas])
        out = np.empty(k.size, dtype=np.int64)
        out[order] = out_sorted
        return out

    def route_pinned(self, keys: IntArray, home: IntArray, free: np.ndarray) -> IntArray:
        """Route on an engine that moves only the ``free`` keys: the others stay ``home``."""
        return self.route(keys, np.where(np.asarray(free, bool), -1, np.asarray(home, np.int64)))
