"""LP shedding after a split on Spark: ``scenarios/spark-split-shed.yaml`` replayed with the
controller in the loop, with no shedding (its timed batches calibrate the controller's costs),
then uniform and LP ``SPLIT_REPEATS`` times each, the order alternating. Part of
``bench.bench_policies_spark`` (``split``).

Weighted output: the rows that reached the keyed count over the timed batches, summed over
the path streams (every such row is worth 1), from the pipeline's batch statistics; keep: the
fraction each location kept, averaged over the timed batches, from the keeps each batch
pinned. Every run's output is checked against the reference with its drops.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, cluster_session, environment, write_section
from controller.calibration import calibrate
from controller.scenario import load_scenario
from controller.spark_replay import replay_spark

__all__ = ["split_section"]

SPLIT_MASTER = "local-cluster[2,1,1024]"
SPLIT_SCALE = 0.1
SPLIT_BATCHES = 18
SPLIT_WARMUP = 6  # the controller's window (4 samples) fills and its first plans settle
SPLIT_REPEATS = 2


def _runs() -> list[tuple[str, str]]:
    """(label, method): none first (it is calibrated), then uniform and LP alternating."""
    runs = [("none", "none")]
    for r in range(SPLIT_REPEATS):
        pair = [("uniform", "uniform"), ("lp", "lp")]
        runs += [(f"{m} #{r + 1}", meth) for m, meth in (pair if r % 2 == 0 else pair[::-1])]
    return runs


def _measure(work: Path, summary: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """A run's timed batches: durations, rows per path stream, mean keep per location."""
    from spark_adapter.batchstats import read_batch_stats

    stats = [read_batch_stats(f) for f in sorted((work / "metrics").glob("batch-*.json"))]
    timed = [b for b in stats if SPLIT_WARMUP <= b.batch_id < SPLIT_BATCHES]
    dur = np.array([b.duration_s for b in timed])
    rows = {p: sum(b.stream_rows.get(p, 0) for b in timed) for p in paths}
    keep = {p: float(np.mean([b.info["stream_keep"].get(p, 1.0) for b in timed])) for p in paths}
    return {
        "p50": float(np.percentile(dur, 50)),
        "p99": float(np.percentile(dur, 99)),
        "rows": rows,
        "output": sum(rows.values()),
        "keep": keep,
        "ok": bool(summary["output_matches_reference"]),
    }


def split_shed() -> tuple[dict[str, dict[str, Any]], dict[str, float], list[str]]:
    """Each run's measures by label, the calibration's figures and the path streams."""
    from spark_adapter.query import compile_query

    sc = load_scenario(ROOT / "scenarios" / "spark-split-shed.yaml")
    paths = list(compile_query(sc).sides)
    spark = cluster_session("trimtab-bench-split", master=SPLIT_MASTER)
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-split-"))
    out: dict[str, dict[str, Any]] = {}
    cal: dict[str, float] = {}
    try:
        replay_spark(sc, batches=3, shedding="none", scale=0.02, spark=spark, workdir=work / "w")
        overlay = None
        for label, method in _runs():
            res = replay_spark(
                sc,
                SPLIT_MASTER,
                batches=SPLIT_BATCHES,
                shedding=method,
                scale=SPLIT_SCALE,
                interval_batches=1,
                spark=spark,
                workdir=work / label,
                calibration=overlay,
            )
            out[label] = _measure(work / label, res.summary, paths)
            if method == "none":
                overlay = calibrate(work / label, sc, skip=SPLIT_WARMUP)
                cal = {
                    "us_per_row": overlay.calibration.measured_us_per_row,
                    "modelled": overlay.calibration.modelled_us_per_row,
                    "batch_s": overlay.simulator.batch_model.batch_overhead_s,
                    "plan_s": overlay.simulator.batch_model.planning_overhead_s or 0.0,
                }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out, cal, paths


def simulated() -> dict[str, float]:
    """The simulator's weighted output (the scenario's own network: drops at the inputs and
    after the split) per shedding method, in the same controller loop."""
    from controller.replay import replay_sim

    sc = load_scenario(ROOT / "scenarios" / "spark-split-shed.yaml")
    return {
        m: float(replay_sim(sc, shedding=m).summary["weighted_throughput"])
        for m in ("none", "uniform", "lp")
    }


def _table(out: dict[str, dict[str, Any]], paths: list[str], tick: float) -> str:
    rows = []
    for label, _ in _runs():
        r = out[label]
        keeps = " | ".join(f"{r['keep'][p]:.2f}" for p in paths)
        per_path = " | ".join(str(r["rows"][p]) for p in paths)
        rows.append(
            f"| {label} | {keeps} | {per_path} | {r['output']} | {r['p50']:.2f} | "
            f"{r['p99']:.2f} | {r['p99'] / tick:.2f} | {r['ok']} |"
        )
    return "\n".join(rows)


def against_targets(out: dict[str, dict[str, Any]], tick: float) -> str:
    """Per round: LP's weighted output against uniform's, and whether LP's batches keep up."""
    lines = []
    for r in range(1, SPLIT_REPEATS + 1):
        lp, uni = out[f"lp #{r}"], out[f"uniform #{r}"]
        ratio = lp["output"] / max(uni["output"], 1)
        lines.append(
            f"run {r}: LP's weighted output {ratio:.2f}x uniform's "
            f"({'met' if ratio >= 1 else 'not met'}); LP's batch p99 {lp['p99'] / tick:.2f} "
            f"ticks, uniform's {uni['p99'] / tick:.2f}, none's {out['none']['p99'] / tick:.2f}"
        )
    return "\n".join(f"- {x}" for x in lines)


def split_section() -> None:
    tick = load_scenario(ROOT / "scenarios" / "spark-split-shed.yaml").tick_s
    out, cal, paths = split_shed()
    sim = simulated()
    head_keep = " | ".join(f"keep {p}" for p in paths)
    head_rows = " | ".join(f"rows {p}" for p in paths)
    sep = "|---" * (2 * len(paths) + 6) + "|"
    table = _table(out, paths, tick)
    write_section(
        "Shedding after a split on Spark",
        f"""
Command: `.venv/bin/python -m bench.bench_policies_spark split` ({environment()}; pyspark 4.3).

`spark-split-shed` replayed on {SPLIT_MASTER} at scale {SPLIT_SCALE:g} ({SPLIT_BATCHES} batches
of {tick:.0f} s, the controller in the loop every batch, the first {SPLIT_WARMUP} not timed):
stream s is parsed once and split into an enriched branch (3 ms a row) and a direct one (0.1 ms),
stream t passes a 2 ms UDF, and all three paths feed one keyed count (1 ms a row), at about
twice what the 2 partitions hold. On Spark a split stream's rows are copied once per branch
(a path stream each, named by its split arc), each path's operators are charged where its
rows fold, and the controller's LP has a drop location per path: after the split for the
branches, at the input for t. `none` runs first and is calibrated (`trimtab calibrate`:
{cal["us_per_row"]:.0f} us per row against {cal["modelled"]:.0f} modelled, {cal["batch_s"]:.2f} s
fixed per batch, {cal["plan_s"]:.2f} s at the 90th percentile, which capacity is planned with);
`uniform` and `lp` are steered with it, {SPLIT_REPEATS} times each, the order
alternating. Keep: the mean over the timed batches of what each location kept. Rows: the rows
each path brought to the count over the timed batches (the pipeline's statistics); weighted
output: their sum (every row reaching the count is worth 1). Batch p99 / tick: at most 1 keeps
up with the input. Drops are deterministic: runs of one method that pinned the same keeps
bring the same rows, and differ only in time.

| shedding | {head_keep} | {head_rows} | weighted output | batch p50 (s) | batch p99 (s) | p99 / tick | output = reference |
{sep}
{table}

Against the target (LP's weighted output at least uniform's):
{against_targets(out, tick)}

The simulator, on the same scenario and loop (its own network: drop locations at s, t and
after the split, `parse->enrich` and `parse->direct`): weighted output per second none
{sim["none"]:.0f}, uniform {sim["uniform"]:.0f}, LP {sim["lp"]:.0f} (LP {sim["lp"] / sim["uniform"]:.2f}x
uniform's).
""",
    )
    print(table)
