"""The figures of a Spark replay's summary: timing, balance, plans, partitions, scaling and
routing, from the batches' statistics and the plans the controller published.

The first ``warmup_batches`` batches (at least the first: it pays the executors' Python
start) are run but left out of the timing figures; with no batch that read a row nothing was
timed, and the timing figures are None rather than 0.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from controller.calibration import CalibrationOverlay
from controller.replay import window_stats
from controller.scenario import ScenarioFile
from spark_adapter.dpc import dpc_summary
from spark_adapter.executor_pool import LOCAL_EXECUTORS

__all__ = ["SparkRun", "run_summary"]


@dataclass(frozen=True)
class SparkRun:
    """What a Spark replay ran with, as its summary reports it."""

    placement: str
    partitioner: str
    master: str
    partitions: int
    warmup_batches: int
    calibration: CalibrationOverlay | None = None  # the controller's load model, calibrated


def _mean_phases(stats: list[Any]) -> dict[str, float]:
    """Mean seconds per phase (plan, fold, checkpoint, stats, output, commit) of the batches."""
    rows = [s.info["phases"] for s in stats if s.info.get("phases")]
    if not rows:
        return {}
    return {k: round(float(np.mean([r.get(k, 0.0) for r in rows])), 4) for k in rows[0]}


def _migrations(plans: list[Any]) -> int:
    moves = 0
    for a, b in itertools.pairwise(plans):
        moves += a.placement.moves_to(b.placement)
    return moves


def run_summary(
    sc: ScenarioFile, stats: list[Any], pipe: Any, sub: Any, run: SparkRun
) -> dict[str, Any]:
    """Timing, balance and plan figures of the run's batches."""
    n = run.partitions
    real = [s for s in stats if s.event_range[0] >= 0]
    # the first ``warmup`` batches (at least the first: it pays the executors' Python start)
    # are left out of the timing statistics; they still count in rows and correctness
    timed = real[run.warmup_batches :] if len(real) > run.warmup_batches + 1 else real
    node = (
        np.stack([s.busy_s / max(s.duration_s, 1e-3) for s in real], axis=0)
        if real
        else np.zeros((1, n))
    )
    var, corr = window_stats(pd.DataFrame(node), max(2, min(sc.controller.window_k, len(real))))
    return {
        "scenario": sc.name,
        "substrate": "spark",
        "master": run.master,
        "placement": run.placement,
        "partitioner": run.partitioner,
        "partitions": n,
        "ticks": len(real),
        "batches": len(real),
        **_timing(timed),
        "warmup_batches_excluded": len(real) - len(timed),
        "ha_policy": sc.controller.ha.policy,
        "batch_phases_mean_s": _mean_phases(timed),
        "node_load_variance_mean": var,
        "mean_pairwise_node_correlation": corr,
        "migrations": _migrations(sub.published),
        "plan_versions": len(sub.published),
        **_partition_figures(stats, real, timed),
        **_scaling_figures(real, sub.published),
        "executor_actions": list(pipe.pool.log) if pipe.pool is not None else [],
        "routing_per_batch": _routing_per_batch(timed, pipe),
        "dpc": dpc_summary(stats, sc.controller.ha.dpc.mode),
    }


def _timing(timed: list[Any]) -> dict[str, float | None]:
    """Throughput and batch durations of the timed batches; each None when no batch read a
    row (a stream of rate 0): nothing was timed, which is not 0 s."""
    if not timed:
        keys = ("mean_latency", "p99_latency", "batch_duration_p50", "batch_duration_p99")
        return dict.fromkeys(("throughput", *keys))
    dur = np.array([s.duration_s for s in timed])
    return {
        "throughput": sum(int(s.rows.sum()) for s in timed) / max(float(dur.sum()), 1e-9),
        "mean_latency": float(dur.mean()),
        "p99_latency": float(np.quantile(dur, 0.99)),
        "batch_duration_p50": float(np.quantile(dur, 0.5)),
        "batch_duration_p99": float(np.quantile(dur, 0.99)),
    }


def _scaling_figures(real: list[Any], plans: list[Any]) -> dict[str, Any]:
    """Per batch, the partitions it ran and the executors alive; the scale changes the
    controller published; executor-seconds (batch durations times live executors). In
    ``local[N]`` the driver runs the tasks and has no executors to count: no executor figures
    (None), not the pool's "unbounded" stand-in."""
    execs = [int(s.info.get("live_executors", 0)) for s in real]
    if any(e >= LOCAL_EXECUTORS for e in execs):
        execs = []
    counts = [p.scale.nodes for p in plans]
    return {
        "running_partitions_per_batch": [int(s.info.get("running_partitions", 0)) for s in real],
        "nodes_per_batch": [int(s.info.get("nodes", 0)) for s in real],
        "executors_per_batch": execs or None,
        "batch_duration_s_per_batch": [round(s.duration_s, 3) for s in real],
        "scale_actions": sum(a != b for a, b in itertools.pairwise(counts)),
        "executor_seconds": (
            float(sum(s.duration_s * e for s, e in zip(real, execs, strict=True)))
            if execs
            else None
        ),
    }


def _routing_per_batch(timed: list[Any], pipe: Any) -> list[dict[str, Any]]:
    """Per timed batch, the routing it was pinned to: the partitioner that made it, its split
    keys, its hot keys moved whole off their key group's partition, the split keys'
    fragmentation (distinct partitions per split key), a digest of the routing and one of
    the plan's drops (two batches with both digests equal routed and dropped the same rows)."""
    out = []
    for s in timed:
        plan = pipe.plans.load(s.plan_version)
        r = plan.routing
        fan = [len(q) for q in r.hot.values() if len(q) > 1]
        out.append(
            {
                "batch": s.batch_id,
                "plan_version": s.plan_version,
                "partitioner": r.partitioner,
                "split_keys": len(fan),
                "keys_moved_whole": len(r.hot) - len(fan),
                "fragmentation": float(np.mean(fan)) if fan else 1.0,
                "routing_digest": r.digest(),
                "shed_digest": plan.shed.digest(),
            }
        )
    return out


def _partition_figures(stats: list[Any], real: list[Any], timed: list[Any]) -> dict[str, Any]:
    """Rows, busy time and merge volume per partition and per batch (``stats``: every batch,
    the final flush included; ``real``: those that read input; ``timed``: after warm-up)."""
    merged = [s.info.get("partials_merged", 0) for s in timed]
    rows_timed = sum(int(s.rows.sum()) for s in timed)
    busy_timed = sum(float(s.busy_s.sum()) for s in timed)
    return {
        # merge volume: partial results merged across partitions (round-robin: every key's)
        "partials_merged": int(sum(s.info.get("partials_merged", 0) for s in stats)),
        "partials_merged_per_batch": float(np.mean(merged)) if timed else 0.0,
        "partition_rows": [int(x) for x in np.sum([s.rows for s in real], axis=0)] if real else [],
        "partition_busy_per_batch_s": (
            [round(float(x), 4) for x in np.mean([s.busy_s for s in timed], axis=0)]
            if timed
            else []
        ),
        "busy_s_per_row": busy_timed / max(1, rows_timed) if timed else 0.0,
        "partition_busy_s": (
            [round(float(x), 4) for x in np.sum([s.busy_s for s in real], axis=0)] if real else []
        ),
    }
