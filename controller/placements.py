"""Placement methods as the controller uses them, registered for ``--placement``.

Each adapter turns a pure algorithm from ``placement/`` into a ``PlacementMethod``: an initial
assignment and a periodic round. Correlation methods start from least-loaded, run the global
greedy once the window holds ``window_k`` samples (the Borealis warm-up), then run pair-wise
rounds (one-way, two-way or selective) every control interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from controller.migration_causes import Cause
from controller.node_speed import shape_differs
from controller.pair_reasons import pairwise_reason
from controller.policy import Array, Context, IntArray, PlacementMethod, RebalanceResult
from controller.stale_trigger import StaleTrigger
from core import loadstats
from placement import baselines, correlation, correlation_global, migration_cost
from placement.overload_descent import reduce_overload
from placement.rod import rod
from placement.rod_search import improve_feasible_set
from placement.variance_descent import reduce_variance

__all__ = [
    "DEMO_PLACEMENTS",
    "PLACEMENTS",
    "Correlation",
    "Fixed",
    "LeastLoaded",
    "Static",
    "placement_method",
]

DEMO_PLACEMENTS: tuple[str, ...] = ("llf", "correlation-oneway", "correlation-selective", "rod")


def _step_toward(
    target: IntArray, assign: IntArray, unit_x: Array, max_moves: int
) -> tuple[IntArray, IntArray, IntArray]:
    """``assign`` with at most ``max_moves`` units (heaviest first) moved to ``target``; the
    units moved and the units that differed."""
    todo = np.flatnonzero(target != assign)
    load = loadstats.means(unit_x) if unit_x.shape[1] else np.zeros(assign.size)
    step = todo[np.argsort(-load[todo], kind="stable")][:max_moves]
    new = assign.copy()
    new[step] = target[step]
    return new, step, todo


class _Base:
    """What every placement method shares: its parameters, no initial note, no global step."""

    name = "base"
    initial_note = ""
    holds = "static placement, no periodic moves"  # a round with nothing to do, as logged

    def __init__(self, params: dict[str, float] | None = None) -> None:
        self.params = dict(params or {})

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        return RebalanceResult(assign.copy(), f"{self.name}: {self.holds}")

    def skip_global_step(self) -> None:
        """Only correlation placement has a global step to skip."""


class _KeepsPlan(_Base):
    """A plan the method made (``initial``, least-loaded's re-placements) is where its units
    live: moved off a dead node, they return once the plan's nodes are all up again
    (``max_moves`` a round, heaviest first)."""

    plan: IntArray | None = None

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        plan = self.plan
        if plan is None or plan.size != assign.size or (plan >= alive.size).any():
            return super().rebalance(ctx, unit_x, assign, alive)  # not a plan for these nodes
        if not alive[plan].all() or (plan == assign).all():
            return super().rebalance(ctx, unit_x, assign, alive)
        new, step, todo = _step_toward(plan, assign, unit_x, ctx.settings.placement.max_moves)
        back = ", ".join(sorted({ctx.cluster.ids[i] for i in plan[step]}))
        reason = (
            f"{self.name}: its plan restored, its nodes up again: {step.size} of "
            f"{todo.size} unit(s) moved back to {back}"
        )
        left = int(todo.size - step.size)
        details = {"phase": "restore", "cause": Cause.PLAN_RESTORED, "remaining": left}
        return RebalanceResult(new, reason, details, judged_by="plan restored")


class LeastLoaded(_KeepsPlan):
    """The baseline: least-loaded fill (capacity-relative) at start; later rounds evacuate dead
    nodes and restore the plan once they are up again, and re-place once when the node
    capacities the controller plans with (measured speeds, ``controller.node_speed``) differ
    from those the plan was made for by more than ``placement.speed_tolerance``."""

    name = "least-loaded"
    holds = "no periodic moves"

    def __init__(self, params: dict[str, float] | None = None) -> None:
        super().__init__(params)
        self.planned_for: Array | None = None  # the capacities the current plan was made for

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        load = ctx.expected_unit_load() if unit_x is None else loadstats.means(unit_x)
        self.planned_for = ctx.cluster.capacities()
        self.plan = baselines.llf(load, self.planned_for, ctx.cluster.alive())
        return self.plan.copy()

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        cap = ctx.cluster.capacities()
        if self.planned_for is None:  # a plan it did not make (a resumed controller)
            self.planned_for = cap
        was = self.planned_for
        tolerance = ctx.settings.placement.speed_tolerance
        # another node count is scaling's business (it places once joined nodes have started)
        if was.size != cap.size or unit_x.shape[1] == 0 or not shape_differs(was, cap, tolerance):
            return super().rebalance(ctx, unit_x, assign, alive)
        self.planned_for = cap
        new = baselines.llf(loadstats.means(unit_x), cap, alive)
        self.plan = new.copy() if alive.all() else None  # a plan around a dead node: not kept
        moved = int(np.count_nonzero(new != assign))
        why = (
            f"least-loaded: node capacities {np.round(cap, 3).tolist()} differ from the "
            f"{np.round(was, 3).tolist()} the plan was made for (beyond {tolerance}); "
            f"re-placed by them ({moved} unit(s) moved)"
        )
        details = {"cause": Cause.NODE_SPEEDS, "capacities_before": was.round(3).tolist()}
        details["capacities"] = cap.round(3).tolist()
        return RebalanceResult(new, why, details, judged_by="global step")


class Static(_KeepsPlan):
    """A static placement computed once from the load model."""

    def __init__(self, name: str, params: dict[str, float] | None = None) -> None:
        super().__init__(params)
        self.name = name
        self.initial_note = ""

    def _rod(self, ctx: Context, cap: Array) -> IntArray:
        """ROD's greedy, then the iterated local search on the feasible-set ratio.

        Params: ``seed``; ``search_rounds`` (default 16, 0 turns the search off);
        ``search_max_units`` (default 300: above it the O(m^2) swap scan is too slow for a
        start-up decision, and the greedy plan is kept).
        """
        seed = int(self.params.get("seed", ctx.seed))
        a = rod(ctx.units.coeff, cap, ctx.units.edges, seed=seed)
        rounds = int(self.params.get("search_rounds", 16))
        limit = int(self.params.get("search_max_units", 300))
        if rounds <= 0:
            self.initial_note = "ROD greedy (search off)"
        elif a.size > limit:
            self.initial_note = f"ROD greedy ({a.size} units > search_max_units {limit})"
        else:
            res = improve_feasible_set(ctx.units.coeff, cap, a, rounds=rounds, seed=seed)
            a = res.assignment
            self.initial_note = (
                f"ROD greedy + local search: search-point feasible ratio "
                f"{res.ratio_before:.3f} -> {res.ratio_after:.3f} in {res.steps} steps"
            )
        return a

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        self.plan = self._plan(ctx, unit_x)
        return self.plan.copy()

    def _plan(self, ctx: Context, unit_x: Array | None) -> IntArray:
        load = ctx.expected_unit_load() if unit_x is None else loadstats.means(unit_x)
        cap = ctx.cluster.capacities()
        if self.name == "llf":
            return baselines.llf(load, cap, ctx.cluster.alive())
        if self.name == "random":
            return baselines.random_placement(
                ctx.units.m, cap.size, int(self.params.get("seed", ctx.seed))
            )
        if self.name == "connected":
            return baselines.connected(load, cap, ctx.units.edges)
        if self.name == "hash":
            # key group kg of an operator -> kg mod n: plain hash routing when n divides G
            kg = np.zeros(ctx.units.m, dtype=np.int64)
            for i in np.unique(ctx.units.op_index):
                idx = np.flatnonzero(ctx.units.op_index == i)
                kg[idx] = np.arange(idx.size)
            return kg % cap.size
        if self.name == "rod":
            return self._rod(ctx, cap)
        raise ValueError(f"placement: unknown static method {self.name!r}")


class Correlation(_Base):
    """Borealis correlation-based placement with one-way, two-way or selective rounds.

    The global step runs once the window holds ``window_k`` samples; then every round runs the
    method's own pair-wise round, whose moves the Borealis acceptance rule has judged. The
    stale-placement trigger (``controller.stale_trigger``, params ``stale_factor``,
    ``stale_rounds``, ``stale_trigger`` 1 to turn it on) runs the global step again when the
    node loads have drifted. A global step's plan is reached ``max_moves`` units per round
    (heaviest first), so a large re-placement is neither vetoed nor done at once.
    """

    def __init__(self, method: correlation.Method, params: dict[str, float] | None = None) -> None:
        super().__init__(params)
        self.method: correlation.Method = method
        self.name = f"correlation-{method}"
        fields = correlation.CorrelationParams.__dataclass_fields__
        self.p = correlation.CorrelationParams(
            **{k: float(v) for k, v in self.params.items() if k in fields}
        )  # type: ignore[arg-type]
        self.global_done = False
        self.trigger = StaleTrigger(
            factor=float(self.params.get("stale_factor", 2.0)),
            rounds=int(self.params.get("stale_rounds", 2)),
            enabled=bool(self.params.get("stale_trigger", 1.0)),
        )
        self.target: IntArray | None = None  # a re-run global step's plan, reached step by step
        self.since_global = 1 << 30  # rounds since a global step's plan was reached
        self.target_why = ""
        self.target_numbers: dict[str, Any] = {}  # why it was chosen, logged with its first step
        self.target_cause = Cause.GLOBAL_STEP  # the first global step, or the trigger's

    def skip_global_step(self) -> None:
        """Another method made the initial placement: pair-wise rounds from the start."""
        self.global_done = True

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        if unit_x is None or unit_x.shape[1] < self.p.min_samples:
            return LeastLoaded().initial(ctx, unit_x)
        return correlation_global.initial_placement(unit_x, ctx.cluster.capacities(), self.p)

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        if not self.global_done and unit_x.shape[1] >= ctx.settings.window_k and alive.all():
            self.global_done = True
            self.target = self._global(ctx, unit_x, assign)
            self.target_why = "global correlation placement after warm-up"
            self.target_cause = Cause.GLOBAL_STEP
        elif not self.global_done and unit_x.shape[1] < ctx.settings.window_k:
            reason = (
                f"warm-up: {unit_x.shape[1]} of {ctx.settings.window_k} samples before the "
                "global correlation step"
            )
            return RebalanceResult(assign.copy(), reason, {"phase": "warm-up"})
        elif self.global_done and self.target is None and alive.all():
            self.trigger.absolute_overload = ctx.settings.placement.migration_aware
            why = self.trigger.observe(self._summary(ctx, unit_x, assign))
            if why is not None:
                held = self._stale(ctx, unit_x, assign, why)
                if held is not None:
                    return held
        if self.target is not None and alive.all():
            return self._toward_target(ctx, unit_x, assign)
        self.since_global += 1
        settle = ctx.settings.placement.churn_rounds
        if self.since_global <= settle:
            reason = (
                f"settling: a global step's plan was reached {self.since_global} round(s) ago "
                f"(pair-wise rounds wait churn_rounds={settle}, until the window shows it)"
            )
            return RebalanceResult(assign.copy(), reason, {"phase": "settling"})
        return self._pairwise(ctx, unit_x, assign, alive)

    def _summary(self, ctx: Context, unit_x: Array, assign: IntArray) -> dict[str, float]:
        return _summary(unit_x, assign, ctx.cluster.capacities(), self.p.overload_threshold)

    def _global(self, ctx: Context, unit_x: Array, assign: IntArray) -> IntArray:
        """The global step's plan, its nodes named to keep as much of ``assign`` in place as
        possible (weighted by each unit's pause x load)."""
        cap = ctx.cluster.capacities()
        load = loadstats.means(unit_x)
        plan = correlation_global.initial_placement(unit_x, cap, self.p)
        weight = ctx.unit_pause_s() * load + 1e-9
        plan = migration_cost.closest_labels(plan, assign, weight, cap)
        idle = load < self.p.load_threshold  # no series to place by: they stay (Borealis)
        plan[idle] = assign[idle]
        return plan

    def _stale(
        self, ctx: Context, unit_x: Array, assign: IntArray, why: str
    ) -> RebalanceResult | None:
        """The trigger fired: aim at a new plan, the global step's, the global step's refined
        by the overload descent (for a window on which every plan with balanced node means
        overloads a node), or the variance descent's from the current placement.
        Migration-aware, the one that removes the most overload net of its pauses, and none (a
        hold, after which the trigger backs off) when none pays for its pauses."""
        cap = ctx.cluster.capacities()
        again = self._global(ctx, unit_x, assign)
        if not ctx.settings.placement.migration_aware:
            self.target, self.target_why = again, f"stale placement ({why}): global step again"
            self.target_cause = Cause.STALE_TRIGGER
            return None
        descent, relief = assign.copy(), again.copy()
        steps = int(max(self.p.refine_steps, 1))
        reduce_variance(unit_x, descent, cap, self.p.pair_threshold, self.p.load_threshold, steps)
        reduce_overload(
            unit_x, relief, cap, self.p.overload_threshold, self.p.load_threshold, steps
        )
        candidates = {
            "global step again": again,
            "variance descent from the current placement": descent,
            "global step again, then overload descent": relief,
        }
        pause = ctx.unit_pause_s()
        scored = {}
        for name, plan in candidates.items():
            gain = migration_cost.expected_gain(
                unit_x, assign, plan, cap, self.p.overload_threshold, self.p.gain_horizon_s
            )
            scored[name] = (gain, migration_cost.pause_cost(unit_x, assign, plan, pause))
        best = max(scored, key=lambda k: scored[k][0] - scored[k][1])
        gain, cost = scored[best]
        details = {
            "phase": "stale",
            "candidates": {k: {"gain_cpu_s": g, "pause_cpu_s": c} for k, (g, c) in scored.items()},
        }
        if gain <= cost:
            # not worth it now (the window may show a drift only in part): the trigger keeps
            # the global step's baseline and tries again after twice as many worse rounds
            self.trigger.held()
            details["retry_after_rounds"] = self.trigger.needed
            reason = (
                f"stale placement ({why}), but no re-placement is worth its pauses: the best, "
                f"{best}, removes {gain:.3g} CPU-s of overload over {self.p.gain_horizon_s:g} s "
                f"for {cost:.3g} CPU-s of pauses; the trigger tries again after "
                f"{self.trigger.needed} worse rounds"
            )
            return RebalanceResult(assign.copy(), reason, details, judged_by="migration cost")
        self.target = candidates[best]
        self.target_cause = Cause.STALE_TRIGGER
        self.target_numbers = {"candidates": details["candidates"], "chosen": best}
        self.target_why = (
            f"stale placement ({why}): {best}, removing {gain:.3g} CPU-s of overload for "
            f"{cost:.3g} CPU-s of pauses"
        )
        return None

    def _toward_target(self, ctx: Context, unit_x: Array, assign: IntArray) -> RebalanceResult:
        """Move at most ``max_moves`` units (heaviest first) toward the global step's plan."""
        assert self.target is not None
        new, step, todo = _step_toward(
            self.target, assign, unit_x, ctx.settings.placement.max_moves
        )
        left = int(todo.size - step.size)
        moved = f"{step.size} of {todo.size} unit(s) moved" if todo.size else "no unit to move"
        reason = f"{self.target_why}: {moved} toward it"
        details = {"phase": "global", "cause": self.target_cause, "remaining": left}
        details["moved_now"] = int(step.size)
        details.update(self.target_numbers)
        self.target_numbers = {}
        if left == 0:
            self.target = None
            self.since_global = 0
            self.trigger.rebase(self._summary(ctx, unit_x, new))
        return RebalanceResult(new, reason, details, judged_by="global step")

    def _pairwise(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        """The method's own pair-wise round, judged by the Borealis acceptance rule."""
        cap = ctx.cluster.capacities()
        pause = ctx.unit_pause_s() if ctx.settings.placement.migration_aware else None
        res = correlation.pairwise_round(unit_x, assign, cap, alive, self.method, self.p, pause)
        moves: list[dict[str, Any]] = [
            {
                "unit": ctx.units.ids[mv.unit],
                "from": ctx.cluster.ids[mv.src],
                "to": ctx.cluster.ids[mv.dst],
                "score": mv.score,
                "load": mv.load,
            }
            for mv in res.moves
        ]
        th = self.p.pair_threshold
        reason = pairwise_reason(self.method, res.pairs, len(moves), res.widest_gap, th)
        details = {"phase": "pairwise", "cause": Cause.PAIRWISE, "pairs": res.pairs, "moves": moves}
        details.update(widest_gap=res.widest_gap, pair_threshold=th)
        return RebalanceResult(res.assignment, reason, details, judged_by="borealis acceptance")


def _summary(unit_x: Array, assign: IntArray, cap: Array, theta: float) -> dict[str, float]:
    """The trigger's numbers: node variance and correlation, and the overload above theta."""
    nx = loadstats.node_series(unit_x, assign, cap.size)
    return {**loadstats.node_summary(nx), "overload": migration_cost.overload(nx, cap, theta)}


class Fixed(_KeepsPlan):
    """Operators pinned to nodes by ``controller.placement.fixed``; other units least-loaded."""

    name = "fixed"

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        base = LeastLoaded().initial(ctx, unit_x)
        pins = ctx.settings.placement.fixed
        ops = ctx.network.op_ids
        for u, i in enumerate(ctx.units.op_index):
            if ops[i] in pins:
                base[u] = ctx.cluster.ids.index(pins[ops[i]])
        self.plan = base.copy()
        return base


Factory = Callable[[dict[str, float]], PlacementMethod]


def _static(name: str) -> Factory:
    return lambda params: Static(name, params)


def _correlation(method: correlation.Method) -> Factory:
    return lambda params: Correlation(method, params)


PLACEMENTS: dict[str, Factory] = {
    "least-loaded": LeastLoaded,
    "llf": _static("llf"),
    "random": _static("random"),
    "connected": _static("connected"),
    "rod": _static("rod"),
    "hash": _static("hash"),
    "correlation-oneway": _correlation("oneway"),
    "correlation-twoway": _correlation("twoway"),
    "correlation-selective": _correlation("selective"),
    "fixed": Fixed,
}
"""Every placement method by the name ``--placement`` and ``placement.method`` take."""


def placement_method(
    name: str, params: dict[str, float], field: str = "placement"
) -> PlacementMethod:
    """A new ``name`` method; an unknown name is a ValueError naming ``field`` and all known."""
    if name not in PLACEMENTS:
        known = ", ".join(sorted(PLACEMENTS))
        raise ValueError(f"{field}: unknown method {name!r} (known: {known})")
    return PLACEMENTS[name](dict(params))
