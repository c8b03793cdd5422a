"""An oracle for the adaptive loop's drift bench (bench only, not a controller): it knows the
plan the shipped method settles on for the workload after the drift and switches to it in
one round, from a given time on. What it measures is the least adaptation the
``diurnal-phase-flip`` target can ask: a switch at the flip itself, before any round has seen
a sample of it, against one in the first round after it, the first a controller that reacts
can act in (``bench.bench_adaptive`` reports both beside the methods).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from controller.adaptation import adaptation
from controller.compare import mean_adaptation
from controller.loop import ControlLoop
from controller.policy import Array, Context, IntArray, RebalanceResult
from controller.replay import summarize
from controller.scenario import ScenarioFile
from controller.wiring import make_policy, make_simulator
from simulator.model import Simulator

__all__ = ["oracle_switches"]


class _Oracle:
    """Bench only, not a controller: re-places to a plan known in advance (the placement the
    shipped method settles on for the workload after the drift) in the first round it runs,
    then holds. What it measures: the adaptation a controller that knew the post-drift plan
    exactly could reach, from the round it acts in."""

    name, initial_note = "oracle", ""

    def __init__(self, target: IntArray) -> None:
        self.target = target

    def initial(self, ctx: Context, unit_x: Array | None) -> IntArray:
        return self.target.copy()

    def skip_global_step(self) -> None:
        """It has none."""

    def rebalance(
        self, ctx: Context, unit_x: Array, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        if np.array_equal(assign, self.target):
            return RebalanceResult(assign.copy(), "oracle: holds the post-drift plan")
        return RebalanceResult(
            self.target.copy(), "oracle: the post-drift plan", judged_by="global step"
        )


def _after_drift(sc: ScenarioFile) -> ScenarioFile:
    """The scenario with every piecewise rate replaced by its last piece from the start."""
    streams = [
        s.model_copy(update={"rate": s.rate.pieces[-1].rate})
        if getattr(s.rate, "kind", "") == "piecewise"
        else s
        for s in sc.streams
    ]
    return sc.model_copy(update={"streams": streams})


def _replay_with_oracle(
    sc: ScenarioFile, method: str, oracle: tuple[float, IntArray] | None = None
) -> tuple[Simulator, ControlLoop]:
    """The replay loop of ``replay_sim``, keeping the loop; with ``oracle`` (time, plan) the
    oracle places from the first round at or after that time."""
    sim = make_simulator(sc)
    policy = make_policy(sc, method)
    loop = ControlLoop(sim, policy, window_k=sc.controller.window_k)
    loop.start()
    interval = max(1, round(sc.controller.interval_s / sc.tick_s))
    while sim.t < sim.T:
        sim.step(min(interval, sim.T - sim.t))
        if oracle is not None and sim.t * sc.tick_s >= oracle[0]:
            policy.placement, oracle = _Oracle(oracle[1]), None
        loop.tick()
    return sim, loop


def oracle_switches(
    sc: ScenarioFile, method: str, seeds: int
) -> list[tuple[str, dict[str, Any], list[float]]]:
    """``sc`` (its first drift time listed) with an oracle that knows ``method``'s plan for
    the workload after the drift: switched to in the round at the drift and in the first
    round after it. For each switch its label, the figures of the drift table (mean over
    ``seeds``) and the times the oracle's switch was applied (the check that it was)."""
    at = sc.drift_times()[0]
    after = at + sc.controller.interval_s
    out = []
    for label, swap in (
        (f"at the flip ({at:.0f} s)", at),
        (f"first round after ({after:.0f} s)", after),
    ):
        per_seed: list[list[dict[str, Any]]] = []
        runs: list[dict[str, Any]] = []
        applied: set[float] = set()
        for k in range(seeds):
            seeded = sc.model_copy(update={"seed": sc.seed + k})
            _, post = _replay_with_oracle(_after_drift(seeded), method)
            target = np.asarray(post.plan.placement.assignment)
            sim, loop = _replay_with_oracle(seeded, method, (swap, target))
            res = sim.result()
            per_seed.append(adaptation(res.streams, [at], sc.controller.interval_s))
            runs.append(summarize(res, sc.controller.window_k))
            applied.update(
                r.time_s for r in loop.records if r.applied and r.reason.startswith("oracle")
            )
        r = {
            "adaptation": mean_adaptation(per_seed),
            "mean_latency": float(np.mean([x["mean_latency"] for x in runs])),
            "migrations": float(np.mean([x["migrations"] for x in runs])),
            "stale_reruns": 0.0,
        }
        out.append((label, r, sorted(applied)))
    return out
