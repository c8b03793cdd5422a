"""Overload descent: the single-unit moves that most lower the load above capacity.

trimtab's extension, a refinement of the stale-placement trigger's global step. Correlation-based
placement (Xing, Zdonik, Hwang, ICDE 2005) lowers node-load variance among plans whose node
means stay balanced. That constraint can forbid the plan that removes overload: when the
phase-B work is a few heavy units and the phase-A work many light ones, every balanced plan
puts light A units beside a heavy A unit, and that node peaks above its capacity. This pass
works on the measure migration-aware moves are judged by (``placement.migration_cost.overload``:
the mean over the window's samples of sum_i max(0, N_i(t) - theta x C_i)):

* each step takes the most overloaded node that has a move lowering the overload, scores in
  closed form every move of one of its units to any other node (only the two touched nodes'
  excess changes), and applies the best;
* it stops when no move lowers it, or after ``max_steps``;
* units lighter than the load-selection threshold (0.005) never move.

Node means are not balanced: a node may carry more mean load while it stays under theta.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["reduce_overload"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]
TOL = 1e-12


def _excess(x: Array, limit: Array | float) -> Array:
    """Sum over the last axis of the load above ``limit``."""
    return np.asarray(np.maximum(x - limit, 0.0).sum(axis=-1), dtype=float)


def reduce_overload(
    unit_x: Array,
    assign: IntArray,
    capacity: Array,
    theta: float = 0.9,
    load_threshold: float = 0.005,
    max_steps: int = 64,
) -> int:
    """Lower the overload of ``assign`` in place; returns the number of moves made.

    Examples
    --------
    Two rising units share a node and peak at 1.1; a falling one is alone on the other. One
    move, a rising unit beside the falling one, leaves both nodes under 0.9:

    >>> t = np.sin(np.linspace(0, 2 * np.pi, 8, endpoint=False))
    >>> x = np.stack([0.3 + 0.25 * t, 0.3 + 0.25 * t, 0.3 - 0.25 * t])
    >>> a = np.array([0, 0, 1])
    >>> reduce_overload(x, a, np.ones(2)), a.tolist()
    (1, [1, 0, 1])
    """
    m, k = unit_x.shape
    n = capacity.size
    if m == 0 or k == 0 or n < 2:
        return 0
    limit = theta * capacity.astype(float)
    movable = unit_x.mean(axis=1) >= load_threshold
    nodes = np.zeros((n, k))
    np.add.at(nodes, assign, unit_x)
    steps = 0
    for _ in range(max_steps):
        exc = _excess(nodes, limit[:, None])
        if not _move_one(unit_x, assign, nodes, limit, exc, movable, k):
            break
        steps += 1
    return steps


def _move_one(
    unit_x: Array,
    assign: IntArray,
    nodes: Array,
    limit: Array,
    exc: Array,
    movable: NDArray[np.bool_],
    k: int,
) -> bool:
    """Apply the best move off the most overloaded node that has one; False if none has."""
    for src in np.argsort(-exc, kind="stable"):
        if exc[src] <= TOL:
            return False
        cand = np.flatnonzero(movable & (assign == src))
        if cand.size == 0:
            continue
        x = unit_x[cand]  # (U, k)
        # the source's excess without each unit, and every node's with it
        off = _excess(nodes[src] - x, limit[src]) - exc[src]  # (U,)
        on = _excess(nodes[None, :, :] + x[:, None, :], limit[None, :, None]) - exc[None, :]
        delta = off[:, None] + on  # (U, n)
        delta[:, src] = np.inf  # staying is not a move
        u, dst = np.unravel_index(int(np.argmin(delta)), delta.shape)
        if delta[u, dst] < -TOL * k:
            unit = cand[u]
            nodes[src] -= unit_x[unit]
            nodes[dst] += unit_x[unit]
            assign[unit] = dst
            return True
    return False
