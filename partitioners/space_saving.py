"""SpaceSaving with a key index and a min-heap: O(log C) per tuple, not O(C).

Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data
Streams", ICDT 2005. ``C`` counters; a tracked key's counter counts it; an untracked key takes
a free counter (the lowest-numbered one) or, when none is free, the counter with the smallest
count (the lowest-numbered among equals), inheriting that count as its error. Every count is
an upper bound on its key's true count.

The D-/W-Choices summary keeps ``10 n`` counters for ``n`` workers: scanning them on every
tuple made routing O(n) per tuple (``partition --workers 4096`` ran for hours). Here an
open-addressing table finds a key's counter and a binary heap ordered by (count, counter)
holds the counter to evict, so the choices are exactly the scan's. All state is numpy arrays
(a router's state is pickled into plans).
"""

from __future__ import annotations

import numpy as np

from core.jit import njit

__all__ = ["SpaceSaving"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class SpaceSaving:
    """``counters`` counters over non-negative int64 keys.

    >>> ss = SpaceSaving(2)
    >>> [ss.update(k) for k in (7, 7, 3, 5)]  # 5 evicts 3 (count 1): error 1, count 2
    [0, 0, 1, 1]
    >>> ss.key.tolist(), ss.cnt.tolist(), ss.err.tolist()
    ([7, 5], [2, 2], [0, 1])
    """

    def __init__(self, counters: int) -> None:
        self.key = np.full(counters, -1, dtype=np.int64)
        self.cnt = np.zeros(counters, dtype=np.int64)
        self.err = np.zeros(counters, dtype=np.int64)
        self.reindex()

    def reindex(self) -> None:
        """Build the key table and the heap from ``key`` and ``cnt`` (after ``cnt`` changed
        as a whole, e.g. halved, or for a summary saved without them)."""
        c = self.key.size
        size = 1 << max(4, int(2 * c - 1).bit_length())  # load factor at most 1/2
        self.table_key = np.full(size, -1, dtype=np.int64)
        self.table_slot = np.zeros(size, dtype=np.int64)
        self.used = np.array([int((self.key >= 0).sum())], dtype=np.int64)
        for s in np.flatnonzero(self.key >= 0):
            _insert(self.table_key, self.table_slot, self.key[s], s)
        self.heap = np.arange(c, dtype=np.int64)
        self.heap_pos = np.arange(c, dtype=np.int64)
        _heapify(self.heap, self.heap_pos, self.cnt)

    def update(self, k: int) -> int:
        """Count key ``k``; its counter's index."""
        return int(update(self.arrays(), np.int64(k)))

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The state as the compiled ``update`` takes it."""
        return (
            self.key,
            self.cnt,
            self.err,
            self.table_key,
            self.table_slot,
            self.heap,
            self.heap_pos,
            self.used,
        )


@njit
def _home(k: np.int64, mask: int) -> int:  # pragma: no cover
    return int((np.uint64(k) * _GOLDEN) >> np.uint64(32)) & mask


@njit
def _find(table_key: np.ndarray, table_slot: np.ndarray, k: np.int64) -> int:  # pragma: no cover
    mask = table_key.size - 1
    i = _home(k, mask)
    while table_key[i] != -1:
        if table_key[i] == k:
            return table_slot[i]
        i = (i + 1) & mask
    return -1


@njit
def _insert(
    table_key: np.ndarray, table_slot: np.ndarray, k: np.int64, s: np.int64
) -> None:  # pragma: no cover
    mask = table_key.size - 1
    i = _home(k, mask)
    while table_key[i] != -1:
        i = (i + 1) & mask
    table_key[i] = k
    table_slot[i] = s


@njit
def _delete(table_key: np.ndarray, table_slot: np.ndarray, k: np.int64) -> None:  # pragma: no cover
    """Remove ``k``, shifting back the entries after it (linear probing, no tombstones)."""
    mask = table_key.size - 1
    i = _home(k, mask)
    while table_key[i] != k:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if table_key[j] == -1:
            break
        # the entry at j may fill the hole at i when i lies on its probe path (home .. j)
        if ((j - _home(table_key[j], mask)) & mask) >= ((j - i) & mask):
            table_key[i] = table_key[j]
            table_slot[i] = table_slot[j]
            i = j
    table_key[i] = -1


@njit
def _less(cnt: np.ndarray, a: np.int64, b: np.int64) -> bool:  # pragma: no cover
    return cnt[a] < cnt[b] or (cnt[a] == cnt[b] and a < b)


@njit
def _sift_down(
    heap: np.ndarray, pos: np.ndarray, cnt: np.ndarray, i: int
) -> None:  # pragma: no cover
    n = heap.size
    while True:
        small = i
        left, right = 2 * i + 1, 2 * i + 2
        if left < n and _less(cnt, heap[left], heap[small]):
            small = left
        if right < n and _less(cnt, heap[right], heap[small]):
            small = right
        if small == i:
            return
        heap[i], heap[small] = heap[small], heap[i]
        pos[heap[i]] = i
        pos[heap[small]] = small
        i = small


@njit
def _heapify(heap: np.ndarray, pos: np.ndarray, cnt: np.ndarray) -> None:  # pragma: no cover
    for i in range(heap.size // 2 - 1, -1, -1):
        _sift_down(heap, pos, cnt, i)


@njit
def update(state: tuple, k: np.int64) -> np.int64:  # pragma: no cover
    """Count ``k`` in ``SpaceSaving.arrays()``; its counter's index. Counts only grow here,
    so a counter moves down the heap only."""
    key, cnt, err, table_key, table_slot, heap, pos, used = state
    s = _find(table_key, table_slot, k)
    if s >= 0:
        cnt[s] += 1
        _sift_down(heap, pos, cnt, pos[s])
        return s
    if used[0] < key.size:  # a free counter: the lowest-numbered
        s = used[0]
        used[0] += 1
        key[s], cnt[s], err[s] = k, 1, 0
    else:  # evict the smallest count
        s = heap[0]
        _delete(table_key, table_slot, key[s])
        err[s] = cnt[s]
        key[s] = k
        cnt[s] += 1
    _insert(table_key, table_slot, k, s)
    _sift_down(heap, pos, cnt, pos[s])
    return s
