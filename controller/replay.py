"""Scenario replay: run the control loop against a substrate and summarize the run.

The summary carries the same keys for every substrate: throughput, latency, node-load
variance and correlation per window, migrations and tuple accounting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from controller.adaptation import adaptation
from controller.calibration import predicted_batches
from controller.live_batches import predicted_live
from controller.loop import ControlLoop, DecisionRecord
from controller.migration_causes import Cause, by_cause
from controller.scenario import ScenarioFile
from controller.settings import DPCSettings
from controller.wiring import make_policy, make_simulator, with_shedding
from core import loadstats
from simulator import SimResult
from simulator.dpc import account, partners
from simulator.model import Simulator

__all__ = [
    "ReplayResult",
    "dpc_summary",
    "guarantee",
    "pairwise_moves",
    "replay_sim",
    "scaling_summary",
    "summarize",
]


@dataclass
class ReplayResult:
    """A replay's summary, its time series and its decisions."""

    summary: dict[str, Any]
    series: SimResult
    decisions: list[DecisionRecord] = field(default_factory=list)


def replay_sim(
    scenario: ScenarioFile,
    placement: str | None = None,
    ticks: int | None = None,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    shedding: str | None = None,
) -> ReplayResult:
    """Replay ``scenario`` on the simulator with the controller in the loop."""
    if seed is not None:
        scenario = scenario.model_copy(update={"seed": seed})
    scenario = with_shedding(scenario, shedding)
    sim = make_simulator(scenario)
    policy = make_policy(scenario, placement)
    loop = ControlLoop(sim, policy, window_k=scenario.controller.window_k)
    loop.start()
    total = sim.T if ticks is None else min(ticks, sim.T)
    interval = max(1, round(scenario.controller.interval_s / scenario.tick_s))
    while sim.t < total:
        sim.step(min(interval, total - sim.t))
        loop.tick()
        if progress:
            progress(sim.t, total)
    res = sim.result()
    summary = summarize(res, scenario.controller.window_k)
    summary.update(sim.ha.summary())
    summary.update(
        scenario=scenario.name,
        substrate="sim",
        placement=policy.placement.name,
        shedding=scenario.controller.shedding.method,
        ticks=int(sim.t),
        seed=scenario.seed,
        plan_version=loop.plan.version,
        migrations_by_cause=by_cause(loop.records),
        pairwise_moves=pairwise_moves(loop.records, policy.placement.name),
        adaptation=adaptation(res.streams, scenario.drift_times(), scenario.controller.interval_s),
    )
    if scenario.controller.scaling.enabled:
        summary.update(scaling_summary(res))
    if sim.outages:  # inputs that went silent: what DPC emitted tentative and corrected
        summary.update(dpc_summary(sim, scenario.controller.ha.dpc))
    bm = scenario.simulator.batch_model
    if bm is not None:  # a calibrated micro-batch engine: its batches, predicted
        load = res.node_load.to_numpy()
        summary.update(predicted_batches(load, scenario.tick_s, bm))
        live = predicted_live(load, scenario.tick_s, bm, scenario.tick_s)  # run live instead
        summary.update(
            {"predicted_live_" + k.removeprefix("predicted_"): v for k, v in live.items()}
        )
    return ReplayResult(summary=summary, series=res, decisions=loop.records)


def pairwise_moves(records: Sequence[DecisionRecord], placement: str) -> int | None:
    """Units the correlation method's own pair-wise rounds moved (applied decisions of phase
    ``pairwise``; not its global steps, the trigger's re-placements or recoveries). None for a
    method without pair-wise rounds. Where it is 0 for each correlation method, they differ
    in nothing: their rounds only differ in the moves they make."""
    if not placement.startswith("correlation-"):
        return None
    return by_cause(records).get(Cause.PAIRWISE, 0)


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    if x.size == 0 or w.sum() <= 0:
        return float(np.quantile(x, q)) if x.size else 0.0
    order = np.argsort(x)
    cw = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cw, q * cw[-1])])


def window_stats(node_load: pd.DataFrame, k: int) -> tuple[float, float | None]:
    """Mean node-load variance and mean pairwise node correlation over consecutive k-windows.

    The correlation is over the windows with a pair of nodes whose loads both vary, and of
    those pairs (None when no window has one: a run on one node, or with the other idle).
    """
    x = node_load.to_numpy().T
    n, t = x.shape
    w = t // k
    blocks = [x] if w == 0 else x[:, : w * k].reshape(n, w, k).transpose(1, 0, 2)
    var = float(np.mean([loadstats.variances(b).mean() if n else 0.0 for b in blocks]))
    rho = [r for b in blocks if (r := loadstats.varying_pairs_correlation(b)) is not None]
    return var, float(np.mean(rho)) if rho else None


def summarize(res: SimResult, k: int) -> dict[str, Any]:
    """The replay keys shared by every substrate."""
    s = res.streams
    tot = res.totals
    dur = max(len(s), 1) * (s.index[1] - s.index[0] if len(s) > 1 else 1.0)
    lat = s["latency_s"].to_numpy()
    w = s["completed"].to_numpy()
    var, corr = window_stats(res.node_load, k)
    return {
        "throughput": tot["out"] / dur,
        "weighted_throughput": tot["weighted_out"] / dur,
        "mean_latency": float((lat * w).sum() / w.sum()) if w.sum() > 0 else float(lat.mean()),
        "p99_latency": _weighted_quantile(lat, w, 0.99),
        "node_load_variance_mean": var,
        "mean_pairwise_node_correlation": corr,
        "migrations": int(tot["migrations"]),
        "dropped_fraction": tot["dropped"] / tot["in"] if tot["in"] else 0.0,
        "lost_tuples": tot["sink_lost"],
        "duplicate_tuples": tot["duplicates"],
        "duplicates_suppressed": tot["duplicates_suppressed"],
        "guarantee": guarantee(tot["sink_lost"], tot["duplicates"]),
        "tuples_in": tot["in"],
        "tuples_out": tot["out"],
        "tuples_queued": tot["queued"],
    }


def dpc_summary(sim: Simulator, dpc: DPCSettings) -> dict[str, Any]:
    """``simulator.dpc.account`` over a finished run, with the DPC mode and delay."""
    t = sim.t
    return {
        "dpc_mode": dpc.mode,
        **account(
            sim.rec["completed"][:t],
            sim.rec["latency"][:t],
            sim.offered[:t],
            sim.outages,
            partners(sim.net),
            dpc.mode,
            dpc.max_delay_s,
            sim.tick_s,
        ),
    }


def guarantee(lost: float, duplicated: float) -> str:
    """What a run delivered, from what it measured (Hwang et al.): ``gap`` when tuples were
    lost, ``repeating`` when some were output twice, ``precise`` when neither.

    >>> guarantee(0.0, 0.0), guarantee(12.5, 0.0), guarantee(0.0, 3.0)
    ('precise', 'gap', 'repeating')
    """
    return "gap" if lost > 0 else "repeating" if duplicated > 0 else "precise"


def scaling_summary(res: SimResult) -> dict[str, Any]:
    """Scale actions, node-seconds (the resource cost) and the running nodes over time (the
    times at which the count changed)."""
    nodes = res.nodes if res.nodes is not None else pd.Series(dtype=float)
    x = nodes.to_numpy()
    at = [0, *np.flatnonzero(np.diff(x) != 0) + 1] if x.size else []
    return {
        "scale_actions": int(res.totals.get("scale_actions", 0)),
        "node_seconds": float(res.totals.get("node_seconds", 0.0)),
        "nodes_over_time": [[float(nodes.index[i]), int(x[i])] for i in at],
    }
