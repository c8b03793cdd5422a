"""Maximum sustained input rate on Spark, per routing, against the perfect-balance bound.

Run: .venv/bin/python -m bench.bench_spark
Workload: one stream, Zipf(1.3) over 100,000 keys whose two hottest keys hash to the same
partition, a windowed count (20 s windows sliding by 2 s) with 200 us of CPU per tuple, ``local-cluster[2,1,1024]``
(2 executors x 1 core), 2 partitions, a 2 s trigger interval: each micro-batch holds 2 s of
input. A rate is *sustained* when the median batch duration (foreachBatch wall time) in steady
state is at most the trigger interval: the first 11 batches, until the first full window
closes and the state stops growing, are run but not timed; the next 4 are. For each routing the
duration is fitted as ``o + a * rate`` from two probe rates, the estimate is checked, and the
highest checked rate that was sustained is reported. The perfect-balance bound is
``n * (T - o_min) / (T * c)``: all capacity left after the smallest fixed per-batch time
``o_min`` (batch duration minus the busiest partition's work, over the routings), spread
perfectly over the measured partition time per row ``c``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import cluster_session, environment, write_section
from controller.scenario import ScenarioFile
from controller.spark_replay import replay_spark
from core.hashing import stable_mod

T = 2.0
COST_US = 200.0
N = 2
G = 8
KEYS = 100_000
WINDOW = {"size_s": 20, "slide_s": 2}  # sliding: every pane feeds 10 windows
MERGE_COSTS_US = (25.0, 50.0, 100.0)  # per partial merged across partitions
WARMUP = 11  # batches before the first full window closes (10 panes, watermark one batch behind)
BATCHES = WARMUP + 4  # timed: 4 batches in steady state (full windows, state no longer growing)


def collide_rotation() -> int:
    """A rotation of the key ranks that puts the two hottest keys in the same hash partition."""
    for r in range(KEYS):
        a, b = r % KEYS, (r + 1) % KEYS
        if stable_mod([a], G)[0] % N == stable_mod([b], G)[0] % N:
            return r
    raise RuntimeError("no colliding rotation")


def scenario(rot: int, merge_cost_us: float = 0.0) -> ScenarioFile:
    return ScenarioFile.model_validate(
        {
            "name": "bench-skewed-groupby",
            "seed": 11,
            "duration_s": 400,
            "tick_s": T,
            "cluster": {"nodes": [{"id": "n0"}, {"id": "n1"}]},
            "streams": [
                {
                    "id": "s",
                    "rate": {"kind": "constant", "rate": 1000},
                    "keys": {
                        "space": KEYS,
                        "distribution": "zipf",
                        "s": 1.3,
                        "shifts": [{"at_s": 0, "rotate": rot}] if rot else [],
                    },
                }
            ],
            "operators": [
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["s"],
                    "cost_us": COST_US,
                    "key_groups": G,
                    "window": WINDOW,
                    "merge_cost_us": merge_cost_us,
                    "params": {"agg": "count"},
                }
            ],
            "controller": {"window_k": 3, "placement": {"method": "least-loaded"}},
        }
    )


def median_duration(
    spark: Any, sc: ScenarioFile, rate: float, placement: str, partitioner: str, work: Path
) -> tuple[float, dict[str, Any]]:
    res = replay_spark(
        sc,
        batches=BATCHES,
        placement=placement,
        partitioner=partitioner,
        partitions=N,
        scale=rate / 1000.0,
        interval_batches=1,
        workdir=work,
        spark=spark,
        warmup_batches=WARMUP,
    )
    s = res.summary
    ok = s["output_matches_reference"]
    if not ok:
        raise RuntimeError(f"{partitioner}: output differs from the reference at rate {rate}")
    return s["batch_duration_p50"], s


def max_rate(
    spark: Any, sc: ScenarioFile, placement: str, partitioner: str, work: Path
) -> dict[str, Any]:
    r1, r2 = 1000.0, 3000.0
    d1, _ = median_duration(spark, sc, r1, placement, partitioner, work / "a")
    d2, s2 = median_duration(spark, sc, r2, placement, partitioner, work / "b")
    slope = max((d2 - d1) / (r2 - r1), 1e-9)
    est = r1 + (T - d1) / slope
    best, best_s, tried = 0.0, s2, []
    rate = est
    for i in range(8):  # up 6% after a sustained rate, down 8% after one that was not
        d, s = median_duration(spark, sc, rate, placement, partitioner, work / f"c{i}")
        tried.append((round(rate), round(d, 3)))
        if d <= T:
            best, best_s = max(best, rate), s
            rate *= 1.06
        else:
            rate *= 0.92
        if best > 0 and d > T:
            break  # bracketed: the last sustained rate and one above it
    return {
        "routing": partitioner,
        "placement": placement,
        "max_rate": best,
        "slope_s_per_rate": slope,
        "overhead_s": d1 - slope * r1,
        "tried": tried,
        "partition_rows": best_s["partition_rows"],
        "partition_busy_s": best_s["partition_busy_s"],
        "phases": best_s.get("batch_phases_mean_s", {}),
        "busy_s_per_row": best_s["busy_s_per_row"],
        "fixed_s": best_s["batch_duration_p50"] - max(best_s["partition_busy_per_batch_s"]),
        "partials_per_batch": best_s["partials_merged_per_batch"],
    }


def python_merge_us() -> float:
    """Microseconds per group of a Python-level merge (pandas ``groupby.apply``) here: what a
    user-defined aggregate's merge of one key's partials costs, for scale."""
    import time

    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"key": rng.integers(0, 10_000, 20_000), "cnt": 1.0, "sum": rng.random(20_000)}
    )
    g = df.groupby("key")
    t0 = time.perf_counter()
    g.apply(lambda x: x["sum"].sum() / x["cnt"].sum(), include_groups=False)
    return (time.perf_counter() - t0) / g.ngroups * 1e6


def main() -> None:

    rot = collide_rotation()
    sc = scenario(rot)
    spark = cluster_session("trimtab-bench", N)
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-"))
    try:
        median_duration(spark, sc, 200, "hash", "hash", work / "warm")  # executors' Python workers
        rows = [
            max_rate(spark, sc, pl, part, work / part)
            for pl, part in (
                ("hash", "hash"),
                ("least-loaded", "wchoices"),
                ("least-loaded", "dchoices"),
                ("hash", "shuffle"),
            )
        ]
        # round-robin + merge against trimtab as merging a partial gets dearer: only
        # round-robin merges every key's partials; trimtab merges its split hot keys' only
        sweep = [
            (
                m,
                max_rate(spark, scenario(rot, m), "hash", "shuffle", work / f"shuffle-m{m:.0f}"),
                max_rate(
                    spark, scenario(rot, m), "least-loaded", "dchoices", work / f"dchoices-m{m:.0f}"
                ),
            )
            for m in MERGE_COSTS_US
        ]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    # perfect balance: every routing's per-batch time that is not the busiest partition's work
    # (planning, shuffles, output, commit) is fixed; the smallest of those, and the measured
    # busy seconds per row (operator cost plus the keyed stage's own work), give the rate at
    # which both partitions would be exactly full: n * (T - o_min) / (T * c)
    o_min = min(r["fixed_s"] for r in rows)
    c = float(np.median([r["busy_s_per_row"] for r in rows]))
    bound = N * (T - o_min) / (T * c)
    by = {r["routing"]: r for r in rows}
    best = max(by["wchoices"]["max_rate"], by["dchoices"]["max_rate"])
    table = "\n".join(
        f"| {r['routing']} | {r['max_rate']:.0f} | {r['max_rate'] / bound:.2f} | {r['max_rate'] / max(by['hash']['max_rate'], 1):.2f} | "
        f"{r['max_rate'] / max(by['shuffle']['max_rate'], 1):.2f} | {r['partition_rows']} | {r['partition_busy_s']} | {r['tried']} |"
        for r in rows
    )
    phases = "\n".join(
        f"| {r['routing']} | "
        + " | ".join(
            f"{r['phases'].get(k, 0.0):.3f}" for k in ("plan", "fold", "stats", "output", "commit")
        )
        + " |"
        for r in rows
    )
    py_us = python_merge_us()
    pairs = [(0.0, by["shuffle"], by["dchoices"]), *sweep]
    merge_rows = "\n".join(
        f"| {m:.0f} | {rr['partials_per_batch']:.0f} | {tt['partials_per_batch']:.0f} | "
        f"{rr['max_rate']:.0f} | {tt['max_rate']:.0f} | {tt['max_rate'] / max(rr['max_rate'], 1):.2f} | "
        f"{rr['phases'].get('output', 0.0):.3f} | {tt['phases'].get('output', 0.0):.3f} |"
        for m, rr, tt in pairs
    )
    body = f"""
Command: `.venv/bin/python -m bench.bench_spark` ({environment()}; pyspark 4.3, local-cluster[2,1,1024]).

Zipf(1.3) over {KEYS} keys, ranks rotated by {rot} so that hash puts the two hottest keys in one
partition; count over 20 s windows sliding by 2 s; {COST_US:.0f} us per tuple; 2 partitions; trigger interval {T:.0f} s.
Each run has {BATCHES} batches; the median of the last {BATCHES - WARMUP} is timed (steady state: the first
{WARMUP} fill the windows, so every timed batch closes one full 20 s window).
Perfect-balance bound: the smallest fixed per-batch time at the highest sustained rate (batch
duration minus the busiest partition's work) is {o_min:.2f} s and a row costs {c * 1e6:.0f} us of
partition time (200 us of operator work plus the keyed stage), so both partitions are exactly
full at {bound:.0f} tuples/s. Targets: trimtab ≥ 0.85x the bound, ≥ 1.25x hash, ≥ 1.1x round-robin + merge.
Every run's output equalled the reference.

| routing | max sustained rate (tuples/s) | vs bound | vs hash | vs shuffle | partition rows (last sustained run) | partition busy s | (rate, median batch s) tried |
|---|---|---|---|---|---|---|---|
{table}

Mean seconds per batch phase at the highest sustained rate (fold = route + keyed stage; output =
final values, including round-robin's merge shuffle; stats = statistics and split-key partials
to the driver):

| routing | plan | fold | stats | output | commit |
|---|---|---|---|---|---|
{phases}

trimtab (best hot-key routing) reaches {best / bound:.2f}x the bound, {best / max(by["hash"]["max_rate"], 1):.2f}x hash and
{best / max(by["shuffle"]["max_rate"], 1):.2f}x round-robin + merge with the count's vectorised merge (free per partial).

Round-robin + merge as merging a partial gets dearer (`merge_cost_us` of the aggregate, CPU
per partial merged across partitions; the same workload otherwise). Round-robin merges every
key's partials on the cluster (a second shuffle); trimtab (D-Choices) merges only its split hot
keys' partials, on the driver. For scale: a Python-level merge (pandas `groupby.apply`, one
call per key) costs {py_us:.0f} us per key on this machine.

| merge cost per partial (us) | partials merged per batch, round-robin | same, trimtab | round-robin max rate | trimtab max rate | trimtab / round-robin | output phase s, round-robin | same, trimtab |
|---|---|---|---|---|---|---|---|
{merge_rows}
"""
    write_section("Spark pipeline: maximum sustained input rate", body)
    print(body)


if __name__ == "__main__":
    main()
