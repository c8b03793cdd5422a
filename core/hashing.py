"""A stable, seeded, vectorized 64-bit hash for integer keys (splitmix64 finalizer).

Python's ``hash()`` of ``str`` is salted per process, so routing must never use it: two
executors would disagree. ``stable_hash(keys, seed)`` gives the same value in every process,
and distinct seeds give independent hash functions H_1..H_d (as PKG and D-Choices need).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["stable_hash", "stable_mod"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def stable_hash(keys: ArrayLike, seed: int = 0) -> NDArray[np.uint64]:
    """splitmix64 of ``key + seed * golden``, elementwise, as uint64.

    Examples
    --------
    >>> int(stable_hash([42])[0]) == int(stable_hash(np.array([42]))[0])
    True
    >>> bool(stable_hash([1], seed=1)[0] != stable_hash([1], seed=2)[0])
    True
    """
    x = np.asarray(keys).astype(np.int64, copy=False).view(np.uint64)
    with np.errstate(over="ignore"):
        z = x + np.uint64(seed + 1) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return np.asarray(z, dtype=np.uint64)


def stable_mod(keys: ArrayLike, n: int, seed: int = 0) -> NDArray[np.int64]:
    """``stable_hash(keys, seed) mod n`` as int64 in ``[0, n)``.

    Examples
    --------
    >>> stable_mod(np.arange(5), 3).tolist() == stable_mod(np.arange(5), 3).tolist()
    True
    """
    return (stable_hash(keys, seed) % np.uint64(n)).astype(np.int64)
