"""Availability in the simulator: each policy's runtime overhead, failover and recovery.

Following Hwang et al. (ICDE 2005) qualitatively:

* ``none`` (amnesia): no overhead; a killed node's queued tuples and in-flight input during
  detection are lost (gap recovery); its units restart empty on the least-loaded survivors.
* ``upstream``: every tuple a unit takes in is kept at its producer until acknowledged; the
  buffering and the acknowledgement cost ``ack_cost_us`` of CPU per tuple (tuples = a unit's
  work / its operator's cost per tuple), on the unit's node. After detection the units restart
  on the least-loaded survivors and rebuild their state by replaying the retained input their
  windows depend on (replay work = unit load x window length). The replay regenerates the
  output of the tuples it covers (a window's span, one tick for a stateless unit: what is not
  yet acknowledged).
* ``passive``: every k ticks each unit checkpoints its state to its standby (CPU per MB of
  state); after detection the standby restores the checkpoint and replays the input since it
  (unit load x ticks since the checkpoint); what the old primary sent after its checkpoint is
  sent again.
* ``active``: a replica on another node does the same work all the time (100% extra CPU);
  after detection it takes over and sends its buffered output that downstream has not
  acknowledged (one tick).

What is sent again reaches the sink (``simulator.sink``), which tracks sequence ranges: what
it already holds is a duplicate, dropped when the sink de-duplicates (precise) and delivered
twice when not (rollback). What a run guarantees is not looked up per policy: ``guarantee``
(``controller.replay``) follows from the tuples the sink measured lost and duplicated.

Failover happens at detection (``detection_s`` after the fault), without waiting for the
controller, which then adopts the substrate's placement. The model returns what a failure
does (``Failover``: units moved, backlog kept or lost, recovery work) and the simulator
applies it; the model never touches the simulator. The replay and restore work goes to
the new hosts' recovery queues, served together with their normal work; a recovery ends when
those queues have drained, and its time is measured from the fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from core.scenario import SimulatorSettings
from ha.passive_standby import place_standbys
from ha.recovery import replace_lost
from placement.baselines import llf

__all__ = ["Failover", "HAModel", "Recovery"]

IntArray = NDArray[np.int64]
Array = NDArray[np.float64]


@dataclass
class Recovery:
    """One failure and its recovery."""

    node: int
    fault_s: float
    detect_s: float
    since_ckpt_s: float = 0.0  # passive standby: the fault's age of the last checkpoint
    hosts: list[int] = field(default_factory=list)
    replay_work_s: float = 0.0
    done_s: float | None = None

    @property
    def time_s(self) -> float | None:
        """Recovery time from the fault, once done."""
        return None if self.done_s is None else self.done_s - self.fault_s


@dataclass(frozen=True)
class Failover:
    """What a failover does to the simulator: ``units`` move to ``hosts``; the dead node's
    queued tuples are kept (upstream copies) or lost with what reached it during detection
    (``lose_in_flight``); ``replay`` is the recovery work added to each node's queue;
    ``resend_s`` is, per unit, how many seconds of its output before ``fault_s`` it sends
    again."""

    node: int
    fault_s: float
    units: IntArray
    hosts: IntArray
    keep_backlog: bool
    lose_in_flight: bool
    replay: Array
    resend_s: Array


class HAModel:
    """Per-tick HA overhead and failure handling, as effects the simulator applies.

    ``window_s``, ``state_mb`` and ``tuple_cost_s`` (the operator's CPU per tuple) are per
    unit; the model keeps no reference to the simulator.
    """

    def __init__(
        self,
        policy: str,
        checkpoint_interval: int,
        constants: SimulatorSettings,
        window_s: Array,
        state_mb: Array,
        tick_s: float,
        tuple_cost_s: Array | None = None,
    ) -> None:
        self.policy = policy
        self.k = max(1, checkpoint_interval)
        self.detection_s = constants.detection_s
        self.ckpt_s_per_mb = constants.checkpoint_s_per_mb
        self.restore_s_per_mb = constants.restore_s_per_mb
        self.window_s, self.state_mb, self.tick_s = window_s, state_mb, tick_s
        cost = np.zeros_like(window_s) if tuple_cost_s is None else tuple_cost_s
        # acknowledgement work per unit of a unit's own work (0 where the cost is unknown)
        self.ack_per_work = np.divide(
            constants.ack_cost_us * 1e-6, cost, out=np.zeros_like(cost), where=cost > 0
        )
        self.overhead_work = 0.0
        self.useful_work = 0.0
        self.recoveries: list[Recovery] = []
        self.pending: list[Recovery] = []
        self.since_ckpt = 0

    def set_policy(self, policy: str, k: int) -> None:
        """Adopt the plan's HA policy."""
        self.policy, self.k = policy, max(1, k)

    # ------------------------------------------------------------ every tick
    def overhead(self, uload: Array, assign: IntArray, alive: NDArray[np.bool_]) -> Array:
        """Extra work (CPU-s) each node does this tick for availability."""
        n = alive.size
        work = uload * self.tick_s
        self.useful_work += float(work.sum())
        extra = np.zeros(n)
        if self.policy == "upstream":
            extra = np.bincount(assign, weights=work * self.ack_per_work, minlength=n)
        elif self.policy == "passive":
            self.since_ckpt += 1
            if self.since_ckpt >= self.k:
                self.since_ckpt = 0
                extra = np.bincount(
                    assign, weights=self.state_mb * self.ckpt_s_per_mb + 0.0, minlength=n
                )
        elif self.policy == "active" and alive.sum() >= 2:
            rep = place_standbys(assign, uload, n, alive)
            extra = np.bincount(rep, weights=work, minlength=n) * alive
        self.overhead_work += float(extra.sum())
        return extra

    # ---------------------------------------------------------------- faults
    def on_kill(self, i: int, now: float) -> bool:
        """Node i died at ``now``; True when its queued tuples are lost now (amnesia)."""
        rec = Recovery(
            node=i,
            fault_s=now,
            detect_s=now + self.detection_s,
            since_ckpt_s=self.since_ckpt * self.tick_s,
        )
        self.pending.append(rec)
        self.recoveries.append(rec)
        return self.policy == "none"

    def detected(self, i: int, now: float) -> bool:
        """True once the failure of node i has been detected."""
        return not any(
            r.node == i and r.done_s is None and now < r.detect_s for r in self.recoveries
        )

    def step(
        self,
        now: float,
        assign: IntArray,
        alive: NDArray[np.bool_],
        uload: Array,
        capacity: Array,
        recovery_q: Array,
    ) -> list[Failover]:
        """Fail over the failures detected by ``now`` and close the recoveries whose work has
        drained; returns the failovers, in order, for the simulator to apply."""
        assign, queue = assign.copy(), recovery_q.copy()  # as they will be after each failover
        out: list[Failover] = []
        for rec in list(self.pending):
            if not rec.hosts and now >= rec.detect_s and alive.any():
                f = self._failover(rec, assign, alive, uload, capacity)
                out.append(f)
                assign[f.units] = f.hosts
                queue += f.replay
                if not f.units.size:
                    rec.done_s = now
                    self.pending.remove(rec)
                    continue
            if rec.hosts and all(queue[h] <= 0.0 for h in rec.hosts):
                rec.done_s = now
                self.pending.remove(rec)
        return out

    def _failover(
        self,
        rec: Recovery,
        assign: IntArray,
        alive: NDArray[np.bool_],
        uload: Array,
        capacity: Array,
    ) -> Failover:
        units = np.flatnonzero(assign == rec.node)
        if self.policy in ("passive", "active") and alive.sum() >= 2:
            new = place_standbys(assign, uload, alive.size, alive)  # the designated standbys
        else:
            new = replace_lost(assign, alive, uload, capacity, llf).assignment
        replay = np.zeros(alive.size)
        if self.policy == "upstream":
            np.add.at(replay, new[units], uload[units] * self.window_s[units])
        elif self.policy == "passive":
            since = self.since_ckpt * self.tick_s + self.detection_s
            # stateless units need no replay; a window's state never needs more than the window
            stateful = (self.window_s[units] > 0) | (self.state_mb[units] > 0)
            span = np.where(
                self.window_s[units] > 0, np.minimum(since, self.window_s[units]), since
            )
            work = stateful * (uload[units] * span + self.state_mb[units] * self.restore_s_per_mb)
            np.add.at(replay, new[units], work)
        rec.hosts = sorted({int(h) for h in new[units]})
        rec.replay_work_s = float(replay.sum())
        return Failover(
            rec.node,
            rec.fault_s,
            units,
            new[units].astype(np.int64),
            keep_backlog=self.policy != "none",
            lose_in_flight=self.policy == "none",
            replay=replay,
            resend_s=self._resend_s(rec, units),
        )

    def _resend_s(self, rec: Recovery, units: IntArray) -> Array:
        """Per failed unit, the seconds of output before the fault that its recovery sends
        again: upstream backup replays a window's input (a stateless unit's last tick, not yet
        acknowledged); a passive standby resends what followed its checkpoint (stateful units;
        a stateless one restarts); an active standby its unacknowledged tick; amnesia none."""
        window = self.window_s[units]
        if self.policy == "upstream":
            return np.maximum(window, self.tick_s)
        if self.policy == "passive":
            stateful = (window > 0) | (self.state_mb[units] > 0)
            span = np.where(window > 0, np.minimum(rec.since_ckpt_s, window), rec.since_ckpt_s)
            return np.where(stateful, span, 0.0)
        if self.policy == "active":
            return np.full(units.size, self.tick_s)
        return np.zeros(units.size)

    # --------------------------------------------------------------- summary
    def summary(self) -> dict[str, float | str]:
        """Runtime overhead and recovery times."""
        times = [r.time_s for r in self.recoveries if r.time_s is not None]
        return {
            "ha_policy": self.policy,
            "runtime_overhead": self.overhead_work / self.useful_work if self.useful_work else 0.0,
            "recovery_time_mean": float(np.mean(times)) if times else 0.0,
            "recovery_time_max": float(np.max(times)) if times else 0.0,
            "recoveries": float(len(times)),
            "recoveries_unfinished": float(len(self.recoveries) - len(times)),
        }
