"""Key grouping (hash, "FLD"): ``w = H(key) mod n``.

No state and no merge; under skew the worker holding the hottest key carries at least
``p_1 * M`` tuples, so the imbalance is at least ``p_1 - 1/n`` of the stream. The hash is the
stable seeded one, identical in every process (Python's ``hash()`` is salted per process).
"""

from __future__ import annotations

from core.hashing import stable_mod
from partitioners.base import IntArray, LocalOnly, as_keys

__all__ = ["KeyGrouping"]


class KeyGrouping(LocalOnly):
    """Hash partitioning.

    Examples
    --------
    >>> KeyGrouping(4).route(np.array([7, 7, 7])).tolist() == [KeyGrouping(4).route(np.array([7]))[0]] * 3
    True
    """

    name = "hash"

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n, self.seed = n, seed

    def route(self, keys: IntArray) -> IntArray:
        """``H(key) mod n``."""
        return stable_mod(as_keys(keys), self.n, self.seed)
