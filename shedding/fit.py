"""Feasible Input Tables (FIT), centralised form.

Tatbul, Cetintemel, Zdonik, "Staying FIT", VLDB 2007 (reconstruction; the paper body was not
checked). Each node builds the table of drop-location input-rate combinations it can carry
(on a grid of keep fractions of resolution ``1/grid``), with dominated entries pruned: an entry
is dominated when another is >= in every rate and scores higher. The root combines the tables:
a combination is feasible when every node's projection is in that node's table, and at run
time the best-scoring feasible entry below the measured rates is chosen. Cheap at run time,
exponential in the number of locations, so grids must stay coarse.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from numpy.typing import NDArray

from core.plans import ShedPlan
from shedding.loadmodel import ShedModel
from shedding.lp import node_loads, settings, validate_model, weighted_output

__all__ = ["fit_plan", "node_tables", "prune_dominated"]

Array = NDArray[np.float64]
MAX_ENTRIES = 2_000_000


def _grid(n_loc: int, grid: int) -> Array:
    if (grid + 1) ** n_loc > MAX_ENTRIES:
        raise ValueError(
            f"grid: {(grid + 1) ** n_loc} entries for {n_loc} locations exceed {MAX_ENTRIES}; use a coarser grid"
        )
    steps = np.linspace(0.0, 1.0, grid + 1)
    return np.array(list(itertools.product(steps, repeat=n_loc)), dtype=float).reshape(-1, n_loc)


def prune_dominated(rates: Array, score: Array) -> NDArray[np.bool_]:
    """Mask of entries no other entry dominates (>= in every rate and a higher score)."""
    keep = np.ones(len(score), dtype=bool)
    order = np.argsort(-score, kind="stable")
    for a_i, a in enumerate(order):
        if not keep[a]:
            continue
        later = order[a_i + 1 :]
        dom = np.all(rates[a][None, :] >= rates[later] - 1e-12, axis=1) & (score[later] < score[a])
        keep[later[dom]] = False
    return keep


def node_tables(
    model: ShedModel, capacity: Array, grid: int = 20, headroom: float = 1.0
) -> list[tuple[Array, Array]]:
    """Per node: (feasible input-rate entries, their scores) over the locations it serves."""
    out = []
    g = _grid(len(model.locations), grid)
    for j in range(model.load.shape[1]):
        touch = model.load[:, j] > 0
        proj = np.unique(g[:, touch], axis=0) if touch.any() else np.zeros((1, 0))
        r = proj * model.rate[touch]
        ok = r @ model.load[touch, j] <= headroom * capacity[j] + 1e-12
        ent, sc = r[ok], (r[ok] @ model.gain[touch])
        keep = prune_dominated(ent, sc) if len(sc) < 5000 else np.ones(len(sc), bool)
        out.append((ent[keep], sc[keep]))
    return out


def fit_plan(
    model: ShedModel,
    capacity: Array,
    grid: int = 20,
    headroom: float = 1.0,
    node_ids: tuple[str, ...] | None = None,
) -> ShedPlan:
    """The best feasible grid entry at the model's rates (equal to the LP up to the grid).

    Examples
    --------
    >>> m = ShedModel(("s1", "s2"), np.array([[1.0, 3.0], [2.0, 1.0]]), np.ones(2), np.ones(2),
    ...               np.array([-1, -1]), np.zeros(2))
    >>> p = fit_plan(m, np.ones(2), grid=20)
    >>> p.keep, round(p.objective, 6)
    ((0.2, 0.4), 0.6)
    """
    validate_model(model, capacity)
    t0 = time.perf_counter()
    cap = np.asarray(capacity, float)
    g = _grid(len(model.locations), grid)
    g[:, model.rate <= 0] = 1.0
    split = model.parent >= 0
    if split.any():  # a split drop keeps no more than its parent
        g = g[np.all(g[:, split] <= g[:, model.parent[split]] + 1e-12, axis=1)]
    loads = (g * model.rate) @ model.load + model.background
    feas = np.all(loads <= headroom * cap + 1e-12, axis=1)
    score = (g * model.rate) @ model.gain
    best = int(np.argmax(np.where(feas, score, -np.inf)))
    x = g[best] if feas.any() else np.zeros(len(model.locations))
    ids = node_ids or tuple(f"n{j}" for j in range(cap.size))
    nl = node_loads(model, x)
    sizes = (
        [len(s) for _, s in node_tables(model, cap, min(grid, 10), headroom)]
        if len(model.locations) <= 4
        else []
    )
    return ShedPlan(
        method="fit",
        locations=model.locations,
        keep=tuple(round(v, 12) for v in settings(model, x)),
        objective=weighted_output(model, x),
        node_loads={ids[j]: float(nl[j]) for j in range(cap.size)},
        status=f"grid 1/{grid}; node table sizes {sizes}",
        solve_time_s=time.perf_counter() - t0,
    )
