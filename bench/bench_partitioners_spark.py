"""Every partitioner routing on Spark by its own rule: max sustained rate, routing, merge volume.

Run: .venv/bin/python -m bench.bench_partitioners_spark
Workload: ``zipf-hotkey-shift``'s stream (Zipf 1.3 over 10,000 keys, 50 key groups) with a
2 s trigger interval, its ranks rotated so that hash puts the two hottest keys in one of the 2
partitions (as in the Spark pipeline bench), a windowed count (10 s tumbling), 200 us per tuple,
``local-cluster[2,1,1024]``. Every partitioner runs at each rate of a grid in one session (the
order rotated per rate); its max sustained rate is where the least-squares line through its
median batch durations reaches the tick. The routing digests of batch 8 of the lowest rate's
runs (same input for every partitioner) are compared.
Part ``het``: ``heterogeneous-spark`` (partitions 1:3): each speed-aware partitioner's max
sustained rate and the speeds it learned against the measured busy-time ratio.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_spark import N, T
from bench.common import cluster_session, environment, tick_crossing, write_section
from controller.scenario import ScenarioFile, load_scenario
from controller.spark_replay import replay_spark
from core.hashing import stable_mod

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("hash", "pkg", "dchoices", "wchoices", "dalton", "prompt", "cg")
WARMUP = 6  # 10 s windows close every 5 batches; the first full one by batch 5
BATCHES = WARMUP + 6
DIGEST_BATCH = 8
ZIPF_RATES = (3000.0, 5000.0, 7000.0)  # tuples/s: every partitioner's tick is crossed inside
# the zipf part places key group g on partition g mod 2 (plain hash routing, held): the bench's
# premise, the two hottest keys on one partition, is then the workload's, not the placement's
ZIPF_PLACEMENT = "hash"


def workload() -> tuple[ScenarioFile, int]:
    """zipf-hotkey-shift at a 2 s tick, its two hottest keys colliding under hash."""
    sc = load_scenario(ROOT / "scenarios" / "zipf-hotkey-shift.yaml")
    g = sc.operators[-1].key_groups
    space = sc.streams[0].keys.space
    rot = next(
        r
        for r in range(space)
        if stable_mod([r % space], g)[0] % N == stable_mod([(r + 1) % space], g)[0] % N
    )
    doc = sc.model_dump()
    doc["tick_s"] = T
    doc["streams"][0]["keys"]["shifts"] = [{"at_s": 0, "rotate": rot}]
    doc["streams"][0]["rate"] = {"kind": "constant", "rate": 1000}
    doc["controller"]["window_k"] = 3
    return ScenarioFile.model_validate(doc), rot


def run(
    spark: Any,
    sc: ScenarioFile,
    rate: float,
    part: str,
    work: Path,
    batches: int = BATCHES,
    warmup: int = WARMUP,
    placement: str = "least-loaded",
) -> dict[str, Any]:
    """One replay at ``rate`` tuples/s (``warmup`` batches untimed) with the key groups placed
    by ``placement``; its summary with the controller's decisions. Raises when the output
    differs from the reference."""
    res = replay_spark(
        sc,
        batches=batches,
        placement=placement,
        partitioner=part,
        partitions=N,
        scale=rate / 1000.0,
        interval_batches=1,
        workdir=work,
        spark=spark,
        warmup_batches=warmup,
    )
    s = res.summary
    if not s["output_matches_reference"]:
        raise RuntimeError(f"{part}: output differs from the reference at rate {rate}")
    s["decisions"] = res.decisions
    return s


def zipf_runs(spark: Any, sc: ScenarioFile, work: Path) -> list[dict[str, Any]]:
    """Every partitioner at every rate of ``ZIPF_RATES`` (the order rotated at each rate, the
    JVM's garbage collected between runs, so that no partitioner always runs first or after
    the same one); per partitioner, its max sustained rate: where the least-squares line
    through its median batch durations reaches the tick."""
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in NAMES}
    for i, rate in enumerate(ZIPF_RATES):
        k = (3 * i) % len(NAMES)
        for part in NAMES[k:] + NAMES[:k]:
            spark.sparkContext._jvm.System.gc()  # the last run's shuffle files cleaned now
            time.sleep(2.0)
            runs[part].append(
                run(spark, sc, rate, part, work / f"{part}-{rate:.0f}", placement=ZIPF_PLACEMENT)
            )
    rows = []
    for part in NAMES:
        med = [s["batch_duration_p50"] for s in runs[part]]
        max_rate, icpt, slope = tick_crossing(ZIPF_RATES, med, T)
        top, low = runs[part][-1], runs[part][0]
        per = {b["batch"]: b for b in low["routing_per_batch"]}
        rows.append(
            {
                "partitioner": part,
                "med": med,
                "fixed": icpt,
                "slope": slope * 1000.0,
                "max_rate": max_rate,
                "digest": per.get(DIGEST_BATCH, {}).get("routing_digest", "-"),
                "split_keys": float(np.mean([b["split_keys"] for b in top["routing_per_batch"]])),
                "moved_whole": float(
                    np.mean([b["keys_moved_whole"] for b in top["routing_per_batch"]])
                ),
                "fragmentation": float(
                    np.mean([b["fragmentation"] for b in top["routing_per_batch"]])
                ),
                "partials": top["partials_merged_per_batch"],
                "rows": top["partition_rows"],
            }
        )
    return rows


# NAME-blind: the key groups placed with measured_speeds off, so that only the partitioner's own
# routing knows the speeds (each partitioner as itself); the others: as shipped
HET_PARTS = ("hash-blind", "hash", "pkg", "cg", "ecapa", "pkg-blind", "cg-blind", "ecapa-blind")
HET_SCALES = (2.0, 4.0, 6.0)  # x 1,000 tuples/s: the tick is crossed inside this range
HET_BATCHES, HET_WARMUP = 14, 3


def heterogeneous() -> tuple[list[dict[str, Any]], dict[str, float]]:
    """heterogeneous-spark: each speed-aware partitioner's max sustained rate (the rate where
    the line through its median batch durations at ``HET_SCALES`` reaches the tick), its
    routing's rows and busy time per partition, and the speeds it learned."""

    sc = load_scenario(ROOT / "scenarios" / "heterogeneous-spark.yaml")
    spark = cluster_session("trimtab-bench-het", N)
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-het-"))
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in HET_PARTS}
    try:
        het_run(spark, sc, "hash", 0.5, work / "warm")  # JVM and Python workers warm
        for i, x in enumerate(HET_SCALES):
            for part in HET_PARTS[i:] + HET_PARTS[:i]:  # the order rotated: no method always first
                spark.sparkContext._jvm.System.gc()  # the last run's shuffle files cleaned now
                time.sleep(2.0)
                runs[part].append(het_run(spark, sc, part, x, work / f"{part}-{x}"))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for part in HET_PARTS:
        med = [r["p50"] for r in runs[part]]
        slope, icpt = np.polyfit(HET_SCALES, med, 1)
        top = runs[part][-1]
        rows.append(
            {"partitioner": part, "med": med, "slope": slope, "fixed": icpt}
            | {"rate": (sc.tick_s - icpt) / slope * 1000.0}
            | {k: top[k] for k in ("rows", "busy_per_row_us", "busiest_s", "ideal_s", "learned")}
        )
    by = {r["partitioner"]: r for r in rows}
    pairs = [("hash", "hash-blind")] + [(p, q) for p in ("cg", "ecapa") for q in ("hash", "pkg")]
    pairs += [(f"{p}-blind", f"{q}-blind") for p in ("cg", "ecapa") for q in ("hash", "pkg")]
    ratios = {
        f"{p}/{q}": (by[p]["rate"] / by[q]["rate"], by[q]["busiest_s"] / by[p]["busiest_s"])
        for p, q in pairs
    }
    # what a perfect routing could gain over p: its busiest partition against every row where
    # it costs least, all partitions finishing together (at the top rate)
    for p in ("hash", "pkg", "hash-blind", "pkg-blind"):
        ratios[f"ideal/{p}"] = (float("nan"), by[p]["busiest_s"] / by[p]["ideal_s"])
    return rows, ratios


def het_run(spark: Any, sc: ScenarioFile, part: str, scale: float, work: Path) -> dict[str, Any]:
    """One replay of heterogeneous-spark: median timed batch, rows and busy time per
    partition, the speeds the partitioner learned last. ``NAME-blind`` is NAME with
    ``placement.measured_speeds`` off (the key groups stay where the nominal capacities put
    them)."""
    if part.endswith("-blind"):
        doc = sc.model_dump()
        doc["controller"]["placement"]["measured_speeds"] = False
        sc, part = ScenarioFile.model_validate(doc), part.removesuffix("-blind")
    s = run(spark, sc, scale * 1000.0, part, work, HET_BATCHES, HET_WARMUP)
    speeds = [d.details.get("routing", {}).get("speeds") for d in s["decisions"]]
    busy = np.array(s["partition_busy_s"]) / np.maximum(np.array(s["partition_rows"]), 1)
    return {
        "p50": s["batch_duration_p50"],
        "rows": s["partition_rows"],
        "busy_per_row_us": [round(float(x) * 1e6) for x in busy],
        # per timed batch: the warm-up's batches ran before the placement knew the speeds
        "busiest_s": float(np.max(s["partition_busy_per_batch_s"])),
        # every row where it costs least per busy second, all partitions finishing together
        "ideal_s": float(
            np.sum(np.asarray(s["partition_busy_per_batch_s"]) / busy) / np.sum(1.0 / busy)
        ),
        "learned": speeds[-1] if speeds else None,
    }


def _outside(rate: float) -> str:
    """'*' for a max sustained rate extrapolated beyond the rates measured."""
    return "" if min(HET_SCALES) * 1000 <= rate <= max(HET_SCALES) * 1000 else "*"


def het_section() -> None:
    rows, ratios = heterogeneous()
    cells = " | ".join(f"median batch at {x * 1000:.0f}/s (s)" for x in HET_SCALES)
    table = "\n".join(
        f"| {r['partitioner']} | {' | '.join(f'{d:.2f}' for d in r['med'])} | {r['fixed']:.2f} | "
        f"{r['slope']:.2f} | {r['rate']:.0f}{_outside(r['rate'])} | {r['rows']} | {r['busy_per_row_us']} | "
        f"{r['busiest_s']:.2f} | "
        f"{r['learned']} |"
        for r in rows
    )
    learned = []
    for r in rows:
        b = r["busy_per_row_us"]
        if r["learned"] and min(b) > 0:
            measured = max(b) / min(b)
            got = max(r["learned"]) / min(r["learned"])
            learned.append(f"{r['partitioner']} {got:.2f} against {measured:.2f}")
    body = f"""
Command: `.venv/bin/python -m bench.bench_partitioners_spark het` ({environment()}; pyspark 4.3,
local-cluster[2,1,1024]).

`heterogeneous-spark`: a windowed count over Zipf(1.1) keys (20,000 keys, 8 key groups, 200 us
per tuple, 2 s trigger), `spark.partition_speeds: [1, 3]` (partition 0's task spends 3x the
operators' CPU, on whichever executor runs it), least-loaded placement of the key groups: it
re-places them once by the partitions' measured speeds (`placement.measured_speeds`, on by
default); `NAME-blind` is the same partitioner with that off, so its key groups stay where
equal capacities put them and only the partitioner's own routing of the hot keys knows the
speeds (each partitioner as itself). The partitioner routes the hot keys; the cold keys follow
the key groups.
{HET_BATCHES} batches per run, the median of the last {HET_BATCHES - HET_WARMUP} timed; one
session, a warm-up replay first, the partitioners' order rotated at each rate. Max sustained rate: where the least-squares line through the
median batch durations reaches the 2 s tick (marked * where that lies outside the rates
measured); fixed: its intercept; per 1000/s: its slope. Rows,
busy time per row, the busiest partition's busy seconds per timed batch (the mean; the
warm-up's batches ran before the placement knew the speeds) and learned
speeds (mean 1) are from the run at
{HET_SCALES[-1] * 1000:.0f}/s. Every run's output equals the reference.

| partitioner | {cells} | fixed (s) | s per 1000/s | max sustained rate (tuples/s) | rows per partition | busy us per row, per partition | busiest partition's busy s per batch | speeds learned |
|---|---|---|---|---|---|---|---|---|---|---|
{table}

Max sustained rate ratios (and the busiest partition's busy time, inverted: the routing's own
effect, without the fitted fixed costs; hash/hash-blind is the placement's own effect; the
-blind pairs are the partitioners' own effect, placement blind to the speeds in both): {", ".join(f"{k} {v[0]:.3f}x ({v[1]:.2f}x)" for k, v in ratios.items() if not k.startswith("ideal"))}.
The most a perfect routing could gain on the busiest partition's busy time (every row where it
costs least, the partitions finishing together, at {HET_SCALES[-1] * 1000:.0f}/s): {", ".join(f"{k} {v[1]:.2f}x" for k, v in ratios.items() if k.startswith("ideal"))}
(targets: CG and E-CAPA at least 1.3x hash and 1.15x PKG in max sustained rate). Learned speed ratio against the measured busy-time ratio:
{"; ".join(learned)} (target: E-CAPA within 25%).
"""
    write_section("Partitioners on Spark: heterogeneous nodes", body)
    print(body)


def main() -> None:
    """Every part, or those named: ``zipf`` (every partitioner), ``het`` (heterogeneous)."""
    known = ("zipf", "het")
    parts = sys.argv[1:] or list(known)
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise SystemExit(
            f"bench_partitioners_spark: unknown part {unknown[0]!r} ({', '.join(known)})"
        )
    if "zipf" in parts:
        zipf_section()
    if "het" in parts:
        het_section()


def zipf_section() -> None:

    sc, rot = workload()
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-parts-"))
    spark = cluster_session("trimtab-bench-parts", N)
    try:
        run(spark, sc, 200, "hash", work / "warm", placement=ZIPF_PLACEMENT)
        rows = zipf_runs(spark, sc, work)
    finally:
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    by = {r["partitioner"]: r for r in rows}
    h = by["hash"]["max_rate"]
    cells = " | ".join(f"median batch at {x:.0f}/s (s)" for x in ZIPF_RATES)
    table = "\n".join(
        f"| {r['partitioner']} | {' | '.join(f'{d:.2f}' for d in r['med'])} | {r['fixed']:.2f} | "
        f"{r['slope']:.3f} | {r['max_rate']:.0f} | {r['max_rate'] / h:.2f} | {r['split_keys']:.1f} | "
        f"{r['moved_whole']:.1f} | {r['fragmentation']:.2f} | {r['partials']:.0f} | {r['digest']} | {r['rows']} |"
        for r in rows
    )
    distinct = len({r["digest"] for r in rows})
    hr = np.asarray(by["hash"]["rows"], float)
    skew = float(hr.max() / max(hr.mean(), 1.0))
    premise = (
        "the two hottest keys did not share a partition, so a split only adds merges to a "
        "balanced load"
        if skew < 1.1
        else "the two hottest keys shared a partition. No routing puts fewer rows than the mean "
        f"on the busiest partition, so {skew:.2f}x is the most any partitioner can gain on the "
        "busiest partition's work, before its merges and the batch's fixed costs"
    )
    verdicts = [
        f"{p} {by[p]['max_rate'] / h:.2f}x ({'met' if by[p]['max_rate'] >= 1.35 * h else 'not met'})"
        for p in ("dchoices", "wchoices", "dalton", "prompt")
    ]
    merges = by["dalton"]["partials"] <= by["wchoices"]["partials"]
    body = f"""
Command: `.venv/bin/python -m bench.bench_partitioners_spark zipf` ({environment()}; pyspark 4.3, local-cluster[2,1,1024]).

`zipf-hotkey-shift`'s stream at a {T:.0f} s trigger interval (Zipf 1.3 over 10,000 keys, 50 key
groups, ranks rotated by {rot} so that the two hottest keys' key groups are equal mod 2), count
over 10 s tumbling windows, 200 us per tuple, 2 partitions, the key groups placed by hash
(group g on partition g mod 2, held through the run). Each partitioner routes on Spark by its own rule (a live instance on the driver, fed
each batch's keys): its split keys get quotas, and its hot keys kept whole go where it put them
(cold keys follow the key-group table). Every partitioner runs at each of {", ".join(f"{x:.0f}" for x in ZIPF_RATES)} tuples/s in
one session, the order rotated at each rate; {BATCHES} batches per run, the median of the last
{BATCHES - WARMUP} timed. Max sustained rate: where the least-squares line through a partitioner's median
batch durations reaches the {T:.0f} s tick; fixed: its intercept; per 1000/s: its slope. Split keys,
fragmentation, partials and rows: the {ZIPF_RATES[-1]:.0f}/s run. Routing digest: batch {DIGEST_BATCH} of the
{ZIPF_RATES[0]:.0f} tuples/s run (the same input for every partitioner): {distinct} distinct routings among
{len(rows)} partitioners. Every run's output equalled the reference. Hash's busiest partition held
{skew:.2f}x the mean rows: {premise}.

| partitioner | {cells} | fixed (s) | s per 1000/s | max sustained rate (tuples/s) | vs hash | split keys per batch | hot keys moved whole per batch | partitions per split key | partials merged per batch | routing digest | partition rows |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
{table}

Against the targets (at least 1.35x hash): {", ".join(verdicts)}; Dalton's partials merged per
batch {by["dalton"]["partials"]:.0f} against W-Choices' {by["wchoices"]["partials"]:.0f} ({"met" if merges else "not met"}).
"""
    write_section("Partitioners on Spark", body)
    print(body)


if __name__ == "__main__":
    main()
