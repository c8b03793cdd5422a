"""ROD on Spark: ``scenarios/spark-bursty-rod.yaml`` replayed with LLF's and ROD's initial
placements at a few input scales; the sustained burst rate is where a method's burst batches
reach the tick; a calibration on LLF's run predicts each method's batches with the simulator.

Run: .venv/bin/python -m bench.bench_policies_spark rod
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import (
    ROOT,
    calibration_row,
    cluster_session,
    environment,
    held_plan_load,
    warm_up,
    write_section,
)
from controller.calibration import apply_overlay, calibrate, predicted_batches, read_batches
from controller.scenario import ScenarioFile, load_scenario
from controller.spark_replay import replay_spark
from controller.wiring import make_policy, spark_context

ROD_SCALES = (0.08, 0.12, 0.16)  # replay scales around the sustainable burst rates
ROD_BATCHES = 11  # batch 0 (planning, cold tasks) and two 5-batch burst periods
ROD_METHODS = ("llf", "rod")
ROD_CAL_SCALE = ROD_SCALES[1]  # the scale whose runs are calibrated and predicted


def burst_ticks(sc: ScenarioFile) -> np.ndarray:
    """Ticks in which some stream bursts (its rate at its burst level)."""
    from core.workload import rates

    r = rates(sc)
    return np.flatnonzero(r.max(axis=1) >= 0.99 * r.max())


def modelled_burst_load(sc: ScenarioFile, method: str) -> float:
    """The busiest partition's modelled cores in the worst burst tick at scale 1 (the
    controller's own load model: key groups' per-stream shares times the tick's rates)."""
    from core.workload import rates
    from placement.feasible import node_coefficients
    from spark_adapter.query import compile_query

    ctx = spark_context(sc, compile_query(sc), 2, 1.0)
    a = np.asarray(make_policy(sc, method, ctx=ctx).initial_plan().placement.as_array())
    node = node_coefficients(ctx.units.coeff, a, 2)
    return float((rates(sc)[burst_ticks(sc)] / sc.tick_s @ node.T).max())


def bursty_rod() -> tuple[str, dict[str, Any]]:
    """``spark-bursty-rod`` replayed at each scale with each initial placement; a method's
    sustained burst rate is where the line fitted to its median burst-batch duration over the
    scales reaches the tick (a batch longer than the tick leaves a backlog)."""

    sc = load_scenario(ROOT / "scenarios" / "spark-bursty-rod.yaml")
    burst = burst_ticks(sc)
    timed = burst[(burst >= 1) & (burst < ROD_BATCHES)]
    spark = cluster_session("trimtab-bench-rod")
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-rod-"))
    med: dict[str, list[float]] = {m: [] for m in ROD_METHODS}
    at_cal: dict[str, dict[str, Any]] = {}
    try:
        warm_up(spark, sc, work, "llf", 0.05)
        for x in ROD_SCALES:
            for m in ROD_METHODS:
                res = replay_spark(
                    sc,
                    batches=ROD_BATCHES,
                    placement=m,
                    partitions=2,
                    scale=x,
                    spark=spark,
                    workdir=work / f"{m}-{x}",
                )
                s = res.summary
                if not s["output_matches_reference"]:
                    raise RuntimeError(f"{m} at scale {x}: output differs from the reference")
                dur = np.asarray(s["batch_duration_s_per_batch"])
                med[m].append(float(np.median(dur[timed])))
                if x == ROD_CAL_SCALE:
                    at_cal[m] = s
        calibration = rod_calibration(sc, work, at_cal)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    high = max(st.rate.high for st in sc.streams)  # type: ignore[union-attr]
    out: dict[str, Any] = {}
    rows = []
    for m in ROD_METHODS:
        slope, icpt = np.polyfit(ROD_SCALES, med[m], 1)
        x_max = (sc.tick_s - icpt) / slope
        out[m] = {"x_max": x_max, "rate": x_max * high, "model": modelled_burst_load(sc, m)}
        out[m] |= {"slope": slope, "fixed": icpt}
        cells = " | ".join(f"{d:.2f}" for d in med[m])
        rows.append(
            f"| {m} | {cells} | {icpt:.2f} | {slope * 0.1:.2f} | {x_max * high:.0f} | "
            f"{out[m]['model']:.2f} |"
        )
    out["calibration"] = calibration
    out["ratio"] = out["rod"]["rate"] / out["llf"]["rate"]
    out["model_ratio"] = out["llf"]["model"] / out["rod"]["model"]
    return "\n".join(rows), out


def rod_calibration(sc: ScenarioFile, work: Path, runs: dict[str, dict[str, Any]]) -> str:
    """Calibrate on LLF's run at ``ROD_CAL_SCALE``, then predict each method's batches with
    the calibrated simulator running the plan that method ran on Spark (its initial plan,
    held), over the same ticks."""
    from spark_adapter.query import compile_query

    overlay = calibrate(work / f"llf-{ROD_CAL_SCALE}", skip=1)
    cal = apply_overlay(sc, overlay)
    bm = cal.simulator.batch_model
    assert bm is not None
    ctx = spark_context(sc, compile_query(sc), 2, ROD_CAL_SCALE)
    rows = []
    for m in ROD_METHODS:
        a = make_policy(sc, m, ctx=ctx).initial_plan().placement.as_array()
        load = held_plan_load(cal, a, ROD_BATCHES)
        pred = predicted_batches(load, sc.tick_s, bm, skip=1)
        timed = read_batches(work / f"{m}-{ROD_CAL_SCALE}")[1:]
        rows.append(calibration_row(m, runs[m], pred, timed))
    c = overlay.calibration
    head = (
        f"Calibration at scale {ROD_CAL_SCALE:g} (target: predicted batch duration p50 and p99 "
        f"within 20% of Spark's), fitted on LLF's run ({c.batches} batches): "
        f"{c.measured_us_per_row:.0f} us per row (modelled {c.modelled_us_per_row:.0f}; busy-time "
        f"fit r^2 {c.busy_fit_r2:.3f}), {bm.task_overhead_s * 1e3:.0f} ms per task, "
        f"{bm.batch_overhead_s:.2f} s per batch. The calibrated simulator runs the plan each "
        "method ran on Spark over the same ticks (batch 0 left out); a key group's load per "
        "stream follows that stream's keys in both."
    )
    table = (
        "| placement | measured p50 (s) | predicted p50 (s) | ratio | measured p99 (s) | "
        "predicted p99 (s) | ratio | busiest partition, measured (s) | predicted (s) |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
    return head + "\n\n" + table


def rod_section() -> None:
    table, out = bursty_rod()
    scales = " | ".join(f"median burst batch at {x:g} (s)" for x in ROD_SCALES)
    write_section(
        "ROD on Spark",
        f"""
Command: `.venv/bin/python -m bench.bench_policies_spark rod` ({environment()}; pyspark 4.3,
local-cluster[2,1,1024]).

`spark-bursty-rod`: two streams burst to 10x their low rate for two 4 s micro-batches in five,
anti-phased, into one keyed count (8 key groups, 2 partitions), hot on different keys. The
initial placement is the method's (the controller's load model: each key group's share of each
stream's declared keys); it holds through the run. Each method is replayed at each scale
({ROD_BATCHES} batches, one session, a warm-up replay first); a burst batch is one whose tick
has a stream at its burst level (batch 0 left out). Sustained burst rate: the burst stream's
rate (rows/s) at the scale where the least-squares line through the median burst-batch
durations reaches the 4 s tick (a longer batch leaves a backlog that grows through the burst);
fixed: the line's intercept (the batch's fixed costs); per 0.1 of scale: its slope. Modelled:
the busiest partition's cores in the worst burst tick at scale 1, from the controller's model.
Every run's output equals the reference. Target: ROD's sustained burst rate at least 1.2x LLF's.

| placement | {scales} | fixed (s) | s per 0.1 of scale | sustained burst rate (rows/s) | modelled busiest partition (cores) |
|---|---|---|---|---|---|---|---|
{table}

ROD / LLF sustained burst rate: {out["ratio"]:.2f}x (modelled: {out["model_ratio"]:.2f}x).
The placement's own effect is the slopes' ratio, the work a burst puts on the busiest
partition: {out["llf"]["slope"] / out["rod"]["slope"]:.2f}x; the fixed costs' difference
({out["llf"]["fixed"] - out["rod"]["fixed"]:+.2f} s, LLF's less ROD's) adds the rest.

{out["calibration"]}
""",
    )
    print(table)
    print(out)
