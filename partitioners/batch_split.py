"""Micro-batch hot-key splitting: a partitioner's choices turned into per-batch quotas.

On a micro-batch engine the whole batch's key counts are known before the shuffle (the idea
behind Prompt, Abdelhamid et al., SIGMOD 2020). Cold keys follow the placement's key-group
table; each hot key (share > ``1 / (5 n)``, the D-Choices head threshold) is spread over its
partitioner's *candidate set* — two hashed workers for PKG, ``d`` for D-Choices (``solve_d``
from the head's shares), all ``n`` for W-Choices, Prompt and the others — by water-filling:
hottest key first, its rows go to the least-loaded candidates (cold load included) until they
are level. Quotas under 1% are folded into the others. Hash keeps every key whole.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from partitioners.base import candidates
from partitioners.dchoices import solve_d

__all__ = ["candidate_set", "hot_keys", "split_hot_keys", "water_fill"]

IntArray = NDArray[np.int64]
Array = NDArray[np.float64]


def hot_keys(
    keys: IntArray, counts: Array, n: int, theta: float | None = None
) -> NDArray[np.bool_]:
    """Mask of keys whose share of the batch exceeds ``theta`` (default ``1 / (5 n)``)."""
    total = float(counts.sum())
    if total <= 0:
        return np.zeros(keys.size, dtype=bool)
    return np.asarray(counts / total > (1.0 / (5 * n) if theta is None else theta), dtype=bool)


def candidate_set(name: str, key: int, n: int, d: int = 2) -> IntArray:
    """The workers partitioner ``name`` may send ``key`` to."""
    if name == "pkg" or name == "capa" or name == "ecapa":
        return candidates(np.array([key]), n, min(2, n))[0]
    if name == "dchoices":
        return candidates(np.array([key]), n, min(d, n))[0]
    return np.arange(n, dtype=np.int64)


def water_fill(load: Array, cand: IntArray, amount: float) -> Array:
    """Spread ``amount`` over the candidates, filling the least-loaded first until level.

    Examples
    --------
    >>> water_fill(np.array([0.0, 2.0, 5.0]), np.array([0, 1, 2]), 4.0).tolist()
    [3.0, 1.0, 0.0]
    """
    base = load[cand].astype(float)
    order = np.argsort(base, kind="stable")
    b = base[order]
    give = np.zeros(cand.size)
    left = amount
    for i in range(cand.size):
        nxt = b[i + 1] if i + 1 < cand.size else np.inf
        need = (nxt - b[i]) * (i + 1) if np.isfinite(nxt) else np.inf
        if left <= need:
            give[: i + 1] += left / (i + 1)
            break
        give[: i + 1] += nxt - b[: i + 1] - give[: i + 1]
        left -= need
    out = np.zeros(cand.size)
    out[order] = give
    return out


def split_hot_keys(
    name: str,
    keys: IntArray,
    counts: Array,
    cold_pid: IntArray,
    n: int,
    capacity: Array | None = None,
    min_fraction: float = 0.01,
) -> dict[int, tuple[tuple[int, float], ...]]:
    """Quotas ``key -> ((pid, fraction), ...)`` for the batch's hot keys.

    ``cold_pid[i]`` is where key i goes by the table; capacities scale the levelling.

    Examples
    --------
    >>> q = split_hot_keys("wchoices", np.array([1, 2, 3]), np.array([80.0, 10.0, 10.0]),
    ...                    np.array([0, 0, 1]), 2)
    >>> sorted(q), round(sum(f for _, f in q[1]), 6)
    ([1], 1.0)
    """
    if name == "hash" or keys.size == 0:
        return {}
    cap = np.ones(n) if capacity is None else np.asarray(capacity, float)
    hot = hot_keys(keys, counts, n)
    load = np.bincount(cold_pid[~hot], weights=counts[~hot], minlength=n).astype(float)
    total = float(counts.sum())
    d = 2
    if name == "dchoices" and hot.any():
        shares = np.sort(counts[hot] / total)[::-1]
        d = solve_d(n, float(shares[0]), float(shares.sum()), int(hot.sum()))
    out: dict[int, tuple[tuple[int, float], ...]] = {}
    for i in np.flatnonzero(hot)[np.argsort(-counts[hot], kind="stable")]:
        cand = candidate_set(name, int(keys[i]), n, d)
        give = water_fill(load / cap, cand, counts[i]) * cap[cand]
        give = give / give.sum() if give.sum() > 0 else np.full(cand.size, 1.0 / cand.size)
        keep = give >= min_fraction
        give = np.where(keep, give, 0.0)
        give /= give.sum()
        load[cand] += give * counts[i]
        out[int(keys[i])] = tuple(
            (int(p), float(f)) for p, f in zip(cand[keep], give[keep], strict=True)
        )
    return out
