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
deterministic for a given batch.
"""

from __future__ import annotations

import math

import numpy as np

from partitioners.base import IntArray, LocalOnly, as_keys

__all__ = ["Prompt", "prompt_plan"]


def prompt_plan(keys: IntArray, n: int) -> tuple[dict[int, list[tuple[int, int]]], bool]:
    """The batch plan and whether any residual had to be water-filled.

    Examples
    --------
    >>> plan, split = prompt_plan(np.array([1] * 6 + [2, 3]), 2)
    >>> sum(q for _, q in plan[1]), split
    (6, False)
    """
    uniq, counts = np.unique(keys, return_counts=True)
    B = int(counts.sum())
    if B == 0:
        return {}, False
    psize = B / n
    scut = max(1, math.ceil(psize / (uniq.size / n)))
    order = np.lexsort((uniq, -counts))
    size = np.zeros(n, dtype=np.int64)
    plan: dict[int, list[tuple[int, int]]] = {}
    residual: list[tuple[int, int, int]] = []
    b = 0
    rest = []
    for i in order:
        k, f = int(uniq[i]), int(counts[i])
        if f > scut:
            plan[k] = [(b, scut)]
            size[b] += scut
            residual.append((k, f - scut, b))
            b = (b + 1) % n
        else:
            rest.append((k, f))
    for j, (k, f) in enumerate(rest):  # zig-zag
        r, c = divmod(j, n)
        p = c if r % 2 == 0 else n - 1 - c
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

    def route(self, keys: IntArray) -> IntArray:
        """Plan the batch, then apply each key's quotas in arrival order."""
        k = as_keys(keys)
        if k.size == 0:
            return np.zeros(0, dtype=np.int64)
        plan, split = prompt_plan(k, self.n)
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
