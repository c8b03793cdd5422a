"""Table routing: cold keys follow the placement table, hot keys follow a partitioner.

A key's key group is ``H(key) mod groups``; the placement's key group -> partition table sends
it to its partition, so moving a key group (placement) moves its keys and their state. Keys a
SpaceSaving-style exact counter finds hot in the batch (share > ``1 / (5 n)``) are routed by
the wrapped hot-key partitioner instead.
"""

from __future__ import annotations

import numpy as np

from core.hashing import stable_mod
from partitioners.base import Array, IntArray, as_keys

__all__ = ["TableRouting"]


class TableRouting:
    """Route by the key-group table, with an optional partitioner for the batch's hot keys.

    Examples
    --------
    >>> t = TableRouting(2, table=np.array([1, 1, 1, 1]))
    >>> t.route(np.arange(6)).tolist()
    [1, 1, 1, 1, 1, 1]

    A key with more than ``1 / (5 n)`` of the batch (here 0.1) is hot and goes to the hot
    partitioner (round-robin shuffling here); one with less follows the table:

    >>> from partitioners.shuffle import Shuffle
    >>> t = TableRouting(2, table=np.zeros(4, np.int64), hot=Shuffle(2))
    >>> keys = np.r_[np.full(15, 5), np.full(5, 6), np.arange(100, 180)]
    >>> w = t.route(keys)
    >>> sorted(set(w[keys == 5].tolist())), sorted(set(w[keys == 6].tolist()))
    ([0, 1], [0])
    """

    def __init__(
        self,
        n: int,
        table: IntArray,
        hot: object | None = None,
        threshold: float | None = None,
        seed: int = 0,
    ) -> None:
        tab = np.asarray(table, dtype=np.int64)
        if tab.size == 0 or tab.min() < 0 or tab.max() >= n:
            raise ValueError(f"table: partitions must lie in [0, {n})")
        self.n, self.table, self.hot, self.seed = n, tab, hot, seed
        self.threshold = 1.0 / (5 * n) if threshold is None else threshold
        self.name = "table" if hot is None else f"table+{getattr(hot, 'name', 'hot')}"

    def key_groups(self, keys: IntArray) -> IntArray:
        """Key group of each key."""
        return stable_mod(keys, self.table.size, self.seed)

    def route(self, keys: IntArray) -> IntArray:
        """Table lookup (a numpy gather); hot keys of this batch go to the hot partitioner."""
        k = as_keys(keys)
        out = self.table[self.key_groups(k)]
        if self.hot is not None and k.size:
            _uniq, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
            is_hot = (cnt / k.size > self.threshold)[inv]
            if is_hot.any():
                out[is_hot] = self.hot.route(k[is_hot])  # type: ignore[attr-defined]
        return out

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
    ) -> None:
        """Forward feedback to the hot-key partitioner."""
        if self.hot is not None:
            self.hot.feedback(loads, capacities, latencies)  # type: ignore[attr-defined]
