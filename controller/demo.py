"""The main job: the seed group-by-window query on Spark, trimtab against plain hash routing.

Both runs replay the same input log on the same ``local-cluster`` session: first plain hash
routing (placement ``hash``, no hot-key splitting), then trimtab (correlation placement plus a
hot-key partitioner, the controller embedded in the driver). The table compares them; the
report holds trimtab's plots.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from controller.scenario import ScenarioFile
from controller.spark_replay import close_run, replay_spark
from spark_adapter.interrupt import holding_sigint

__all__ = ["DEMO_KEYS", "run_demo"]

DEMO_KEYS = (
    "output_matches_reference",
    "batches",
    "throughput",
    "mean_latency",
    "p99_latency",
    "batch_duration_p50",
    "node_load_variance_mean",
    "rows_in",
    "rows_out",
    "state_rows_moved",
    "plan_versions",
    "lost_tuples",
    "duplicate_tuples",
)


@holding_sigint  # a Ctrl-C is carried out once Spark is up, or between batches
def run_demo(
    scenario: ScenarioFile,
    master: str,
    batches: int,
    scale: float,
    partitioner: str,
    placement: str,
    partitions: int = 2,
) -> list[Any]:
    """Two replays on one session: hash routing, then trimtab. Returns both results."""
    from spark_adapter.session import make_session

    spark = make_session(
        master,
        "trimtab-demo",
        {"spark.sql.shuffle.partitions": str(partitions), "spark.executor.memory": "768m"},
    )
    work = Path(tempfile.mkdtemp(prefix="trimtab-demo-"))
    try:
        runs = []
        for label, pl, part in (("hash", "hash", "hash"), ("trimtab", placement, partitioner)):
            res = replay_spark(
                scenario,
                master,
                batches,
                pl,
                part,
                None,
                partitions,
                scale,
                interval_batches=2,
                workdir=work / label,
                spark=spark,
            )
            res.summary["run"] = label
            runs.append(res)
        return runs
    finally:
        close_run(None, spark, work)
