"""Migration-aware moves: a move must remove more overload than its pause costs.

trimtab's extension; Borealis's correlation placement ignores migration cost. A proposal's
expected gain and its pause are both measured in CPU-seconds:

* **gain** = (overload before - overload after) x ``horizon_s``. A placement's overload is the
  mean, over the window's samples, of sum_i max(0, N_i(t) - theta x C_i): the load above
  ``theta`` (0.9, Borealis's ``overloaded_threshold``) of each node's capacity, which is what
  queues and becomes latency.
* **pause** = sum over the moved units of pause_s(u) x load(u), where pause_s(u) = base +
  per-MB cost x the unit's state: the unit's input queues on its receiver while its state moves
  (the simulator charges exactly this work).

A proposal is worth making when its gain is at least its pause. A move that only evens out
load below ``theta`` gains nothing and is not made: it would pay a pause for no latency.

``closest_labels`` renames the nodes of a freshly computed global plan so that as much of the
current placement as possible stays where it is (a linear assignment on the nodes' overlap):
a global step computed from scratch otherwise moves nearly every unit just by naming its nodes
differently. ``keep_in_place`` does the same per unit for a pair's new plan (two-way): a unit
that moved goes back when the pair's max divergent load does not rise.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["closest_labels", "expected_gain", "keep_in_place", "overload", "pause_cost"]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


def overload(node_x: Array, capacity: Array, theta: float = 0.9) -> float:
    """Mean over samples of the load above ``theta`` x capacity, summed over nodes (cores).

    >>> overload(np.array([[0.5, 1.2], [0.95, 0.2]]), np.ones(2))
    0.175
    """
    if node_x.size == 0:
        return 0.0
    excess = np.maximum(node_x - theta * capacity[:, None], 0.0)
    return float(np.round(excess.sum(axis=0).mean(), 12))


def _node_x(unit_x: Array, assign: IntArray, nodes: IntArray) -> Array:
    """Load series (len(nodes), k) of the listed nodes under ``assign``."""
    lookup = np.full(int(max(assign.max(initial=0), nodes.max(initial=0))) + 1, -1)
    lookup[nodes] = np.arange(nodes.size)
    row = lookup[assign]
    keep = row >= 0
    out = np.zeros((nodes.size, unit_x.shape[1]))
    np.add.at(out, row[keep], unit_x[keep])
    return out


def expected_gain(
    unit_x: Array,
    before: IntArray,
    after: IntArray,
    capacity: Array,
    theta: float = 0.9,
    horizon_s: float = 60.0,
) -> float:
    """CPU-seconds of overload the change from ``before`` to ``after`` removes over
    ``horizon_s``, judged on the window ``unit_x`` (m, k); only the nodes a move touches count.

    >>> x = np.array([[0.6, 0.6], [0.6, 0.6], [0.1, 0.1]])
    >>> expected_gain(x, np.array([0, 0, 1]), np.array([0, 1, 1]), np.ones(2), horizon_s=10)
    3.0
    """
    moved = before != after
    if not moved.any():
        return 0.0
    nodes = np.union1d(before[moved], after[moved]).astype(np.int64)
    cap = capacity[nodes]
    was = overload(_node_x(unit_x, before, nodes), cap, theta)
    now = overload(_node_x(unit_x, after, nodes), cap, theta)
    return (was - now) * horizon_s


def pause_cost(unit_x: Array, before: IntArray, after: IntArray, pause_s: Array) -> float:
    """CPU-seconds the moves from ``before`` to ``after`` cost: each moved unit's pause times
    its mean load.

    >>> x = np.array([[0.2, 0.4], [1.0, 1.0]])
    >>> round(pause_cost(x, np.array([0, 0]), np.array([1, 0]), np.array([0.5, 0.5])), 9)
    0.15
    """
    moved = before != after
    return float((pause_s[moved] * unit_x[moved].mean(axis=1)).sum())


def closest_labels(target: IntArray, current: IntArray, weight: Array, capacity: Array) -> IntArray:
    """``target`` with its nodes renamed (among nodes of equal capacity) so that the weight of
    the units that stay where ``current`` has them is the largest.

    >>> closest_labels(np.array([1, 1, 0]), np.array([0, 0, 1]), np.ones(3), np.ones(2))
    array([0, 0, 1])
    """
    n = capacity.size
    overlap = np.zeros((n, n))
    np.add.at(overlap, (target, current), weight)  # target label x current node
    same = np.isclose(capacity[:, None], capacity[None, :])
    score = np.where(same, overlap, -1e18)
    from scipy.optimize import linear_sum_assignment  # here: scipy costs every CLI start 0.2 s

    rows, cols = linear_sum_assignment(score, maximize=True)
    rename = np.arange(n)
    rename[rows] = cols
    return rename[target].astype(np.int64)


def keep_in_place(
    unit_x: Array,
    before: IntArray,
    assign: IntArray,
    pair: tuple[int, int],
    capacity: Array,
    beta: float = 1.0,
) -> None:
    """Send back each unit of a pair's new plan ``assign`` that moved since ``before``,
    heaviest first, while the pair's max divergent load (mean + beta x std of the
    capacity-normalised node series) stays at most the new plan's: the same quality for fewer
    migrations (mutates ``assign``).

    Each trial is O(1): a node's divergent load comes from its series' sum and sum of squares,
    and a unit's dot products with both nodes are kept up to date as units go back.
    """
    moved = np.flatnonzero(assign != before)
    if moved.size == 0:
        return
    k = unit_x.shape[1]
    moved = moved[np.argsort(-unit_x[moved].mean(axis=1), kind="stable")]
    x = unit_x[moved]
    gram, total = x @ x.T, x.sum(axis=1)
    series = {j: unit_x[assign == j].sum(axis=0) for j in pair}
    s1 = {j: float(series[j].sum()) for j in pair}
    s2 = {j: float(series[j] @ series[j]) for j in pair}
    dot = {j: x @ series[j] for j in pair}

    def divergent(j: int, a: float, b: float) -> float:
        mean = a / k
        return (mean + beta * np.sqrt(max(b / k - mean * mean, 0.0))) / float(capacity[j])

    limit = max(divergent(j, s1[j], s2[j]) for j in pair) + 1e-9
    for i, u in enumerate(moved.tolist()):
        a, b = int(assign[u]), int(before[u])
        sa, qa = s1[a] - total[i], s2[a] - 2 * dot[a][i] + gram[i, i]
        sb, qb = s1[b] + total[i], s2[b] + 2 * dot[b][i] + gram[i, i]
        if max(divergent(a, sa, qa), divergent(b, sb, qb)) <= limit:
            assign[u] = b
            s1[a], s2[a], s1[b], s2[b] = sa, qa, sb, qb
            dot[a] = dot[a] - gram[:, i]
            dot[b] = dot[b] + gram[:, i]
