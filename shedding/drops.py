"""Deterministic drop decisions: the same (tuple id, batch) always gets the same answer.

Random drops use a stable hash of the tuple id and the batch (or tick) id mapped to [0, 1):
a tuple is kept when that value is below the keep fraction, so a replayed batch drops exactly
the same tuples (``sample()`` would not). The semantic mode keeps the highest-utility tuples:
it drops the lowest ``1 - keep`` fraction by a utility computed from a value field.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from core.hashing import stable_uniform

__all__ = ["drop_seed", "keep_mask", "semantic_keep_mask", "uniform_of"]


def drop_seed(batch_id: int, seed: int = 0) -> int:
    """The hash seed of a batch's drop decisions (Spark: ``xxhash64(event_id, <this>)``)."""
    return int(batch_id) * 1_000_003 + int(seed) + 1


def uniform_of(tuple_ids: ArrayLike, batch_id: int, seed: int = 0) -> NDArray[np.float64]:
    """A uniform in [0, 1) per (tuple id, batch): the top 53 bits of the stable hash.

    Spark computes the same value as
    ``shiftrightunsigned(xxhash64(event_id, drop_seed(b)), 11) / 2^53``.
    """
    return stable_uniform(tuple_ids, drop_seed(batch_id, seed))


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
    return np.asarray(uniform_of(tuple_ids, batch_id, seed) < keep, dtype=bool)


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
