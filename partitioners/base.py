"""The partitioner interface, shared helpers and per-window routing metrics.

Every partitioner routes a numpy batch of non-negative integer keys to worker ids in
``[0, n)`` with ``route(keys)`` and may adapt through ``feedback(loads, capacities,
latencies)``. A partitioner instance is one *source* with its own local state (PKG's local
load estimate, Dalton's Q-table); ``MultiSource`` splits a batch over several instances the way
upstream tasks would. Per-tuple algorithms run in compiled kernels (numba), never as Python
loops per tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from core.hashing import stable_mod
from core.jit import njit

__all__ = [
    "LocalOnly",
    "MultiSource",
    "Partitioner",
    "WindowMetrics",
    "as_keys",
    "candidates",
    "mix64_mod",
    "window_metrics",
]

IntArray = NDArray[np.int64]
Array = NDArray[np.float64]


class Partitioner(Protocol):
    """What every partitioner module provides."""

    name: str
    n: int

    def route(self, keys: IntArray) -> IntArray:
        """Worker id in ``[0, n)`` for each key of one batch (in arrival order)."""
        ...

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
    ) -> None:
        """Window loads, capacities and latencies, for partitioners that adapt."""
        ...


def as_keys(keys: Any) -> IntArray:
    """Validate a key batch: a 1-d array of non-negative integers."""
    k = np.asarray(keys)
    if k.ndim != 1:
        raise ValueError(f"keys: expected a 1-d array, got shape {k.shape}")
    if k.size and not np.issubdtype(k.dtype, np.integer):
        raise ValueError(f"keys: expected integer keys, got dtype {k.dtype}")
    k = k.astype(np.int64, copy=False)
    if k.size and k.min() < 0:
        raise ValueError(f"keys: negative key {int(k.min())}")
    return k


def candidates(keys: IntArray, n: int, d: int) -> IntArray:
    """``(len, d)`` hashed candidate workers H_1..H_d (seeds 1..d); distinct where d <= n.

    Collisions move to the next free worker, as Storm's PKG does for two choices.
    """
    out = np.empty((keys.size, d), dtype=np.int64)
    for j in range(d):
        out[:, j] = stable_mod(keys, n, seed=j + 1)
    if d <= n:
        for j in range(1, d):
            clash = (out[:, :j] == out[:, j : j + 1]).any(axis=1)
            while clash.any():
                out[clash, j] = (out[clash, j] + 1) % n
                clash = (out[:, :j] == out[:, j : j + 1]).any(axis=1)
    return out


@njit
def _xxh64_long(v: np.uint64, seed: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    h = seed + np.uint64(0x27D4EB2F165667C5) + np.uint64(8)
    k1 = v * np.uint64(0xC2B2AE3D27D4EB4F)
    k1 = ((k1 << np.uint64(31)) | (k1 >> np.uint64(33))) * np.uint64(0x9E3779B185EBCA87)
    h = h ^ k1
    h = ((h << np.uint64(27)) | (h >> np.uint64(37))) * np.uint64(0x9E3779B185EBCA87) + np.uint64(
        0x85EBCA77C2B2AE63
    )
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC2B2AE3D27D4EB4F)
    h = h ^ (h >> np.uint64(29))
    h = h * np.uint64(0x165667B19E3779F9)
    return h ^ (h >> np.uint64(32))


@njit
def mix64_mod(key: np.int64, seed: np.int64, n: np.int64) -> np.int64:  # pragma: no cover
    """``core.hashing.stable_mod(key, n, seed)`` inside compiled kernels."""
    first = _xxh64_long(np.uint64(key), np.uint64(42))
    h = np.int64(_xxh64_long(np.uint64(seed), first))
    r = h % n
    return r + n if r < 0 else r


class LocalOnly:
    """Mixin for partitioners that adapt only from their own counts: ``feedback`` is a no-op."""

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
    ) -> None:
        """Nothing to adapt from outside."""


class MultiSource:
    """Several source instances of one partitioner; tuple i of a batch goes to source i mod S."""

    def __init__(self, instances: list[Any]) -> None:
        if not instances:
            raise ValueError("instances: at least one source is needed")
        self.instances = instances
        self.name = instances[0].name
        self.n = instances[0].n

    def route(self, keys: IntArray) -> IntArray:
        """Route a batch, each source seeing its share in arrival order."""
        keys = as_keys(keys)
        out = np.empty(keys.size, dtype=np.int64)
        s = len(self.instances)
        for i, inst in enumerate(self.instances):
            out[i::s] = inst.route(keys[i::s])
        return out

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
    ) -> None:
        """Pass the feedback to every source."""
        for inst in self.instances:
            inst.feedback(loads, capacities, latencies)


@dataclass(frozen=True)
class WindowMetrics:
    """Routing quality of one window."""

    imbalance: float  # (max - mean) / mean of capacity-normalised loads
    lambda_max: float  # max_w L_w / C_w, relative to the perfect share
    fragmentation_mean: float  # workers per key
    fragmentation_max: int
    aggregation_cost: int  # distinct (key, worker) partials
    tuples: int


def window_metrics(
    keys: IntArray, workers: IntArray, n: int, capacities: Array | None = None
) -> WindowMetrics:
    """Imbalance, fragmentation and aggregation cost of one window's routing.

    Examples
    --------
    >>> m = window_metrics(np.array([1, 1, 2, 3]), np.array([0, 1, 0, 0]), 2)
    >>> m.imbalance, m.fragmentation_max, m.aggregation_cost
    (0.5, 2, 4)
    """
    cap = np.ones(n) if capacities is None else np.asarray(capacities, float)
    loads = np.bincount(workers, minlength=n).astype(float)
    total = loads.sum()
    if total == 0:
        return WindowMetrics(0.0, 0.0, 0.0, 0, 0, 0)
    share = loads / cap  # load per unit capacity
    fair = total / cap.sum()
    pairs = np.unique(keys * np.int64(n) + workers)
    per_key = np.bincount(np.unique(pairs // n, return_inverse=True)[1])
    return WindowMetrics(
        imbalance=float((share.max() - fair) / fair),
        lambda_max=float(share.max() / fair),
        fragmentation_mean=float(per_key.mean()),
        fragmentation_max=int(per_key.max()),
        aggregation_cost=int(pairs.size),
        tuples=int(total),
    )
