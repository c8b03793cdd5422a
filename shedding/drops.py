"""Deterministic drop decisions: the same (tuple id, batch) always gets the same answer.

Random drops use a stable hash of the tuple id and the batch (or tick) id mapped to [0, 1):
a tuple is kept when that value is below the keep fraction, so a replayed batch drops exactly
the same tuples (``sample()`` would not). The semantic mode keeps the highest-utility tuples:
it drops the lowest ``1 - keep`` fraction by a utility computed from a value field.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from core.hashing import stable_hash

__all__ = ["keep_mask", "semantic_keep_mask"]


def keep_mask(tuple_ids: ArrayLike, batch_id: int, keep: float, seed: int = 0) -> NDArray[np.bool_]:
    """Keep each tuple with probability ``keep``, deterministically per (tuple id, batch id).

    Examples
    --------
    >>> ids = np.arange(10_000)
    >>> m = keep_mask(ids, 7, 0.3)
    >>> bool((m == keep_mask(ids, 7, 0.3)).all()), round(float(m.mean()), 2)
    (True, 0.3)
    """
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep: fraction {keep} outside [0, 1]")
    ids = np.asarray(tuple_ids, dtype=np.int64)
    h = stable_hash(ids ^ np.int64(batch_id * 0x2545F491), seed=seed + 7)
    u = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return np.asarray(u < keep, dtype=bool)


def semantic_keep_mask(
    values: ArrayLike, keep: float, utility: str = "identity"
) -> NDArray[np.bool_]:
    """Keep the ``keep`` fraction of tuples with the highest utility (ties by position).

    Examples
    --------
    >>> semantic_keep_mask([5, 1, 9, 3], 0.5).tolist()
    [True, False, True, False]
    """
    if not 0.0 <= keep <= 1.0:
        raise ValueError(f"keep: fraction {keep} outside [0, 1]")
    v = np.asarray(values, dtype=float)
    u = {"identity": v, "negate": -v, "abs": np.abs(v)}.get(utility)
    if u is None:
        raise ValueError(f"utility: unknown utility function {utility!r}")
    n_keep = round(keep * v.size)
    order = np.lexsort((np.arange(v.size), -u))
    out = np.zeros(v.size, dtype=bool)
    out[order[:n_keep]] = True
    return out
