"""A stable, seeded, vectorized 64-bit hash for integer keys, identical to Spark SQL's.

``stable_hash(keys, seed)`` equals Spark's ``xxhash64(key, cast(seed as bigint))`` for bigint
keys: XXH64's ``hashLong`` of the key with seed 42, then of the seed with that result as the
seed. So routing computed in Python (partitioners, simulator, tests) and routing computed in
Spark SQL (``pmod(xxhash64(key, seed), n)``) agree bit for bit. Python's ``hash()`` of ``str``
is salted per process and must never be used for routing. Distinct seeds give independent hash
functions H_1..H_d (as PKG and D-Choices need).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["SPARK_SEED", "stable_hash", "stable_mod", "stable_uniform", "xxh64_long"]

SPARK_SEED = 42
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


def _rotl(x: NDArray[np.uint64], r: int) -> NDArray[np.uint64]:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def xxh64_long(values: NDArray[np.uint64], seeds: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """XXH64 of one 8-byte little-endian value (Spark's ``XXH64.hashLong``), elementwise."""
    with np.errstate(over="ignore"):
        h = seeds + _P5 + np.uint64(8)
        k1 = _rotl(values * _P2, 31) * _P1
        h = h ^ k1
        h = _rotl(h, 27) * _P1 + _P4
        h = h ^ (h >> np.uint64(33))
        h = h * _P2
        h = h ^ (h >> np.uint64(29))
        h = h * _P3
        h = h ^ (h >> np.uint64(32))
    return np.asarray(h, dtype=np.uint64)


def stable_hash(keys: ArrayLike, seed: int = 0) -> NDArray[np.int64]:
    """Spark's ``xxhash64(key, seed)`` for int64 keys, as signed int64.

    Examples
    --------
    >>> int(stable_hash([42])[0]) == int(stable_hash(np.array([42]))[0])
    True
    >>> bool(stable_hash([1], seed=1)[0] != stable_hash([1], seed=2)[0])
    True
    """
    x = np.asarray(keys).astype(np.int64, copy=False).view(np.uint64)
    first = xxh64_long(x, np.full(x.shape, SPARK_SEED, dtype=np.uint64))
    s = np.full(x.shape, np.int64(seed), dtype=np.int64).view(np.uint64)
    return xxh64_long(s, first).view(np.int64)


def stable_mod(keys: ArrayLike, n: int, seed: int = 0) -> NDArray[np.int64]:
    """``pmod(stable_hash(keys, seed), n)`` in ``[0, n)``, as Spark's ``pmod(xxhash64(..), n)``.

    Examples
    --------
    >>> stable_mod(np.arange(5), 3).tolist() == stable_mod(np.arange(5), 3).tolist()
    True
    """
    return np.mod(stable_hash(keys, seed), np.int64(n)).astype(np.int64)


def stable_uniform(keys: ArrayLike, seed: int) -> NDArray[np.float64]:
    """A uniform in [0, 1) per key: the top 53 bits of ``stable_hash(keys, seed)``.

    Spark SQL computes the same value as
    ``CAST(shiftrightunsigned(xxhash64(key, seed), 11) AS DOUBLE) / 2^53``
    (``spark_adapter.batch_compiler.uniform_sql``).

    >>> u = stable_uniform(np.arange(1000), 7)
    >>> bool(((u >= 0) & (u < 1)).all()), bool(abs(u.mean() - 0.5) < 0.05)
    (True, True)
    """
    h = stable_hash(np.asarray(keys, dtype=np.int64), seed=seed).view(np.uint64)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
