"""Availability in the simulator: each policy's runtime overhead, failover, recovery and guarantee.

Following Hwang et al. (ICDE 2005) qualitatively:

* ``none`` (amnesia): no overhead; a killed node's queued tuples and in-flight input during
  detection are lost (gap recovery); its units restart empty on the least-loaded survivors.
* ``upstream``: upstream output queues are kept until acknowledged (a small buffering cost,
  1% of the work they carry); after detection the units restart on the least-loaded survivors
  and rebuild their state by replaying the retained input their windows depend on (replay work
  = unit load x window length); nothing is lost (precise, with de-duplication).
* ``passive``: every k ticks each unit checkpoints its state to its standby (CPU per MB of
  state); after detection the standby restores the checkpoint and replays the input since it
  (unit load x ticks since the checkpoint); precise.
* ``active``: a replica on another node does the same work all the time (100% extra CPU);
  after detection it simply takes over; precise.

Failover happens at detection (``detection_s`` after the fault), without waiting for the
controller, which then adopts the substrate's placement. The replay and restore work goes to
the new hosts' recovery queues, served together with their normal work; a recovery ends when
those queues have drained, and its time is measured from the fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ha.passive_standby import place_standbys
from ha.recovery import replace_lost
from placement.baselines import llf

if TYPE_CHECKING:
    from simulator.model import Simulator

__all__ = ["GUARANTEES", "HAModel", "Recovery"]

GUARANTEES = {"none": "gap", "upstream": "precise", "passive": "precise", "active": "precise"}
ACK_COST = 0.01  # upstream backup: buffering and acks, as a fraction of the work carried


@dataclass
class Recovery:
    """One failure and its recovery."""

    node: int
    fault_s: float
    detect_s: float
    hosts: list[int] = field(default_factory=list)
    replay_work_s: float = 0.0
    done_s: float | None = None

    @property
    def time_s(self) -> float | None:
        """Recovery time from the fault, once done."""
        return None if self.done_s is None else self.done_s - self.fault_s


class HAModel:
    """Per-tick HA overhead and failure handling for one simulator."""

    def __init__(self, sim: Simulator, policy: str, checkpoint_interval: int) -> None:
        self.sim = sim
        self.policy = policy
        self.k = max(1, checkpoint_interval)
        s = sim.scenario.simulator
        self.detection_s = s.detection_s
        self.ckpt_s_per_mb = s.checkpoint_s_per_mb
        self.restore_s_per_mb = s.restore_s_per_mb
        win = {o.id: (o.window.size_s if o.window else 0.0) for o in sim.scenario.operators}
        self.window_s = np.array(
            [win[sim.net.operators[i].id] for i in sim.units.op_index], dtype=float
        )
        self.state_mb = sim.units.state_bytes / 1e6
        self.overhead_work = 0.0
        self.useful_work = 0.0
        self.recoveries: list[Recovery] = []
        self.pending: list[Recovery] = []
        self.lost = 0.0
        self.since_ckpt = 0

    def set_policy(self, policy: str, k: int) -> None:
        """Adopt the plan's HA policy."""
        self.policy, self.k = policy, max(1, k)

    # ------------------------------------------------------------ every tick
    def overhead(self, uload: NDArray[np.float64]) -> NDArray[np.float64]:
        """Extra work (CPU-s) each node does this tick for availability."""
        sim = self.sim
        tick = sim.tick_s
        work = uload * tick
        self.useful_work += float(work.sum())
        extra = np.zeros(sim.n)
        if self.policy == "upstream":
            extra = np.bincount(sim.assign, weights=work * ACK_COST, minlength=sim.n)
        elif self.policy == "passive":
            self.since_ckpt += 1
            if self.since_ckpt >= self.k:
                self.since_ckpt = 0
                extra = np.bincount(
                    sim.assign, weights=self.state_mb * self.ckpt_s_per_mb + 0.0, minlength=sim.n
                )
        elif self.policy == "active":
            alive = sim.up_mask()
            if alive.sum() >= 2:
                rep = place_standbys(sim.assign, uload, sim.n, alive)
                extra = np.bincount(rep, weights=work, minlength=sim.n) * alive
        self.overhead_work += float(extra.sum())
        return extra

    # ---------------------------------------------------------------- faults
    def on_kill(self, i: int) -> None:
        """A node died: amnesia loses its queued tuples now; the others keep them upstream."""
        sim = self.sim
        if self.policy == "none":
            sim._lose_backlog(i)
        rec = Recovery(
            node=i, fault_s=sim.t * sim.tick_s, detect_s=sim.t * sim.tick_s + self.detection_s
        )
        self.pending.append(rec)
        self.recoveries.append(rec)

    def detected(self, i: int) -> bool:
        """True once the failure of node i has been detected."""
        return not any(
            r.node == i and r.done_s is None and sim_time(self.sim) < r.detect_s
            for r in self.recoveries
        )

    def step(self) -> None:
        """Fail over detected failures; close recoveries whose work drained."""
        sim = self.sim
        now = sim_time(sim)
        for rec in list(self.pending):
            if not rec.hosts and now >= rec.detect_s:
                self._failover(rec)
            if rec.hosts and all(sim.recovery_q[h] <= 0.0 for h in rec.hosts):
                rec.done_s = now
                self.pending.remove(rec)

    def _failover(self, rec: Recovery) -> None:
        sim = self.sim
        i = rec.node
        alive = sim.up_mask()
        units = np.flatnonzero(sim.assign == i)
        if not alive.any():
            return
        uload = sim.last_unit_load()
        if self.policy in ("passive", "active") and alive.sum() >= 2:
            standby = place_standbys(sim.assign, uload, sim.n, alive)  # the designated standbys
            new = sim.assign.copy()
            new[units] = standby[units]
        else:
            new = replace_lost(sim.assign, alive, uload, sim.capacity, llf).assignment
        if self.policy == "none":
            self.lost += sim.lose_in_flight(i)  # input that reached the dead node during detection
        replay = np.zeros(sim.n)
        if self.policy == "upstream":
            np.add.at(replay, new[units], uload[units] * self.window_s[units])
        elif self.policy == "passive":
            since = self.since_ckpt * sim.tick_s + self.detection_s
            # stateless units need no replay; a window's state never needs more than the window
            stateful = (self.window_s[units] > 0) | (self.state_mb[units] > 0)
            span = np.where(
                self.window_s[units] > 0, np.minimum(since, self.window_s[units]), since
            )
            work = stateful * (uload[units] * span + self.state_mb[units] * self.restore_s_per_mb)
            np.add.at(replay, new[units], work)
        sim.failover(units, new[units], keep_backlog=self.policy != "none")
        sim.recovery_q += replay
        rec.hosts = sorted({int(h) for h in new[units]}) if units.size else []
        rec.replay_work_s = float(replay.sum())
        if not units.size:
            rec.done_s = sim_time(sim)
            self.pending.remove(rec)

    # --------------------------------------------------------------- summary
    def summary(self) -> dict[str, float | str]:
        """Runtime overhead, recovery times, losses and the guarantee."""
        times = [r.time_s for r in self.recoveries if r.time_s is not None]
        return {
            "ha_policy": self.policy,
            "runtime_overhead": self.overhead_work / self.useful_work if self.useful_work else 0.0,
            "recovery_time_mean": float(np.mean(times)) if times else 0.0,
            "recovery_time_max": float(np.max(times)) if times else 0.0,
            "recoveries": float(len(times)),
            "recoveries_unfinished": float(len(self.recoveries) - len(times)),
            "guarantee": GUARANTEES[self.policy],
        }


def sim_time(sim: Simulator) -> float:
    """The simulator's current time in seconds."""
    return sim.t * sim.tick_s
