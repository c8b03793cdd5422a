"""Policy composition: the pure decide step of the control loop.

``ControlPolicy.decide`` takes the static context, the load window and the current plan and
returns a ``Decision``: a new plan (or none) with its reason and the numbers behind it.
Hysteresis (minimum gain, cooldown, a cap on moves per round) lives here, not in the
algorithms. Placement algorithms plug in through ``PlacementMethod``; re-placing units off
dead nodes always happens, whatever the method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from controller.gates import DecisionKind, Gates, HoldList
from controller.settings import ControllerSettings
from core import loadstats
from core.cluster import Cluster, alive_mask
from core.observation import Observation
from core.plans import HAPlan, Placement, Plan
from core.topology import QueryNetwork, Units
from ha.recovery import replace_lost
from placement.baselines import llf

__all__ = [
    "Context",
    "ControlPolicy",
    "Decision",
    "PlacementMethod",
    "RebalanceResult",
]

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Context:
    """What the controller knows statically: the units, the cluster and the load model."""

    network: QueryNetwork
    units: Units
    cluster: Cluster
    expected_rates: Array  # (d,) tuples/s
    settings: ControllerSettings
    seed: int = 0

    def expected_unit_load(self) -> Array:
        """Model estimate of each unit's load (cores) at the expected rates."""
        return np.asarray(self.units.coeff @ self.expected_rates, dtype=float)


@dataclass(frozen=True)
class RebalanceResult:
    """A placement method's proposal: the new assignment and its explanation."""

    assignment: IntArray
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    judged_by: str | None = None  # the method's own acceptance rule, when it applied one


class PlacementMethod(Protocol):
    """A placement algorithm as the controller sees it."""

    name: str
    initial_note: str  # how the initial placement was made, for the decision log

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        """Initial assignment from the model (``unit_x`` is None) or from a warm-up window."""
        ...

    def skip_global_step(self) -> None:
        """Another method made the initial placement: start with the periodic rounds."""
        ...

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: NDArray[np.bool_]
    ) -> RebalanceResult:
        """A periodic round over the window ``unit_x`` (m, k)."""
        ...


@dataclass(frozen=True)
class Decision:
    """One round's outcome: the plan to apply (None to keep the current one) and why."""

    plan: Plan | None
    kind: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


class ControlPolicy:
    """Placement with hysteresis plus failure evacuation; shedding and HA plug in later."""

    def __init__(
        self,
        ctx: Context,
        placement: PlacementMethod,
        initial: PlacementMethod | None = None,
        routing: Any = None,
        in_blackout: Callable[[], bool] | None = None,
    ) -> None:
        self.ctx = ctx
        self.placement = placement
        self.initial = initial or placement
        self.routing = routing  # a controller.routing.RoutingPolicy, for keyed pipelines
        self.in_blackout = in_blackout or (lambda: False)
        self.rounds = 0
        self.last_change_round = -(10**9)
        self.gates = Gates(ctx.settings.placement, in_blackout)
        s = ctx.settings.placement
        self.holds = HoldList(s.ineffective_hold_rounds, s.churn_rounds)
        self.plan_table: Any = None  # a shedding.plan_table.PlanTable when enabled

    def initial_plan(self) -> Plan:
        """The first plan, from the load model."""
        a = self.initial.initial(self.ctx, None)
        pl = Placement.from_array(self.ctx.units.ids, self.ctx.cluster.ids, a)
        ha = HAPlan(
            policy=self.ctx.settings.ha.policy,
            checkpoint_interval=self.ctx.settings.ha.checkpoint_interval,
        )
        note = self.initial.initial_note
        reason = f"initial placement by {self.initial.name}" + (f": {note}" if note else "")
        return Plan(version=0, placement=pl, ha=ha, reason=reason)

    def decide(self, unit_x: Array, node_x: Array, plan: Plan, obs: Observation) -> Decision:
        """One control round: placement (with failure evacuation), then shedding on its result."""
        d = self._route(self._decide_placement(unit_x, node_x, plan, obs), plan, obs)
        method = self.ctx.settings.shedding.method
        if method == "none" or obs.input_rates.shape[1] == 0:
            return d
        from controller.shedding import decide_shedding, shed_model

        base = d.plan or plan
        rates = obs.input_rates[:, -min(3, obs.input_rates.shape[1]) :].mean(axis=1)
        alive = alive_mask(obs.node_status)
        cap = self.ctx.cluster.capacities() * alive
        model = shed_model(
            self.ctx.network, self.ctx.units, base.placement.as_array(), cap.size, rates
        )
        shed_cfg = self.ctx.settings.shedding
        if shed_cfg.plan_table and self.plan_table is None:
            from shedding.plan_table import PlanTable

            self.plan_table = PlanTable(step=shed_cfg.plan_table_step)
        sd = decide_shedding(
            method,
            shed_cfg.headroom,
            model,
            cap,
            base.shed,
            self.ctx.cluster.ids,
            self.plan_table,
            hash(base.placement.assignment),
        )
        details = {**d.details, "shed": sd.details}
        if sd.shed is None:
            return Decision(d.plan, d.kind, d.reason + "; " + sd.reason, details)
        if d.plan is None:
            new = base.next(shed=sd.shed, reason=sd.reason)
        else:
            new = d.plan.model_copy(update={"shed": sd.shed})
        kind = DecisionKind.SHED if d.plan is None else f"{d.kind}+{DecisionKind.SHED}"
        return Decision(new, kind, (d.reason + "; " if d.plan else "") + sd.reason, details)

    def _route(self, d: Decision, plan: Plan, obs: Observation) -> Decision:
        """Routing on top of the placement decision (table from placement, hot-key quotas)."""
        if self.routing is None:
            return d
        base = d.plan or plan
        new, why, info = self.routing.decide(obs, base.placement, base.routing)
        details = {**d.details, "routing": info}
        if new is None:
            return Decision(d.plan, d.kind, d.reason + "; " + why, details)
        if d.plan is None:
            return Decision(base.next(routing=new, reason=why), DecisionKind.REROUTE, why, details)
        return Decision(
            d.plan.model_copy(update={"routing": new}),
            f"{d.kind}+{DecisionKind.REROUTE}",
            d.reason + "; " + why,
            details,
        )

    def _decide_placement(
        self, unit_x: Array, node_x: Array, plan: Plan, obs: Observation
    ) -> Decision:
        """One placement round over the window ``unit_x`` (m, k) and ``node_x`` (n, k): adopt
        a failover, evacuate dead nodes, or run the method's round through the gates."""
        self.rounds += 1
        assign = plan.placement.as_array()
        before = _node_stats(unit_x, assign, self.ctx.cluster.n)
        recovered = self._recover(plan, assign, unit_x, obs, before)
        if recovered is not None:
            return recovered
        self.holds.judge(before["node_variance_mean"], self.rounds)
        why = self.gates.before_round(unit_x.shape[1], self.rounds - self.last_change_round)
        if why is not None:
            return Decision(None, DecisionKind.HOLD, why, before)
        res = self.placement.rebalance(self.ctx, unit_x, assign, alive_mask(obs.node_status))
        new = res.assignment.copy()
        held = self.holds.filter(new, assign, self.rounds, churn=res.judged_by != "global step")
        moved = np.flatnonzero(new != assign)
        if moved.size == 0:
            why = res.reason + (
                f"; {len(held)} move(s) blocked as recently ineffective" if held else ""
            )
            details = {**before, **res.details, "blocked": held}
            return Decision(None, DecisionKind.HOLD, why, details)
        after = _node_stats(unit_x, new, self.ctx.cluster.n)
        gain = before["node_variance_mean"] - after["node_variance_mean"]
        why = self.gates.on_proposal(int(moved.size), gain, res.judged_by)
        if why is not None:
            return Decision(None, DecisionKind.HOLD, why, {**before, "after": after, **res.details})
        self.last_change_round = self.rounds
        self.holds.moved(moved.tolist(), before["node_variance_mean"], self.rounds)
        numbers = {"moved": int(moved.size), "before": before, "after": after}
        details = {**numbers, "expected_gain": gain, **res.details}
        return self._emit(plan, new, DecisionKind.PLACE, res.reason, details)

    def _recover(
        self,
        plan: Plan,
        assign: IntArray,
        unit_x: Array,
        obs: Observation,
        before: dict[str, float],
    ) -> Decision | None:
        """Adopt the substrate's own failover, or move units off dead nodes; None when no
        unit sits on a dead node."""
        if (
            obs.assignment is not None
            and obs.assignment.shape == assign.shape
            and np.any(obs.assignment != assign)
        ):
            moved = int(np.count_nonzero(obs.assignment != assign))
            self.last_change_round = self.rounds
            why = (
                f"adopted the substrate's failover of {moved} units ({self.ctx.settings.ha.policy})"
            )
            details = {"moved": 0, "failed_over": moved, **before}
            return self._emit(
                plan, obs.assignment.astype(np.int64), DecisionKind.RECOVER, why, details
            )
        load = loadstats.means(unit_x) if unit_x.shape[1] else self.ctx.expected_unit_load()
        cap = self.ctx.cluster.capacities()
        alive = alive_mask(obs.node_status)
        r = replace_lost(assign, alive, load, cap, llf)
        if r.moved.size == 0 or not alive.any():
            return None
        self.last_change_round = self.rounds
        why = f"re-placed {r.moved.size} units off failed nodes"
        details = {"moved": int(r.moved.size), **before}
        return self._emit(plan, r.assignment, DecisionKind.RECOVER, why, details)

    def _emit(
        self, plan: Plan, assign: IntArray, kind: str, reason: str, details: dict[str, Any]
    ) -> Decision:
        """A decision that publishes ``assign`` as the next plan's placement."""
        pl = Placement.from_array(self.ctx.units.ids, self.ctx.cluster.ids, assign)
        return Decision(plan.next(placement=pl, reason=reason), kind, reason, details)


def _node_stats(unit_x: Array, assign: IntArray, n: int) -> dict[str, float]:
    nx = loadstats.node_series(unit_x, assign, n)
    return {
        **loadstats.node_summary(nx),
        "max_divergent_load": float(loadstats.divergent(nx).max()) if n else 0.0,
    }
