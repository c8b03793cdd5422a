"""Window-aware drops: shed whole windows in front of a windowed aggregate.

Tatbul and Zdonik, "Window-aware load shedding for aggregation queries over data streams",
VLDB 2006: dropping single tuples before a windowed aggregate yields *wrong* window values;
dropping whole windows keeps the output a subset of the exact answer. trimtab applies the
keep fraction ``x`` to window ids: window ``j`` (panes ``j .. j+w-1``, start ``j * slide``) has
a fixed uniform ``u(j)`` (a stable hash of its *block* ``j // B``, independent of the batch), and

* a tuple in pane ``p`` is dropped early, in batch ``b``, when every window it belongs to
  (``j`` in ``p-w+1 .. p``) has ``u(j) >= floor_j(b)``, the smallest keep of the batches that
  could have fed window ``j`` so far (``b`` included): no window that can still be emitted
  needs it, and a window an earlier, lower keep already ruled out takes no more tuples;
* window ``j`` is emitted, in the batch ``e`` that closes it, only if ``u(j) < floor_j``, the
  smallest keep of every batch that could have delivered its tuples: batch ``e`` and every
  earlier batch ``b`` whose successor's watermark reached the window's start. Watermarks only
  grow, so those batches are a suffix ``b_min .. e`` and ``floor_j`` is a suffix minimum.

Windows are decided in blocks of ``B`` consecutive ids (``B = 4w`` for sliding windows, 1 for
tumbling ones): a tuple of a sliding window belongs to ``w`` windows, and deciding them one by
one would almost never free a tuple; with blocks, most tuples' windows fall in one block, so
a dropped block frees its tuples (Window Drop's idea of disabling whole stretches of windows).

So an emitted window saw all of its tuples: each arrived in a batch whose keep exceeded
``u(j)``, and ``j`` is one of the tuple's windows. Everything here derives from the plan log
(pinned plans and watermarks), so a replay or a restored driver decides exactly the same.
With several input streams the window keeps the smallest keep of the streams.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shedding.drops import uniform_of

__all__ = [
    "WINDOW_BATCH",
    "block_size",
    "early_keep_mask",
    "floor_keep_mask",
    "floor_steps",
    "step_value",
    "window_floor",
    "window_uniform",
]

Array = NDArray[np.float64]
WINDOW_BATCH = -1  # the window uniform's hash seed is ``drop_seed(WINDOW_BATCH)``: no batch's


def block_size(w: int) -> int:
    """Windows decided together: 1 for tumbling windows, ``4 w`` for sliding ones."""
    return 1 if w <= 1 else 4 * w


def window_uniform(windows: ArrayLike, block: int = 1) -> Array:
    """``u(j)``: the same uniform in [0, 1) for window ``j`` in every batch, from its block
    ``j // block`` (Spark: ``xxhash64(floor(j / block), drop_seed(-1))``)."""
    j = np.asarray(windows, dtype=np.int64)
    return uniform_of(np.floor_divide(j, block), WINDOW_BATCH)


def early_keep_mask(panes: ArrayLike, w: int, keep: float, block: int = 1) -> NDArray[np.bool_]:
    """Keep a tuple of pane ``p`` iff some window ``p-w+1 .. p`` has ``u(j) < keep``.

    Examples
    --------
    >>> bool(early_keep_mask([5], 1, 1.0)[0]), bool(early_keep_mask([5], 3, 0.0)[0])
    (True, False)
    """
    p = np.asarray(panes, dtype=np.int64)
    if keep >= 1.0:
        return np.ones(p.size, dtype=bool)
    lo, hi = np.floor_divide(p - w + 1, block), np.floor_divide(p, block)
    keep_lo = uniform_of(lo, WINDOW_BATCH) < keep
    keep_hi = uniform_of(hi, WINDOW_BATCH) < keep
    if block >= w:  # the windows of a pane span at most two blocks
        return np.asarray(keep_lo | keep_hi)
    offs = np.arange(w, dtype=np.int64)
    u = window_uniform((p[:, None] - offs[None, :]).ravel(), block).reshape(p.size, w)
    return np.asarray((u < keep).any(axis=1))


def step_value(x: ArrayLike, thresholds: ArrayLike, values: ArrayLike, default: float) -> Array:
    """A step function at ``x``: ``values[i]`` for the first ``i`` with ``x <= thresholds[i]``
    (thresholds ascending), else ``default`` (Spark: ``CASE WHEN x <= t0 THEN v0 ... END``)."""
    xs = np.asarray(x, dtype=float)
    th = np.asarray(thresholds, dtype=float)
    val = np.asarray(values, dtype=float)
    out = np.full(xs.shape, float(default))
    if th.size:
        i = np.searchsorted(th, xs, side="left")
        inside = i < th.size
        out[inside] = val[i[inside]]
    return out


def floor_keep_mask(
    panes: ArrayLike,
    w: int,
    slide: float,
    block: int,
    thresholds: ArrayLike,
    values: ArrayLike,
    default: float,
) -> NDArray[np.bool_]:
    """Keep a tuple of pane ``p`` iff some window ``j`` in ``p-w+1 .. p`` has ``u(j) < floor_j``,
    the floor so far (this batch's ``floor_steps``, as a step function of the window start).

    Stricter than ``early_keep_mask`` with this batch's keep: a window that an earlier batch's
    lower keep already rules out takes no more tuples, yet every window that can still be
    emitted keeps all of them (its floor at emission is at most its floor now). The floor is
    non-decreasing in the window start, so within a block only the pane's last window counts.

    Examples
    --------
    No steps: the floor is this batch's keep, as in ``early_keep_mask``.

    >>> p = np.arange(40)
    >>> bool((floor_keep_mask(p, 3, 2.0, 12, [], [], 0.5) == early_keep_mask(p, 3, 0.5, 12)).all())
    True
    """
    p = np.asarray(panes, dtype=np.int64)
    lo, hi = np.floor_divide(p - w + 1, block), np.floor_divide(p, block)
    out = np.zeros(p.size, dtype=bool)
    for k in range(int((hi - lo).max(initial=0)) + 1):
        bk = lo + k
        last = np.minimum(p, (bk + 1) * block - 1)  # the block's last window holding pane p
        floor = step_value(last.astype(float) * slide, thresholds, values, default)
        out |= (bk <= hi) & (uniform_of(bk, WINDOW_BATCH) < floor)
    return out


def floor_steps(
    next_wm: ArrayLike, keeps: ArrayLike, keep_now: float
) -> tuple[Array, Array, float]:
    """The step function ``floor(start)`` of the batch that closes windows now.

    ``next_wm[i]`` is the watermark pinned right after earlier batch ``i`` (so the newest event
    time seen up to batch i) and ``keeps[i]`` its keep; ``keep_now`` is the closing batch's.
    Returns thresholds, values and the default: the floor of a window starting at ``x`` is
    ``values[i]`` for the first ``i`` with ``x <= thresholds[i]``, else ``default``.
    """
    wm = np.asarray(next_wm, dtype=float)
    k = np.asarray(keeps, dtype=float)
    if wm.size == 0:
        return np.zeros(0), np.zeros(0), float(keep_now)
    suffix = np.minimum.accumulate(np.append(k, keep_now)[::-1])[::-1][:-1]  # min over i..now
    return wm, suffix, float(keep_now)


def window_floor(starts: ArrayLike, next_wm: ArrayLike, keeps: ArrayLike, keep_now: float) -> Array:
    """``floor_j`` for windows starting at ``starts`` closed by the current batch.

    Examples
    --------
    Batches with keeps 1.0, 0.5, 1.0 whose next watermarks were 10, 20, 30; the closing batch
    keeps 0.8. A window starting at 15 could take tuples from batches 1, 2 and now: 0.5.

    >>> window_floor([5, 15, 25, 35], [10, 20, 30], [1.0, 0.5, 1.0], 0.8).tolist()
    [0.5, 0.5, 0.8, 0.8]
    """
    th, val, default = floor_steps(next_wm, keeps, keep_now)
    return step_value(starts, th, val, default)  # first batch whose next watermark >= start
