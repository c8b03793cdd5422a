"""Policy composition: the pure decide step of the control loop.

``ControlPolicy.decide`` takes the static context, the load window and the current plan and
returns a ``Decision``: a new plan (or none) with its reason and the numbers behind it.
Hysteresis (minimum gain, cooldown, a cap on moves per round) lives here, not in the
algorithms. Placement algorithms plug in through ``PlacementMethod``; re-placing units off
dead nodes always happens, whatever the method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from controller.gates import DecisionKind, Gates, HoldList
from controller.migration_causes import Cause
from controller.node_speed import MeasuredCapacity
from controller.settings import ControllerSettings
from core import loadstats
from core.cluster import Cluster, NodeStatus, alive_mask
from core.observation import Observation
from core.plans import HAPlan, Placement, Plan, ScalePlan, ShedPlan
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
    migration_base_s: float = 0.5  # a move's pause: base + per-MB x state (the scenario's model)
    migration_s_per_mb: float = 0.05

    def expected_unit_load(self) -> Array:
        """Model estimate of each unit's load (cores) at the expected rates."""
        return np.asarray(self.units.coeff @ self.expected_rates, dtype=float)

    def unit_pause_s(self) -> Array:
        """Each unit's migration pause (s): the base plus the per-MB cost of its state."""
        mb = np.asarray(self.units.state_bytes, dtype=float) / 1e6
        return self.migration_base_s + self.migration_s_per_mb * mb


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
        self.capacity = MeasuredCapacity(
            ctx.cluster.capacities(), s.speed_tolerance, s.measured_speeds
        )
        self.plan_table: Any = None  # a shedding.plan_table.PlanTable when enabled
        self.scaling: Any = None  # a controller.scaling.ScalingPolicy when enabled
        self.scale_note = ""  # this round's scaling reason when the count stayed
        self.scale_pending = False  # nodes joined: place units on them once they have started
        if ctx.settings.scaling.enabled:
            from controller.scaling import ScalingPolicy

            self.scaling = ScalingPolicy(
                ctx.settings.scaling, ctx.cluster.n, ctx.settings.interval_s
            )

    def initial_plan(self) -> Plan:
        """The first plan, from the load model (on ``scaling.min_nodes`` nodes when scaling)."""
        k = self.scaling.min_nodes if self.scaling is not None else self.ctx.cluster.n
        a = self.initial.initial(self._on(k), None)
        pl = Placement.from_array(self.ctx.units.ids, self.ctx.cluster.ids, a)
        ha = HAPlan(
            policy=self.ctx.settings.ha.policy,
            checkpoint_interval=self.ctx.settings.ha.checkpoint_interval,
        )
        note = self.initial.initial_note
        reason = f"initial placement by {self.initial.name}" + (f": {note}" if note else "")
        scale = ScalePlan(nodes=k if self.scaling is not None else 0)
        return Plan(version=0, placement=pl, ha=ha, scale=scale, reason=reason)

    def _cluster(self) -> Cluster:
        """The cluster with the capacities the controller plans with (measured on Spark)."""
        if not self.capacity.measured:
            return self.ctx.cluster
        caps = self.capacity.capacities()
        nodes = self.ctx.cluster.nodes
        return Cluster(
            tuple(replace(nd, capacity=float(c)) for nd, c in zip(nodes, caps, strict=True))
        )

    def _on(self, k: int) -> Context:
        """The context of the first ``k`` nodes: what placement sees while k nodes run."""
        cluster = self._cluster()
        if k == cluster.n and cluster is self.ctx.cluster:
            return self.ctx
        return replace(self.ctx, cluster=Cluster(cluster.nodes[:k]))

    def decide(self, unit_x: Array, node_x: Array, plan: Plan, obs: Observation) -> Decision:
        """One control round: scaling, else placement (with failure evacuation); routing; then
        shedding on the result (only at the scaling ceiling when scaling)."""
        self.capacity.observe(obs)
        d = self._scale(unit_x, plan, obs) or self._decide_placement(unit_x, node_x, plan, obs)
        if self.scale_note:
            d = Decision(d.plan, d.kind, d.reason + "; " + self.scale_note, d.details)
        d = self._route(d, plan, obs)
        if self.capacity.measured:
            d = Decision(
                d.plan, d.kind, d.reason, {**d.details, "capacity": self.capacity.details()}
            )
        method = self.ctx.settings.shedding.method
        if method == "none" or obs.input_rates.shape[1] == 0:
            return d
        base = d.plan or plan
        if (
            self.scaling is not None
            and base.scale.count(self.ctx.cluster.n) < self.scaling.max_nodes
        ):
            return self._no_shed_below_ceiling(d, base)
        from controller.shedding import current_rates, decide_shedding, drain_capacity, shed_model

        shed_cfg = self.ctx.settings.shedding
        rates = current_rates(obs.input_rates)
        alive = alive_mask(obs.node_status) & base.scale.active(self.ctx.cluster.n)
        cap = drain_capacity(self._cluster().capacities() * alive, obs.backlog_s, shed_cfg.drain_s)
        model = shed_model(
            self.ctx.network, self.ctx.units, base.placement.as_array(), cap.size, rates
        )
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
        shed_in = {"rates": rates.round(3).tolist(), "backlog_s": obs.backlog_s.round(3).tolist()}
        details = {**d.details, "shed": {**sd.details, **shed_in}}
        if sd.shed is None:
            return Decision(d.plan, d.kind, d.reason + "; " + sd.reason, details)
        if d.plan is None:
            new = base.next(shed=sd.shed, reason=sd.reason)
        else:
            new = d.plan.model_copy(update={"shed": sd.shed})
        kind = DecisionKind.SHED if d.plan is None else f"{d.kind}+{DecisionKind.SHED}"
        return Decision(new, kind, (d.reason + "; " if d.plan else "") + sd.reason, details)

    def _scale(self, unit_x: Array, plan: Plan, obs: Observation) -> Decision | None:
        """A scale change, or the placement on the node count a scale-out started last round;
        None when neither (the scaling reason then joins the round's reason).

        Scale-out joins the nodes first and places units on them once they have started, so
        no tuple waits for a node to start: a round later in the simulator (which charges the
        start-up itself), and on a steered pipeline once an observed batch ran the joined
        nodes with their executors live (a daemon's rounds may be faster than the batches).
        Scale-in places the units on fewer nodes and releases the rest in one plan."""
        self.scale_note = ""
        if self.scaling is None:
            return None
        n = self.ctx.cluster.n
        running = plan.scale.count(n)
        sd = self.scaling.decide(obs, running, self.ctx.cluster.capacities())
        if not sd.changed:
            self.scale_note = sd.reason
            if not self.scale_pending:
                return None
            if not _joined_started(obs, running):
                self.scale_note = f"{sd.reason}; waiting for the joined node(s) to start"
                return None
            self.scale_pending = False
            return self._place_on(running, unit_x, plan, f"placed on the {running} running nodes")
        self.rounds += 1
        self.last_change_round = self.rounds
        if sd.nodes > running:
            self.scale_pending = True
            why = f"{sd.reason}; units move once the new node(s) have started"
            new = plan.next(scale=ScalePlan(nodes=sd.nodes), reason=why)
            return Decision(new, DecisionKind.SCALE, why, {"scale": sd.numbers, "moved": 0})
        self.scale_pending = False
        d = self._place_on(sd.nodes, unit_x, plan, sd.reason)
        assert d.plan is not None
        new = d.plan.model_copy(update={"scale": ScalePlan(nodes=sd.nodes)})
        return Decision(new, DecisionKind.SCALE, d.reason, {"scale": sd.numbers, **d.details})

    def _place_on(self, k: int, unit_x: Array, plan: Plan, why: str) -> Decision:
        """The placement method's own placement on the first ``k`` nodes (its global step)."""
        self.last_change_round = self.rounds
        assign = self.placement.initial(self._on(k), unit_x if unit_x.shape[1] else None)
        self.placement.skip_global_step()  # that was its global step
        moved = int(np.count_nonzero(assign != plan.placement.as_array()))
        why = f"{why}; {moved} unit(s) placed by {self.placement.name}"
        details = {"moved": moved, "cause": Cause.SCALING}
        return self._emit(plan, assign, DecisionKind.PLACE, why, details)

    def _no_shed_below_ceiling(self, d: Decision, base: Plan) -> Decision:
        """Below the scaling ceiling the answer to load is more nodes: no shedding (a plan
        that sheds is lifted)."""
        why = "below the scaling ceiling: scale, not shed"
        if all(x >= 1.0 for x in base.shed.keep):
            return Decision(d.plan, d.kind, d.reason + "; " + why, d.details)
        off = ShedPlan(method="none")
        new = (d.plan or base.next(reason=why)).model_copy(update={"shed": off})
        kind = DecisionKind.SHED if d.plan is None else f"{d.kind}+{DecisionKind.SHED}"
        return Decision(new, kind, d.reason + "; " + why + " (shedding lifted)", d.details)

    def _route(self, d: Decision, plan: Plan, obs: Observation) -> Decision:
        """Routing on top of the placement decision (table from placement, hot-key quotas)."""
        if self.routing is None:
            return d
        base = d.plan or plan
        running = base.scale.active(len(obs.node_status))
        if not running.all():  # released partitions take no hot-key quota
            down = tuple(
                s if r else NodeStatus.DOWN for s, r in zip(obs.node_status, running, strict=True)
            )
            obs = replace(obs, node_status=down)
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
        k = plan.scale.count(self.ctx.cluster.n)  # placement sees the running nodes only
        before = _node_stats(unit_x, assign, k)
        recovered = self._recover(plan, assign, unit_x, obs, before)
        if recovered is not None:
            return recovered
        self.holds.judge(before["node_variance_mean"], self.rounds)
        why = self.gates.before_round(unit_x.shape[1], self.rounds - self.last_change_round)
        if why is not None:
            return Decision(None, DecisionKind.HOLD, why, before)
        alive = alive_mask(obs.node_status)[:k]
        res = self.placement.rebalance(self._on(k), unit_x, assign, alive)
        new = res.assignment.copy()
        # a global step's plan, or a plan restored, is a deliberate re-placement: no
        # per-unit holds apply to it
        deliberate = res.judged_by in ("global step", "plan restored")
        held = [] if deliberate else self.holds.filter(new, assign, self.rounds)
        moved = np.flatnonzero(new != assign)
        if moved.size == 0:
            why = res.reason + (
                f"; {len(held)} move(s) blocked as recently ineffective" if held else ""
            )
            details = {**before, **res.details, "blocked": held}
            return Decision(None, DecisionKind.HOLD, why, details)
        after = _node_stats(unit_x, new, k)
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
            details = {"moved": 0, "cause": Cause.FAILOVER, "failed_over": moved, **before}
            return self._emit(
                plan, obs.assignment.astype(np.int64), DecisionKind.RECOVER, why, details
            )
        load = loadstats.means(unit_x) if unit_x.shape[1] else self.ctx.expected_unit_load()
        cap = self._cluster().capacities()
        alive = alive_mask(obs.node_status) & plan.scale.active(self.ctx.cluster.n)
        r = replace_lost(assign, alive, load, cap, llf)
        if r.moved.size == 0 or not alive.any():
            return None
        self.last_change_round = self.rounds
        why = f"re-placed {r.moved.size} units off failed nodes"
        details = {"moved": int(r.moved.size), "cause": Cause.FAILOVER, **before}
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


def _joined_started(obs: Observation, running: int) -> bool:
    """Whether the ``running`` nodes a scale-out joined have started. A steered pipeline's
    observation (it counts ``batches``) shows it in a batch that ran them with their executors
    live; other substrates have started them by the next round.

    >>> from types import SimpleNamespace
    >>> from core.observation import PipelineBatch
    >>> o = lambda *ready: SimpleNamespace(counters={"batches": len(ready)},
    ...     batches=tuple(PipelineBatch(0, 1.0, 1, 0, None, ready_nodes=r) for r in ready))
    >>> _joined_started(o(), 2), _joined_started(o(1, 1), 2), _joined_started(o(1, 2), 2)
    (False, False, True)
    >>> _joined_started(SimpleNamespace(counters={}, batches=()), 2)  # the simulator
    True
    """
    if "batches" not in obs.counters:
        return True
    return any(b.ready_nodes is None or b.ready_nodes >= running for b in obs.batches)
