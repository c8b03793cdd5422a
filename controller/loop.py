"""The control loop: observe -> push into the load window -> decide -> apply.

``Substrate`` is the protocol both the simulator and the Spark adapter implement. ``ControlLoop``
is callable one ``tick()`` at a time (the daemon drives it from a scheduler; replays drive it
directly) and keeps every decision with its reason.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from controller.policy import ControlPolicy, Decision
from core.loadstats import LoadWindow
from core.observation import Observation
from core.plans import Plan

__all__ = ["ControlLoop", "DecisionRecord", "Substrate", "with_refusals"]


class Substrate(Protocol):
    """What the controller steers."""

    def observe(self) -> Observation:
        """Load samples since the previous call."""
        ...

    def apply(self, plan: Plan) -> Plan | None:
        """Adopt ``plan`` at the next tick or micro-batch boundary; the plan as applied when
        the substrate changed it (a Spark substrate publishes after plans other writers
        published, carrying their operator parameters), else None."""
        ...


@dataclass(frozen=True)
class DecisionRecord:
    """A decision as logged: round, time, kind, reason, numbers and plan version."""

    round: int
    time_s: float
    kind: str
    reason: str
    plan_version: int
    applied: bool
    details: dict[str, Any]
    duration_s: float


class ControlLoop:
    """Drives one substrate with one policy.

    Parameters
    ----------
    substrate : what to steer
    policy : the decide step
    window_k : samples per load window
    dry_run : compute and log plans but never apply them
    """

    def __init__(
        self,
        substrate: Substrate,
        policy: ControlPolicy,
        window_k: int = 10,
        dry_run: bool = False,
        keep_records: int | None = None,
    ) -> None:
        self.substrate = substrate
        self.policy = policy
        self.dry_run = dry_run
        ctx = policy.ctx
        self.units = LoadWindow(ctx.units.m, window_k)
        self.nodes = LoadWindow(ctx.cluster.n, window_k)
        self.plan: Plan = policy.initial_plan()
        # every round's record (a replay returns them all); a daemon keeps the newest
        # ``keep_records`` in memory, its decision log has the rest
        self.records: list[DecisionRecord] | deque[DecisionRecord] = (
            [] if keep_records is None else deque(maxlen=keep_records)
        )
        self.round = 0
        self.last_obs: Observation | None = None  # the newest observation, for telemetry

    def start(self) -> Plan:
        """Apply the initial plan (even in dry run: the substrate needs some placement)."""
        self.plan = self.substrate.apply(self.plan) or self.plan
        return self.plan

    def tick(self) -> Decision:
        """One control round."""
        t0 = time.perf_counter()
        obs = self.substrate.observe()
        self.last_obs = obs
        self.units.push_many(obs.unit_load)
        self.nodes.push_many(obs.node_load)
        decision = with_refusals(
            self.policy.decide(self.units.series(), self.nodes.series(), self.plan, obs), obs
        )
        applied = False
        if decision.plan is not None and not self.dry_run:
            self.plan = self.substrate.apply(decision.plan) or decision.plan
            applied = True
        self.round += 1
        details = _jsonable(decision.details)
        if decision.plan is not None and not applied:  # dry run: recommended, not in effect
            details = {**details, "recommended_plan_version": decision.plan.version}
        self.records.append(
            DecisionRecord(
                round=self.round,
                time_s=obs.time_s,
                kind=str(decision.kind),
                reason=decision.reason,
                plan_version=self.plan.version,  # the plan in effect after the round
                applied=applied,
                details=details,
                duration_s=time.perf_counter() - t0,
            )
        )
        return decision


def with_refusals(d: Decision, obs: Observation) -> Decision:
    """The decision with the plans the steered pipeline refused since the last round
    (``spark_adapter.plan_fit``: made for another query or partition count; its batches ran
    the plan before): the newest named in the reason, all in ``details``."""
    refused = sorted({b.plan_refused for b in obs.batches if b.plan_refused is not None})
    if not refused:
        return d
    v, why = refused[-1]
    note = f"the pipeline refused plan v{v} and ran the plan before it: {why}"
    details = {**d.details, "plans_refused": [{"version": v, "problem": p} for v, p in refused]}
    return Decision(d.plan, d.kind, f"{d.reason}; {note}" if d.reason else note, details)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x
