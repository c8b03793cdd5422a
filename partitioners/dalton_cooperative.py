"""Dalton with several cooperating sources, synchronised through a reducer.

Zapridou, Mytilinis, Ailamaki, "Dalton: Learned Partitioning for Distributed Data Streams",
PVLDB 16(3), 2022 (reference: ezapridou/Dalton ``DaltonCooperative``, ``QTableReducer``).
Each source runs its own ``partitioners.dalton.Dalton``; every ``sync`` tuples a reducer
merges the Q-rows as a frequency-weighted average and makes the keys globally above total / n
hot everywhere. The sync interval adapts [project choice: the reference measures reducer idle
time, which a library cannot]: it doubles while the merged table changes little
(mean |dQ| < 0.01) and halves when it changes a lot (> 0.05), within [slide / 4, 8 slide].
"""

from __future__ import annotations

import numpy as np

from partitioners.base import IntArray, LocalOnly, as_keys
from partitioners.dalton import Dalton

__all__ = ["DaltonCooperative"]


class DaltonCooperative(LocalOnly):
    """Several Dalton instances synchronised through a reducer every ``sync`` tuples."""

    name = "dalton"

    def __init__(
        self, n: int, seed: int = 0, sources: int = 2, interval: int = 10_000, key_space: int = 1024
    ) -> None:
        self.n = n
        self.instances = [Dalton(n, seed + i, interval, key_space) for i in range(sources)]
        self.slide = interval
        self.sync = interval
        self.since = 0
        self.syncs = 0
        self.history: list[int] = []

    def route(self, keys: IntArray) -> IntArray:
        """Route a batch (tuple i to instance i mod S), syncing at each sync point."""
        k = as_keys(keys)
        out = np.empty(k.size, dtype=np.int64)
        start = 0
        while start < k.size:
            step = min(k.size - start, self.sync - self.since)
            s = len(self.instances)
            for i, inst in enumerate(self.instances):
                sel = slice(start + i, start + step, s)
                out[sel] = inst.route(k[sel])
            start += step
            self.since += step
            if self.since >= self.sync:
                self._reduce()
                self.since = 0
        return out

    def _reduce(self) -> None:
        """Merge Q-rows frequency-weighted, share the global hot set, adapt the interval."""
        size = max(inst.Q.shape[0] for inst in self.instances)
        for inst in self.instances:
            if inst.Q.shape[0] < size:
                inst._alloc(size)
        w = np.stack([inst.cnt.astype(float) + 1e-9 for inst in self.instances])  # (S, K)
        q = np.stack([inst.Q for inst in self.instances])  # (S, K, n)
        merged = (q * w[:, :, None]).sum(0) / w.sum(0)[:, None]
        change = float(np.mean(np.abs(merged - q.mean(0))))
        total = sum(int(inst.st[0]) for inst in self.instances)
        glob = w.sum(0) > max(total, 1) / self.n
        for inst in self.instances:
            inst.Q[:] = merged
            inst.hot[glob] = 1
        if change < 0.01:
            self.sync = min(self.sync * 2, 8 * self.slide)
        elif change > 0.05:
            self.sync = max(self.sync // 2, max(1, self.slide // 4))
        self.syncs += 1
        self.history.append(self.sync)
