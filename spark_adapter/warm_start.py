"""Warm start: a driver runs one dry batch before it takes work, so its first real batch is
as fast as the later ones.

A new session's first batch pays the cold paths of everything it touches once: the executors'
Python workers and the fold's imports, the JVMs' Parquet reader and writer, the shuffle, the
cached state, the driver's plan compilation. On local-cluster[2,1,1024] the first batch of
``spark-overload-ramp`` (then one branch) took 10.7-11.6 s for 1 s of operator work (later
batches: about 2 s), so a live run started with a backlog of 4 segments that the first
latencies carried (up to 20 s at a 3 s trigger). A batch-shaped job alone
(``executor_pool.warm_up``) left 7 s of it: most was the file source's first read and the
output's first write. So the driver waits until the
executors its master starts have registered, then runs the pipeline itself, with the query it
will run, over one small generated segment in a temporary directory (a round-robin plan, every
window left open) and removes the directory. Nothing of the user's working directory is read
or written. The dry batch also writes a state snapshot: a live driver snapshots every 2
batches, and its first snapshot, cold, took 1.7 s of its batch's commit (0.4-0.5 s warm), so
that batch overran its trigger and the next took two segments.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from core.plans import Placement, Plan, RoutingConfig, key_group_units
from core.scenario import Scenario
from core.workload import rates
from spark_adapter.executor_pool import live_executor_count
from spark_adapter.query import QuerySpec

__all__ = ["DRY_ROWS", "expected_executors", "round_robin_plan", "warm_start"]

DRY_ROWS = 256  # rows of the dry batch (about; the scenario's first tick, scaled down)


def round_robin_plan(q: QuerySpec, partitions: int) -> Plan:
    """Plan 0 without a controller: key group g of the keyed stage on partition g mod P."""
    return Plan(
        placement=Placement(
            units=key_group_units(q.op_id, q.key_groups),
            nodes=tuple(f"p{i}" for i in range(partitions)),
            assignment=tuple(g % partitions for g in range(q.key_groups)),
        ),
        routing=RoutingConfig(num_partitions=partitions),
        reason="no controller: key groups spread round-robin over the partitions",
    )


def expected_executors(master: str) -> int:
    """Executors a master starts for the application: ``local-cluster[n,c,m]`` n, a
    standalone or other cluster master at least 1, ``local[N]`` none (the driver runs tasks).

    >>> expected_executors("local-cluster[2,1,1024]"), expected_executors("local[2]")
    (2, 0)
    >>> expected_executors("spark://127.0.0.1:7077")
    1
    """
    if m := re.match(r"local-cluster\[(\d+),", master):
        return int(m.group(1))
    return 0 if master.startswith("local") else 1


def warm_start(
    spark: Any,
    scenario: Scenario,
    q: QuerySpec,
    partitions: int,
    timeout_s: float = 30.0,
    snapshot: bool = True,
) -> dict[str, Any]:
    """Wait (at most ``timeout_s``) for the master's executors, then run one dry batch of
    ``q`` (see the module's docstring). Returns the executors registered (None in
    ``local[N]``), the wait's and the dry batch's seconds, the dry batch's rows, batches run
    (1) and state snapshots written (1; 0 with ``snapshot`` off, for a driver that takes
    none: the snapshot adds about 1.4 s to the dry batch), and under ``failed`` why it could
    not run (the driver then goes on, cold)."""
    from spark_adapter.options import PipelineOptions
    from spark_adapter.pipeline import SparkPipeline
    from spark_adapter.source import InputLog

    count, want = live_executor_count(spark), expected_executors(spark.sparkContext.master)
    t0 = time.monotonic()
    while want and count() < want and time.monotonic() - t0 < timeout_s:
        time.sleep(0.1)
    t1 = time.monotonic()
    done: dict[str, Any] = {"executors": count() if want else None, "wait_s": round(t1 - t0, 3)}
    tmp = Path(tempfile.mkdtemp(prefix="trimtab-warm-"))
    try:
        first_tick = float(rates(scenario)[0].sum())
        scale = min(1.0, DRY_ROWS / max(first_tick, 1.0))
        done["dry_rows"] = InputLog(tmp / "input").generate(scenario, 1, scale=scale)
        opts = PipelineOptions(partitions, snapshot_every=1 if snapshot else 0)
        pipe = SparkPipeline(spark, q, tmp, opts)
        pipe.plans.publish(round_robin_plan(q, partitions))
        try:
            done["dry_batches"] = pipe.run_available()
            done["dry_snapshots"] = len(pipe.log.snapshots())
        finally:
            pipe.cleanup()
    except Exception as exc:  # a warm start must never stop a driver: its batches run cold
        done["failed"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done | {"dry_batch_s": round(time.monotonic() - t1, 3)}
