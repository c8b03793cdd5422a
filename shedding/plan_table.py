"""Shedding plans in advance: a lazily filled, LRU-bounded table of LP plans on a rate grid.

Tatbul, Cetintemel, Zdonik, "Staying FIT", VLDB 2007 (plans computed ahead of need; the grid
is a trimtab choice). Each input's rate axis is cut into steps of ``step`` x the largest rate
seen over the recent ``horizon`` lookups, from 0 to 1.5x that maximum:

1. round each measured input rate **down** to the grid;
2. look the grid point up, solving the LP there on a miss (at most ``max_entries`` plans are
   kept, least recently used first out);
3. admit ``x_i = min(1, g_i x*_i / r_i)``: the admitted rate never exceeds the planned one, so
   the plan stays feasible at the measured rates; the throughput lost against the LP at the
   measured rates is at most ``sum_i gain_i * delta_i`` (the rounding error);
4. forget every plan when the load model moves by more than ``tolerance`` (costs,
   selectivities, capacities, relative to their largest value) or the placement version
   changes.

Split-drop locations scale with the input above them, so their effective keep fractions take
the same ``g / r`` factor and ``z_b <= x_a`` still holds.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from core.plans import ShedPlan
from shedding.loadmodel import ShedModel
from shedding.lp import effective, node_loads, settings, solve_lp, weighted_output

__all__ = ["PlanTable", "TableStats"]

Array = NDArray[np.float64]


@dataclass
class TableStats:
    """Lookups answered from the table, plans solved, and times the table was cleared."""

    hits: int = 0
    misses: int = 0
    replans: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / max(1, self.hits + self.misses)


def _roots(parent: NDArray[np.int64]) -> NDArray[np.int64]:
    """The input location above each location (itself for inputs)."""
    return np.where(parent >= 0, parent, np.arange(parent.size))


class PlanTable:
    """LP plans cached on a rate grid; see the module docstring for the rule."""

    def __init__(
        self,
        step: float = 0.1,
        max_entries: int = 4096,
        tolerance: float = 0.1,
        horizon: int = 360,
        time_limit_s: float = 1.0,
    ) -> None:
        if not 0 < step <= 1:
            raise ValueError(f"step: {step} must be in (0, 1]")
        if max_entries < 1:
            raise ValueError(f"max_entries: {max_entries} must be >= 1")
        self.step, self.max_entries, self.tolerance = step, max_entries, tolerance
        self.time_limit_s = time_limit_s
        self.plans: OrderedDict[tuple[int, ...], tuple[Array, dict[str, float]]] = OrderedDict()
        self.stats = TableStats()
        self._recent: deque[Array] = deque(maxlen=horizon)
        self._ref: tuple[Array, ...] | None = None
        self._version: int | None = None
        self._delta: Array | None = None  # grid step per input, fixed until the next rebuild

    def _fingerprint(self, model: ShedModel, limit: Array) -> tuple[Array, ...]:
        return (model.load, model.gain, model.background, limit, model.parent.astype(float))

    def _stale(self, fp: tuple[Array, ...], version: int | None) -> bool:
        if self._ref is None or version != self._version:
            return True
        for a, b in zip(fp, self._ref, strict=True):
            if a.shape != b.shape:
                return True
            scale = max(float(np.abs(b).max(initial=0.0)), 1e-12)
            if float(np.abs(a - b).max(initial=0.0)) > self.tolerance * scale:
                return True
        return False

    def grid(self, model: ShedModel) -> tuple[Array, tuple[int, ...]]:
        """Grid rates of the inputs (rounded down) and the table key, after recording the rates.

        The step is fixed when the table is (re)built, so a key always means the same rates; a
        rate beyond the grid's end (1.5x the maximum it was built for) rebuilds it.
        """
        inputs = np.flatnonzero(model.parent < 0)
        r = model.rate[inputs]
        self._recent.append(r.copy())
        top = np.max(np.stack(self._recent), axis=0)
        beyond = self._delta is not None and np.any(r > (1.5 / self.step) * self._delta + 1e-12)
        if self._delta is None or self._delta.shape != r.shape or beyond:
            if self._delta is not None:
                self.stats.replans += 1
            self.plans.clear()
            self._delta = self.step * top
        delta = self._delta
        idx = np.where(delta > 0, np.floor(r / np.where(delta > 0, delta, 1.0) + 1e-9), 0.0)
        g = np.where(delta > 0, idx * delta, r)
        return g, tuple(int(v) for v in idx)

    def lookup(
        self,
        model: ShedModel,
        capacity: Array,
        headroom: float = 1.0,
        node_ids: tuple[str, ...] | None = None,
        version: int | None = None,
    ) -> ShedPlan:
        """The table's plan for the model's current rates (solving the grid point on a miss)."""
        limit = headroom * np.asarray(capacity, float)
        fp = self._fingerprint(model, limit)
        if self._stale(fp, version):
            if self._ref is not None:
                self.stats.replans += 1
            self.plans.clear()
            self._delta = None  # the grid is rebuilt below without counting a second replan
            self._ref, self._version = tuple(a.copy() for a in fp), version
        g, key = self.grid(model)
        inputs = np.flatnonzero(model.parent < 0)
        r_in = model.rate[inputs]
        scale_in = np.divide(g, r_in, out=np.ones_like(g), where=r_in > 0)
        scale = np.ones(model.rate.size)
        scale[inputs] = scale_in
        scale = scale[_roots(model.parent)]
        hit = key in self.plans
        if hit:
            self.plans.move_to_end(key)
            self.stats.hits += 1
            x_grid, duals = self.plans[key]
        else:
            self.stats.misses += 1
            at_grid = replace(model, rate=model.rate * scale)
            plan = solve_lp(at_grid, capacity, headroom, node_ids, self.time_limit_s)
            x_grid, duals = effective(model, np.asarray(plan.keep, float)), plan.shadow_prices
            self.plans[key] = (x_grid, duals)
            if len(self.plans) > self.max_entries:
                self.plans.popitem(last=False)
        x = np.minimum(1.0, scale * x_grid)
        x[model.rate <= 0] = 1.0
        loads = node_loads(model, x)
        ids = node_ids or tuple(f"n{j}" for j in range(limit.size))
        return ShedPlan(
            method="lp",
            locations=model.locations,
            keep=settings(model, x),
            objective=weighted_output(model, x),
            node_loads={ids[j]: float(loads[j]) for j in range(limit.size)},
            shadow_prices=duals,
            status=f"plan table {'hit' if hit else 'miss'} at grid {list(key)}",
        )
