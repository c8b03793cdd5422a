"""What a key stream will ask of the partitioners: skew, its hot set's churn, its rate.

Pure numpy over an event stream's times and integer keys. ``zipf_fit`` fits the exponent of
the rank-frequency curve (least squares on log frequency against log rank over the top
ranks); ``hot_set_churn`` is the mean Jaccard distance between consecutive windows' top-k key
sets (0: the same hot keys throughout, 1: a new hot set every window).
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

__all__ = ["hot_set_churn", "rate_series", "top_keys", "zipf_fit"]

IntArray = NDArray[np.int64]


def zipf_fit(keys: IntArray, max_rank: int = 1000) -> float | None:
    """The Zipf exponent s of the keys' rank-frequency curve; None for fewer than 3 distinct
    keys (two points fit any exponent: 0 would read as a uniform stream).

    Examples
    --------
    >>> ranks = np.arange(1, 201)
    >>> keys = np.repeat(ranks, (10_000 / ranks**1.2).astype(int))
    >>> round(zipf_fit(keys), 1)
    1.2
    """
    _, counts = np.unique(keys, return_counts=True)
    freq = np.sort(counts)[::-1][:max_rank].astype(float)
    if freq.size < 3:
        return None
    r = np.log(np.arange(1, freq.size + 1))
    slope = np.polyfit(r, np.log(freq), 1)[0]
    return float(-slope)


def top_keys(keys: IntArray, k: int = 10) -> list[tuple[int, float]]:
    """The ``k`` most frequent keys with their share of the stream, hottest first."""
    uk, counts = np.unique(keys, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:k]
    total = max(int(counts.sum()), 1)
    return [(int(uk[i]), float(counts[i] / total)) for i in order]


def _windows(ts: NDArray[np.float64], window_s: float) -> IntArray:
    return np.floor((ts - ts.min()) / window_s).astype(np.int64)


def rate_series(ts: NDArray[np.float64], window_s: float = 1.0) -> NDArray[np.float64]:
    """Events per second in consecutive windows of ``window_s`` seconds (empty ones too)."""
    if ts.size == 0:
        return np.zeros(0)
    return np.bincount(_windows(ts, window_s)).astype(float) / window_s


def hot_set_churn(
    ts: NDArray[np.float64], keys: IntArray, window_s: float = 1.0, k: int = 10
) -> float:
    """Mean Jaccard distance between consecutive non-empty windows' top-``k`` key sets.

    Examples
    --------
    >>> ts = np.repeat([0.0, 1.0, 2.0], 4)
    >>> hot_set_churn(ts, np.array([1, 1, 2, 3] * 2 + [7, 7, 8, 9]), k=3)
    0.5
    """
    if ts.size == 0:
        return 0.0
    w = _windows(ts, window_s)
    order = np.argsort(w, kind="stable")
    parts = np.split(keys[order], np.flatnonzero(np.diff(w[order])) + 1)
    sets = [{key for key, _ in top_keys(p, k)} for p in parts]
    if len(sets) < 2:
        return 0.0
    d = [1.0 - len(a & b) / len(a | b) for a, b in itertools.pairwise(sets)]
    return float(np.mean(d))
