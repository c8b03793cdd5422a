"""Shedding in the control loop: when to shed, with which method, and with what hysteresis.

Shed when the predicted load at the current input rates exceeds ``headroom x capacity`` on
any node; stop once every node's predicted unshed load fits within it again (below 90% of it
without re-solving; from 90% to 100% the re-solved plan keeps every tuple, and the drops are
lifted as well: there is no band in which drops stay for a load that fits); switch plans only
when the weighted output changes by more than 2% or the current plan would overload a node.
What holds drops through a dip is the rates' rule below: a fall acts once the mean of the last
three samples shows it.

Two inputs keep latency bounded when the load moves faster than the rounds [project choice]:
the current rates are the larger of the newest sample and the mean of the last three (a rise
acts at once, a fall after it holds), and a node with a queued backlog is planned at a capacity
reduced by what draining it within ``drain_s`` takes (``drain_capacity``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from core.plans import ShedPlan
from core.topology import QueryNetwork, Units
from shedding import baselines, fit, lp
from shedding.loadmodel import ShedModel, build_model, placement_matrix
from shedding.plan_table import PlanTable

__all__ = [
    "METHODS",
    "ShedDecision",
    "current_rates",
    "decide_shedding",
    "drain_capacity",
    "shed_model",
    "solve",
]

METHODS = ("lp", "fit", "uniform", "local", "none")


def current_rates(input_rates: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per stream, the larger of the newest sample and the mean of the last three.

    >>> current_rates(np.array([[100.0, 100.0, 400.0], [300.0, 300.0, 0.0]])).tolist()
    [400.0, 200.0]
    """
    recent = input_rates[:, -min(3, input_rates.shape[1]) :]
    return np.maximum(recent[:, -1], recent.mean(axis=1))


def drain_capacity(
    capacity: NDArray[np.float64], backlog_s: NDArray[np.float64], drain_s: float
) -> NDArray[np.float64]:
    """The capacity left for new input while each node drains its backlog within ``drain_s``
    (at least 20% of the node's; ``drain_s`` 0 leaves the capacity as it is).

    >>> drain_capacity(np.array([1.0, 1.0, 2.0]), np.array([0.0, 2.5, 50.0]), 10.0).tolist()
    [1.0, 0.75, 0.4]
    """
    if drain_s <= 0 or backlog_s.size != capacity.size:
        return capacity
    left = np.clip(1.0 - np.maximum(backlog_s, 0.0) / drain_s, 0.2, 1.0)
    return np.asarray(capacity * left, dtype=float)


def shed_model(
    net: QueryNetwork, units: Units, assign: NDArray[np.int64], n: int, rates: NDArray[np.float64]
) -> ShedModel:
    """The load model for a unit placement at ``rates`` (tuples/s)."""
    return build_model(net, placement_matrix(net, units.op_index, assign, n), rates)


def solve(
    method: str,
    model: ShedModel,
    capacity: NDArray[np.float64],
    headroom: float,
    ids: tuple[str, ...],
) -> ShedPlan:
    """Run one shedding method by name."""
    if method == "lp":
        return lp.solve_lp(model, capacity, headroom, ids)
    if method == "fit":
        return fit.fit_plan(
            model,
            capacity,
            grid=20 if len(model.locations) <= 3 else 8,
            headroom=headroom,
            node_ids=ids,
        )
    if method == "uniform":
        return baselines.uniform(model, capacity, headroom, ids)
    if method == "local":
        return baselines.local_greedy(model, capacity, headroom, ids)
    if method == "none":
        return baselines.no_shedding(model, capacity, headroom, ids)
    raise ValueError(f"shedding: unknown method {method!r} (known: {', '.join(METHODS)})")


class ShedDecision:
    """The outcome of a shedding check: a new ShedPlan (or None) and why."""

    def __init__(self, shed: ShedPlan | None, reason: str, details: dict[str, Any]) -> None:
        self.shed, self.reason, self.details = shed, reason, details


def decide_shedding(
    method: str,
    headroom: float,
    model: ShedModel,
    capacity: NDArray[np.float64],
    current: ShedPlan,
    ids: tuple[str, ...],
    table: PlanTable | None = None,
    placement_version: int | None = None,
) -> ShedDecision:
    """Hysteresis around ``solve`` (or the plan ``table`` for lp): start, switch or stop."""
    if method == "none":
        return ShedDecision(None, "shedding disabled", {})
    full = lp.node_loads(model, np.ones(len(model.locations)))
    limit = headroom * capacity
    over = full > limit + 1e-12
    shedding_now = any(k < 1.0 for k in current.keep)
    info = {"predicted_load": dict(zip(ids, full.tolist(), strict=True)), "limit": limit.tolist()}
    if not over.any():
        if shedding_now and np.all(full < 0.9 * limit):
            return ShedDecision(
                ShedPlan(method=method), "load fell below 90% of headroom: stop shedding", info
            )
        if not shedding_now:
            share = np.divide(full, limit, out=np.zeros_like(full), where=limit > 0)
            j = int(np.argmax(share))
            busiest = f"the busiest, {ids[j]}, at {share[j]:.0%} of its limit"
            return ShedDecision(None, f"no node overloaded ({busiest})", info)
    if method == "lp" and table is not None:
        plan = table.lookup(model, capacity, headroom, ids, placement_version)
        info["plan_table"] = {
            "hits": table.stats.hits,
            "misses": table.stats.misses,
            "replans": table.stats.replans,
            "entries": len(table.plans),
        }
    else:
        plan = solve(method, model, capacity, headroom, ids)
    eff = lp.effective(model, np.array([current.keep_of(loc) for loc in model.locations]))
    cur_loads = lp.node_loads(model, eff)
    cur_obj = lp.weighted_output(model, eff)
    infeasible = bool(np.any(cur_loads > limit * (1 + 1e-6)))
    info.update(
        objective=plan.objective,
        current_objective=cur_obj,
        shadow_prices=plan.shadow_prices,
        bottlenecks=[k for k, v in plan.shadow_prices.items() if v > 1e-9],
        status=plan.status,
    )
    if shedding_now and not over.any() and all(k >= 1.0 - 1e-9 for k in plan.keep):
        # the re-plan keeps every tuple: the drops are lifted, and the record says so
        return ShedDecision(
            ShedPlan(method=method),
            "load within headroom, the new plan keeps all: stop shedding",
            info,
        )
    if not infeasible and abs(plan.objective - cur_obj) <= 0.02 * max(abs(cur_obj), 1e-12):
        return ShedDecision(None, "current shed plan within 2% of the new optimum", info)
    why = "overload: " + ",".join(ids[j] for j in np.flatnonzero(over)) if over.any() else "re-plan"
    return ShedDecision(plan, f"{method} shedding ({why})", info)
