"""A discrete-time, vectorized fluid model of a stream-processing cluster.

Per tick: streams emit at their rates; input drops of the shedding plan remove a fraction;
each node owes, per stream, the admitted tuples its units must process (a backlog ``B[n, d]``
in input-tuple units); node i serves the fraction ``min(1, C_i / demand_i)`` of what it owes
(the proportional-slowdown rule); a stream's tuples are complete once every node on their
path has served them, so the stream's in-system count is ``max_i B[i, k]``. Latency is the
expected queueing wait plus hop latency along each stream's unit path.

Tuples are conserved exactly: ``in = out + dropped + queued + lost``. A moved unit carries its
backlog with it and pauses for a cost that grows with its state; a killed node loses its
backlog unless the HA policy keeps it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from core.cluster import NodeStatus, alive_mask
from core.observation import Observation
from core.plans import Plan
from core.scenario import FaultSpec, Scenario
from core.topology import QueryNetwork, Units
from core.workload import key_epochs, key_group_shares, rates
from simulator.dpc import hold_arrivals, outages
from simulator.ha_model import HAModel
from simulator.node_pool import NodePool
from simulator.result import SimResult, log_frame, stream_series
from simulator.sink import Sink, failed_share

__all__ = ["SimResult", "Simulator"]

Array = NDArray[np.float64]


class Simulator:
    """The simulated substrate: ``observe()`` and ``apply(plan)`` over a scenario.

    Parameters
    ----------
    scenario : the validated scenario
    seed : overrides ``scenario.seed`` for the workload randomness
    """

    _masks: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None  # (alive, lost) per node

    def __init__(
        self,
        scenario: Scenario,
        seed: int | None = None,
        ha_policy: str = "none",
        checkpoint_interval: int = 10,
    ) -> None:
        if seed is not None:
            scenario = scenario.model_copy(update={"seed": seed})
        self.scenario = scenario
        self.net: QueryNetwork = scenario.network()
        self.cluster = scenario.cluster_model()
        self.units: Units = self.net.units()
        self.n, self.d, self.m = self.cluster.n, len(self.net.streams), self.units.m
        self.tick_s = scenario.tick_s
        self.arrivals = rates(scenario) * scenario.simulator.rate_scale  # (T, d) tuples per tick
        self.T = self.arrivals.shape[0]
        self.outages = outages(scenario, list(self.net.streams), self.T)  # silent inputs (dpc)
        self.offered, self.arrivals = self.arrivals, hold_arrivals(self.arrivals, self.outages)
        self._init_shares()
        self.capacity = self.cluster.capacities()
        self.hop_s = self.cluster.latencies_ms() / 1000.0
        self.t = 0
        self.B = np.zeros((self.n, self.d))
        self.overhead = np.zeros(self.n)  # queued non-tuple work (migrations), CPU-seconds
        self.recovery_q = np.zeros(self.n)  # replay and restore work after a failover, CPU-seconds
        self.status = [NodeStatus.UP] * self.n
        self.pool = NodePool(self.n, self.tick_s, scenario.simulator.node_startup_s)
        self.slow = np.ones(self.n)
        self._until: dict[int, tuple[int, str]] = {}
        self.assign = np.zeros(self.m, dtype=np.int64)
        self.input_keep = np.ones(self.d)
        self.arc_keep: dict[str, float] = {}
        self.plan_version = -1
        self.migrations = 0
        self.state_bytes_moved = 0.0
        self._faults = sorted((f for f in scenario.faults if f.node), key=lambda f: f.at_s)
        self._fault_i = 0
        self._rebuild_coefficients()
        self._alloc_records()
        win = {o.id: (o.window.size_s if o.window else 0.0) for o in scenario.operators}
        window_s = np.array([win[self.net.operators[i].id] for i in self.units.op_index], float)
        self.ha = HAModel(
            ha_policy,
            checkpoint_interval,
            scenario.simulator,
            window_s,
            self.units.state_bytes / 1e6,
            self.tick_s,
            np.array([self.net.operators[i].cost_us for i in self.units.op_index], float) * 1e-6,
        )
        self.lost_in_failover = 0.0
        self.failover_moves = 0
        self._last_obs = 0
        self.plans: list[tuple[float, int, str]] = []
        self.keep_log: list[tuple[float, Array]] = []
        self.placement_log: list[tuple[float, NDArray[np.int64]]] = []
        self.events: list[tuple[float, str, str]] = [
            (f.at_s, "partition", f.stream) for f in scenario.faults if f.stream
        ]

    # ----------------------------------------------------------------- set-up
    def _init_shares(self) -> None:
        """Key-group shares per unit and input stream for every epoch between hot-key
        shifts: a key group's share of each stream's tuples follows that stream's own keys
        (two inputs hot on different keys load different key groups)."""
        eps = [key_epochs(s.keys, self.scenario.duration_s) for s in self.scenario.streams]
        starts = np.unique(np.concatenate([e.starts_s for e in eps]))
        self._epoch_starts_tick = np.floor(starts / self.tick_s).astype(np.int64)
        shares = np.ones((starts.size, self.m, self.d))
        reads = self.net.rate_coefficients() > 0  # (operators, streams)
        for i, op in enumerate(self.net.operators):
            if op.key_groups == 1:
                continue
            mask = self.units.op_index == i
            for k in np.flatnonzero(reads[i]):
                idx = eps[k].epoch_at(starts)
                for e, pe in enumerate(idx):
                    # units were built with uniform 1/g shares: rescale to the epoch's shares
                    g = op.key_groups
                    shares[e, mask, k] = key_group_shares(eps[k].probs[pe], g) * g
        self._shares = shares
        self._epoch = 0

    def _rebuild_coefficients(self) -> None:
        """Recompute unit and node coefficient matrices after a plan, epoch or shed change."""
        op_coeff = self.net.load_coefficients(self.arc_keep)
        op_rate = self.net.rate_coefficients(self.arc_keep)
        g = np.array([o.key_groups for o in self.net.operators], dtype=float)
        share = self._shares[self._epoch] / g[self.units.op_index][:, None]  # (m, d)
        self.ucoeff = op_coeff[self.units.op_index] * share  # (m, d) CPU-s per input tuple
        self.uvisit = op_rate[self.units.op_index] * share  # (m, d) visits per input tuple
        onehot = np.zeros((self.n, self.m))
        onehot[self.assign, np.arange(self.m)] = 1.0
        self.ncoeff = onehot @ self.ucoeff  # (n, d)
        self.involved = self.ncoeff > 0
        self.wout = self.net.weighted_output(self.arc_keep)

    def _alloc_records(self) -> None:
        T, n, d = self.T, self.n, self.d
        self.rec_node_load = np.zeros((T, n))
        self.rec_util = np.zeros((T, n))
        self.rec_backlog = np.zeros((T, n))
        self.rec_unit_load = np.zeros((T, self.m))
        self.rec = {
            k: np.zeros((T, d))
            for k in ("arrived", "admitted", "dropped", "completed", "queued", "lost", "latency")
        }
        self.rec_wout = np.zeros(T)
        self.sink = Sink(d, self.scenario.simulator.sink_dedup, T)  # received sequence ranges
        self.rec_nodes = np.zeros(T)
        self.busy_core_s = 0.0

    # -------------------------------------------------------------- protocol
    def apply(self, plan: Plan) -> None:
        """Adopt a plan: move units (with their backlog and a pause), set keep fractions."""
        new = plan.placement.as_array()
        if new.shape != self.assign.shape:
            raise ValueError(f"placement: {new.size} units, the scenario has {self.m}")
        if self.plan_version >= 0:
            self._migrate(new)
        self.assign = new.copy()
        keep = np.ones(self.d)
        arc: dict[str, float] = {}
        for loc, x in zip(plan.shed.locations, plan.shed.keep, strict=True):
            if loc in self.net.streams:
                keep[self.net.streams.index(loc)] = min(1.0, max(0.0, x))
            else:
                arc[loc] = min(1.0, max(0.0, x))
        self.input_keep, self.arc_keep = keep, arc
        self.ha.set_policy(plan.ha.policy, plan.ha.checkpoint_interval)
        self.pool.apply(plan.scale.active(self.n), self.t)
        self.keep_log.append((self.t * self.tick_s, keep.copy()))
        self.placement_log.append(
            (self.t * self.tick_s, np.bincount(self.assign, minlength=self.n))
        )
        self.plan_version = plan.version
        self.plans.append((self.t * self.tick_s, plan.version, plan.reason))
        self._rebuild_coefficients()

    def _migrate(self, new: NDArray[np.int64]) -> None:
        moved = np.flatnonzero(new != self.assign)
        if moved.size == 0:
            return
        old_involved = self.involved.copy()
        old_B = self.B.copy()
        onehot = np.zeros((self.n, self.m))
        onehot[new, np.arange(self.m)] = 1.0
        new_involved = (onehot @ self.ucoeff) > 0
        # a node that stops serving a stream hands its backlog to the receivers of its units
        for u in moved:
            s, r = self.assign[u], new[u]
            ceased = old_involved[s] & ~new_involved[s] & new_involved[r]
            self.B[r, ceased] = np.maximum(self.B[r, ceased], old_B[s, ceased])
        self.B[~new_involved] = 0.0
        sim = self.scenario.simulator
        mb = self.units.state_bytes[moved] / 1e6
        pause_s = sim.migration_base_s + sim.migration_s_per_mb * mb
        load = self.rec_unit_load[max(self.t - 1, 0), moved]
        np.add.at(self.overhead, new[moved], pause_s * load)
        self.migrations += int(moved.size)
        self.state_bytes_moved += float(self.units.state_bytes[moved].sum())

    def observe(self) -> Observation:
        """Samples since the previous call (one per tick)."""
        a, b = self._last_obs, self.t
        self._last_obs = b
        done = self.rec["completed"][a:b]
        adm = done.sum()
        lat = float((self.rec["latency"][a:b] * done).sum() / adm) if adm else 0.0
        return Observation(
            time_s=b * self.tick_s,
            unit_load=self.rec_unit_load[a:b].T.copy(),
            node_load=self.rec_node_load[a:b].T.copy(),
            input_rates=(self.arrivals[a:b] / self.tick_s).T.copy(),
            node_status=tuple(
                NodeStatus.SUSPECTED
                if s is not NodeStatus.UP
                and not self.ha.detected(i, b * self.tick_s)
                and s is not NodeStatus.SUSPECTED
                else s
                for i, s in enumerate(self.status)
            ),
            assignment=self.assign.copy(),
            backlog_s=self._backlog_work() / self.capacity,
            latency_s=lat,
            plan_version=self.plan_version,
            counters=self.totals(),
        )

    # ----------------------------------------------------------------- faults
    def _fire_faults(self) -> None:
        now, before = self.t * self.tick_s, list(self.status)  # masks: see _status_masks
        for i, (until, what) in list(self._until.items()):
            if self.t >= until:
                del self._until[i]
                if what == "slow":
                    self.slow[i] = 1.0
                elif self.status[i] is not NodeStatus.LOST:
                    self.status[i] = NodeStatus.UP
        while self._fault_i < len(self._faults) and self._faults[self._fault_i].at_s <= now + 1e-9:
            self._apply_fault(self._faults[self._fault_i])
            self._fault_i += 1
        if self.status != before:
            self._masks = None

    def _apply_fault(self, f: FaultSpec) -> None:
        i = self.cluster.ids.index(f.node)
        self.events.append((self.t * self.tick_s, f.kind, f.node))
        dur = None if f.duration_s is None else self.t + max(1, round(f.duration_s / self.tick_s))
        if f.kind in ("kill", "lose"):
            self.status[i] = NodeStatus.LOST if f.kind == "lose" else NodeStatus.DOWN
            if self.ha.on_kill(i, self.t * self.tick_s):
                self._lose_backlog(i)
            if f.kind == "kill":
                self._until[i] = (dur or self.t + round(30 / self.tick_s), "down")
        elif f.kind == "partition":
            self.status[i] = NodeStatus.DOWN
            self._until[i] = (dur or self.t + round(30 / self.tick_s), "down")
        elif f.kind == "slow":
            self.slow[i] = f.factor
            if dur is not None:
                self._until[i] = (dur, "slow")
        elif f.kind == "restore":
            self.status[i] = NodeStatus.UP
            self.slow[i] = 1.0
            self._until.pop(i, None)

    def _lose_backlog(self, i: int) -> float:
        """Node i's state is gone: its unprocessed (newest) tuples are lost everywhere."""
        lost = self.B[i].copy()
        self.B = np.maximum(self.B - lost[None, :], 0.0)
        self.B[i], self.overhead[i] = 0.0, 0.0
        self._lost_now += lost
        self.sink.lose(lost)
        return float(lost.sum())

    # ------------------------------------------------------------------- tick
    def _backlog_work(self) -> Array:
        work = (self.ncoeff * self.B).sum(axis=1) + self.overhead + self.recovery_q
        return np.asarray(work, dtype=float)

    def step(self, ticks: int = 1) -> None:
        """Advance ``ticks`` ticks (stops at the end of the scenario)."""
        end = min(self.T, self.t + ticks)
        while self.t < end:
            self._tick()

    def _tick(self) -> None:
        t = self.t
        self._lost_now = np.zeros(self.d)
        self._fire_faults()
        self._fail_over()
        if (
            self._epoch + 1 < self._epoch_starts_tick.size
            and t >= self._epoch_starts_tick[self._epoch + 1]
        ):
            self._epoch = int(np.searchsorted(self._epoch_starts_tick, t, side="right") - 1)
            self._rebuild_coefficients()
        arr = self.arrivals[t]
        adm = arr * self.input_keep
        self.sink.admit(adm)
        up = self.up_mask() & self.pool.ready(t)
        cap = self.capacity * self.tick_s / self.slow * up
        self.rec_nodes[t] = self.pool.tick()
        owed = (self.B + adm[None, :]) * self.involved
        uload = (self.ucoeff @ adm) / self.tick_s  # unit offered load in cores
        self.overhead += self.ha.overhead(uload, self.assign, up)
        demand = (self.ncoeff * owed).sum(axis=1) + self.overhead + self.recovery_q
        frac = np.ones(self.n)
        np.divide(cap, demand, out=frac, where=demand > cap)
        frac = np.minimum(frac, 1.0)
        # what was in the system at the end of the previous tick (faults this tick are in lost)
        queued_before = self.rec["queued"][t - 1] if t else np.zeros(self.d)
        self.B = owed * (1.0 - frac)[:, None]
        self.overhead *= 1.0 - frac
        self.recovery_q *= 1.0 - frac
        self.recovery_q[self.recovery_q < 1e-9] = 0.0
        queued = self.queued()
        completed = queued_before + adm - queued - self._lost_now
        self.rec_unit_load[t] = uload
        nload = np.bincount(self.assign, weights=uload, minlength=self.n)
        self.rec_node_load[t] = nload
        busy = np.minimum(demand, cap)
        self.rec_util[t] = np.divide(busy, cap, out=np.zeros(self.n), where=cap > 0)
        self.busy_core_s += float(busy.sum())
        work = self._backlog_work()
        self.rec_backlog[t] = work / self.capacity
        speed = self.capacity / self.slow
        wait = np.divide(work, speed) + self.hop_s
        wait = np.where(up, wait, wait + self._downtime_left() + self.pool.startup_left_s(t))
        self.rec["latency"][t] = (
            wait[self.assign] @ self.uvisit + (1.0 / speed)[self.assign] @ self.ucoeff
        )
        self.rec["arrived"][t] = arr
        self.rec["admitted"][t] = adm
        self.rec["dropped"][t] = arr - adm
        self.rec["completed"][t] = completed
        self.rec["queued"][t] = queued
        self.rec["lost"][t] = self._lost_now
        self.rec_wout[t] = float(completed @ self.wout)
        self.sink.deliver(completed)
        self.t += 1

    # ------------------------------------------------------------ HA hooks
    def up_mask(self) -> NDArray[np.bool_]:
        """Nodes able to host units now."""
        return self._status_masks()[0]

    def _status_masks(self) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """(alive, lost) per node, rebuilt only after a status change."""
        if self._masks is None:
            lost = [s is NodeStatus.LOST for s in self.status]
            self._masks = (alive_mask(self.status), np.array(lost, dtype=bool))
        return self._masks

    def _fail_over(self) -> None:
        """Apply the HA model's failovers due now (``simulator.ha_model.Failover``)."""
        uload = np.asarray(self.rec_unit_load[max(self.t - 1, 0)], dtype=float)
        now = self.t * self.tick_s
        for f in self.ha.step(
            now, self.assign, self.up_mask(), uload, self.capacity, self.recovery_q
        ):
            if f.lose_in_flight:
                self.lost_in_failover += self._lose_backlog(f.node)  # amnesia: in flight
            if f.units.size and f.resend_s.any():  # output sent again reaches the sink
                share, span = failed_share(self.uvisit, self.units.op_index, f.units, f.resend_s)
                self.sink.resend(share, span / self.tick_s, f.fault_s / self.tick_s)
            self.failover(f.units, f.hosts, f.keep_backlog)
            self.recovery_q += f.replay

    def failover(
        self, units: NDArray[np.int64], hosts: NDArray[np.int64], keep_backlog: bool
    ) -> None:
        """Move ``units`` to ``hosts`` outside the controller (a standby or survivor takes over)."""
        if units.size == 0:
            return
        new = self.assign.copy()
        new[units] = hosts
        before = self.migrations
        self._migrate(new)
        self.failover_moves += self.migrations - before
        self.migrations = before
        self.assign = new
        self._rebuild_coefficients()

    def _downtime_left(self) -> Array:
        left = np.where(self._status_masks()[1], self.scenario.duration_s, 0.0)
        for i, (until, what) in self._until.items():
            if what == "down":
                left[i] = (until - self.t) * self.tick_s
        return left

    def queued(self) -> Array:
        masked = np.where(self.involved, self.B, 0.0)
        return np.asarray(masked.max(axis=0), dtype=float) if self.n else np.zeros(self.d)

    @property
    def done(self) -> bool:
        """True once every tick has run."""
        return self.t >= self.T

    # ---------------------------------------------------------------- results
    def totals(self) -> dict[str, float]:
        """Cumulative tuple counts: in, out, dropped, queued, lost (input-tuple units)."""
        t = self.t
        return {
            "in": float(self.rec["arrived"][:t].sum()),
            "out": float(self.rec["completed"][:t].sum()),
            "dropped": float(self.rec["dropped"][:t].sum()),
            "queued": float(self.rec["queued"][t - 1].sum()) if t else 0.0,
            "lost": float(self.rec["lost"][:t].sum()),
            "weighted_out": float(self.rec_wout[:t].sum()),
            "migrations": float(self.migrations),
            "failover_moves": float(self.failover_moves),
            "lost_in_failover": float(self.lost_in_failover),
            "sink_lost": float(self.sink.lost.sum()),
            "duplicates": float(self.sink.duplicates.sum()),
            "duplicates_suppressed": float(self.sink.suppressed.sum()),
            "state_bytes_moved": self.state_bytes_moved,
            "busy_core_s": self.busy_core_s,
            "node_seconds": self.pool.node_seconds,
            "scale_actions": float(self.pool.actions),
        }

    def result(self) -> SimResult:
        """The run's time series so far."""
        t = self.t
        idx = pd.Index(np.arange(t) * self.tick_s, name="time_s")
        nodes = list(self.cluster.ids)
        return SimResult(
            node_load=pd.DataFrame(self.rec_node_load[:t], index=idx, columns=nodes),
            node_util=pd.DataFrame(self.rec_util[:t], index=idx, columns=nodes),
            backlog_s=pd.DataFrame(self.rec_backlog[:t], index=idx, columns=nodes),
            streams=stream_series(self.rec, self.rec_wout, t, idx),
            totals=self.totals(),
            plans=list(self.plans),
            shed=log_frame(self.keep_log, list(self.net.streams), np.ones(self.d)),
            placement=log_frame(self.placement_log, nodes, np.zeros(self.n, dtype=np.int64)),
            events=pd.DataFrame(self.events, columns=["time_s", "kind", "node"]),
            nodes=pd.Series(self.rec_nodes[:t], index=idx, name="nodes"),
        )
