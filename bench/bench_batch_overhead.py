"""A micro-batch's fixed cost on Spark: output written by the collect job against the Spark writer.

Run: .venv/bin/python -m bench.bench_batch_overhead
Workload: ``zipf-hotkey-shift`` (Zipf 1.3 over 10,000 keys, 50 key groups, 200 us per tuple,
a windowed count) at 0.5x its rate on ``local-cluster[2,1,1024]``, 2 partitions, the key
groups alternating and the hottest key split 50/50, so both the partitions' files and the
driver's split-key file are written. Each batch's output is written either by the job that
collects its statistics (``collect_and_write``, the pipeline's path) or, the baseline in the
same session, by the two jobs the pipeline ran before it: ``collect``, then the Spark
Parquet writer (``write_output``), which round-robin routing still uses. The variants
alternate, 3 runs each; the median over the runs' batches 2 onward of the collect-and-write
phase and of the whole batch, and the output checked against the reference in every run.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame

from bench.common import cluster_session, environment, write_section
from controller.scenario import load_scenario
from controller.testing import assert_matches_reference, key_group_plan
from spark_adapter import batch_executor as steps
from spark_adapter.batch_compiler import BatchSpec
from spark_adapter.pipeline import PipelineOptions, SparkPipeline
from spark_adapter.query import compile_query
from spark_adapter.source import INPUT_SCHEMA_DDL

ROOT = Path(__file__).resolve().parents[1]
SEGMENTS, RUNS, SCALE = 12, 3, 0.5


class TwoJobPipeline(SparkPipeline):
    """The baseline: statistics collected, then the output written by the Spark writer."""

    def _write(
        self, res: DataFrame, spec: BatchSpec, refold: bool = False
    ) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
        stats, split = steps.collect(res, spec)
        path = self.output_dir / f"batch={spec.batch_id}"
        return stats, split, steps.write_output(res, split, path, spec, spec.query), 0


def run(spark: Any, variant: str, work: Path) -> dict[str, list[float]]:
    """One run of ``SEGMENTS`` batches; the batches' output phase and duration (s)."""
    sc = load_scenario(ROOT / "scenarios" / "zipf-hotkey-shift.yaml")
    q = compile_query(sc)
    cls = TwoJobPipeline if variant == "spark writer" else SparkPipeline
    pipe = cls(spark, q, work, PipelineOptions(2))
    pipe.input.generate(sc, SEGMENTS, scale=SCALE)
    hot = {0: ((0, 0.5), (1, 0.5))}
    pipe.plans.publish(key_group_plan(q, [i % 2 for i in range(q.key_groups)], hot=hot))
    out: dict[str, list[float]] = {"output": [], "batch": []}
    for b in range(SEGMENTS):
        df = spark.read.schema(INPUT_SCHEMA_DDL).parquet(str(pipe.input.path(b)))
        st = pipe.process(df, b)
        if b >= 2:
            out["output"].append(st.info["phases"]["output"])
            out["batch"].append(st.duration_s)
    pipe.flush()
    assert_matches_reference(pipe.output(), pipe.reference()[0])
    pipe.cleanup()
    return out


def main() -> None:

    spark = cluster_session("trimtab-bench-overhead")
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-overhead-"))
    variants = ("collect job", "spark writer")
    got: dict[str, dict[str, list[float]]] = {v: {"output": [], "batch": []} for v in variants}
    try:
        run(spark, "collect job", work / "warm")  # JVM and Python workers warm
        for i in range(RUNS):
            for v in variants if i % 2 == 0 else variants[::-1]:
                r = run(spark, v, work / f"{v.replace(' ', '-')}-{i}")
                for k in r:
                    got[v][k] += r[k]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {v: {k: float(np.median(x)) for k, x in got[v].items()} for v in variants}
    rows = "\n".join(
        f"| {v} | {med[v]['output']:.3f} | {med[v]['batch']:.3f} | {len(got[v]['batch'])} |"
        for v in variants
    )
    new, old = med["collect job"], med["spark writer"]
    write_section(
        "Batch overhead on Spark",
        f"""
Command: `.venv/bin/python -m bench.bench_batch_overhead` ({environment()}; pyspark 4.3,
local-cluster[2,1,1024]).

`zipf-hotkey-shift` at {SCALE:g}x its rate, 2 partitions, the hottest key split 50/50; each
batch's output written by the job that collects its statistics (the pipeline's path) or by
the baseline's two jobs (collect, then Spark's Parquet writer), alternating, {RUNS} runs of
{SEGMENTS} batches each, batches 2 onward; every run's output equals the reference.

| output written by | collect and write (s, median) | batch (s, median) | batches |
|---|---|---|---|
{rows}

Collect and write: {new["output"] / old["output"]:.2f}x the baseline's
({old["output"] - new["output"]:.3f} s less per batch); whole batch:
{new["batch"] / old["batch"]:.2f}x. Spark sections of this file measured before the
one-job path landed (2026-11-25) carry the baseline's fixed cost per batch.
""",
    )
    print(rows)


if __name__ == "__main__":
    main()
