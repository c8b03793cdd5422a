"""Shedding baselines: uniform input drop, uncoordinated local shedding, no shedding.

* **uniform**: one keep fraction for every location, limited by the tightest node:
  ``x = min(1, min_j C_j / load_j)``.
* **local** (Tatbul et al.'s "optimal for A" case): nodes decide in upstream-to-downstream
  order; each solves its own LP maximizing the tuples it processes, given what it receives,
  unaware of downstream nodes. Effective keep fractions multiply along the path.
* **none**: keep everything (queues grow).
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray

from core.plans import ShedPlan
from shedding.loadmodel import ShedModel
from shedding.lp import node_loads, settings, solve_lp, validate_model, weighted_output

__all__ = ["local_greedy", "no_shedding", "uniform"]

Array = NDArray[np.float64]


def _plan(method: str, model: ShedModel, x: Array, ids: tuple[str, ...], t0: float) -> ShedPlan:
    loads = node_loads(model, x)
    return ShedPlan(
        method=method,
        locations=model.locations,
        keep=settings(model, x),
        objective=weighted_output(model, x),
        node_loads={ids[j]: float(loads[j]) for j in range(len(ids))},
        solve_time_s=time.perf_counter() - t0,
    )


def _ids(model: ShedModel, node_ids: tuple[str, ...] | None) -> tuple[str, ...]:
    return node_ids or tuple(f"n{j}" for j in range(model.load.shape[1]))


def uniform(
    model: ShedModel,
    capacity: Array,
    headroom: float = 1.0,
    node_ids: tuple[str, ...] | None = None,
) -> ShedPlan:
    """The same keep fraction everywhere, set by the tightest node.

    Examples
    --------
    >>> m = ShedModel(("s1", "s2"), np.array([[1.0, 3.0], [2.0, 1.0]]), np.ones(2), np.ones(2),
    ...               np.array([-1, -1]), np.zeros(2))
    >>> uniform(m, np.ones(2)).objective
    0.5
    """
    validate_model(model, capacity)
    t0 = time.perf_counter()
    full = node_loads(model, np.ones(len(model.locations)))
    cap = headroom * np.asarray(capacity, float)
    ratio = float(
        np.min(np.divide(cap, full, out=np.full(full.size, np.inf), where=full > 0), initial=np.inf)
    )
    return _plan(
        "uniform", model, np.full(len(model.locations), min(1.0, ratio)), _ids(model, node_ids), t0
    )


def local_greedy(
    model: ShedModel,
    capacity: Array,
    headroom: float = 1.0,
    node_ids: tuple[str, ...] | None = None,
    order: list[int] | None = None,
) -> ShedPlan:
    """Each node sheds only its own overload, upstream nodes first.

    ``order`` lists node indices upstream first (default: index order).

    Examples
    --------
    >>> m = ShedModel(("s1", "s2"), np.array([[1.0, 3.0], [2.0, 1.0]]), np.ones(2), np.ones(2),
    ...               np.array([-1, -1]), np.zeros(2))
    >>> round(local_greedy(m, np.ones(2)).objective, 6)
    0.333333
    """
    validate_model(model, capacity)
    t0 = time.perf_counter()
    n_loc, n = model.load.shape
    x = np.ones(n_loc)
    for j in order or list(range(n)):
        touch = np.flatnonzero(model.load[:, j] > 0)
        if touch.size == 0:
            continue
        # the node's own LP: max tuples processed, over local fractions y <= 1 of what arrives
        local = ShedModel(
            locations=tuple(model.locations[i] for i in touch),
            load=model.load[touch][:, [j]],
            rate=model.rate[touch] * x[touch],
            gain=np.ones(touch.size),
            parent=np.full(touch.size, -1),
            background=model.background[[j]],
        )
        plan = solve_lp(local, np.asarray(capacity, float)[[j]], headroom)
        y = np.ones(touch.size)
        for a in range(touch.size):  # a setting of 1 on a zero-rate input is meaningless
            y[a] = plan.keep[a] if local.rate[a] > 0 else 1.0
        x[touch] = x[touch] * y
    return _plan("local", model, x, _ids(model, node_ids), t0)


def no_shedding(
    model: ShedModel,
    capacity: Array,
    headroom: float = 1.0,
    node_ids: tuple[str, ...] | None = None,
) -> ShedPlan:
    """Keep everything (the objective is then the unconstrained ceiling)."""
    validate_model(model, capacity)
    return _plan(
        "none", model, np.ones(len(model.locations)), _ids(model, node_ids), time.perf_counter()
    )
