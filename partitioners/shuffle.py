"""Shuffle grouping ("SH"): round-robin from a per-source offset (``source_id mod n``).

Best balance (per-source loads differ by at most 1), but a key can reach every worker, so
every key needs the merge stage.
"""

from __future__ import annotations

import numpy as np

from partitioners.base import IntArray, LocalOnly, as_keys

__all__ = ["Shuffle"]


class Shuffle(LocalOnly):
    """Round-robin over workers; the position carries over between batches.

    Examples
    --------
    >>> s = Shuffle(3, source_id=1)
    >>> s.route(np.arange(4)).tolist(), s.route(np.arange(2)).tolist()
    ([1, 2, 0, 1], [2, 0])
    """

    name = "shuffle"

    def __init__(self, n: int, seed: int = 0, source_id: int = 0) -> None:
        self.n = n
        self.next = source_id % n

    def route(self, keys: IntArray) -> IntArray:
        """Round-robin ids, ignoring the keys."""
        k = as_keys(keys)
        out = (self.next + np.arange(k.size, dtype=np.int64)) % self.n
        self.next = int((self.next + k.size) % self.n)
        return out
