"""Driver failover on Spark: the primary driver is killed between a batch's output and its
commit; the next driver is an active standby, a warm (passive) standby or a cold restart.

Run: .venv/bin/python -m bench.bench_ha driver
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.common import ROOT, environment
from controller.live_rig import driver_failover
from controller.scenario import load_scenario
from controller.testing import alternating_plan

SC = ROOT / "scenarios" / "seed-groupby-window.yaml"
MODES = ("active", "standby", "cold")


def failover(mode: str) -> dict:  # type: ignore[type-arg]
    """One failover in ``mode`` over a fresh working directory (8 segments, kill after 3)."""
    from spark_adapter.actuator import PlanStore
    from spark_adapter.query import compile_query
    from spark_adapter.source import InputLog

    work = Path(tempfile.mkdtemp(prefix="trimtab-failover-"))
    try:
        sc = load_scenario(SC)
        InputLog(work / "input").generate(sc, 8, scale=0.2)
        PlanStore(work / "plans").publish(alternating_plan(compile_query(sc)))
        res = driver_failover(SC, work, mode, kill_after=3)
        return res | {"first_commit_s": res["t_first_commit"] - res["t_crash"]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def section() -> str:
    """The three side by side, as a BENCHMARKS section body."""
    runs = {m: failover(m) for m in MODES}
    warm = runs["standby"]["first_commit_s"]
    rows = "\n".join(
        f"| {m} | {r['first_commit_s']:.1f} | {r['first_commit_s'] / warm:.2f} | "
        f"{r.get('published', '-')} | {r['restored_through']} | {r['committed'][-1]} |"
        for m, r in runs.items()
    )
    return f"""
Command: `.venv/bin/python -m bench.bench_ha driver` ({environment()}; pyspark 4.3, each driver
on its own local-cluster[2,1,1024]).

`seed-groupby-window` x 0.2, 8 segments, the primary driver `kill -9`ed by itself after
writing batch 3's output and before committing it (`--kill-after-output 3`), lease time to
live 3 s. Time from the crash to the next driver's first committed (published) batch:

| next driver | first commit after the crash (s) | / warm standby | batches published at takeover | restored through | last batch |
|---|---|---|---|---|---|
{rows}

An active standby (`pipeline run --role active`, started before the primary) has processed
every batch the primary pinned, batch 3 included, in its own directory: at takeover it
publishes batch 3's output and commit, with no restore and no refold, so what remains is the
lease expiry. The warm standby (`--role standby`, also started before the primary, its session
up and warmed by a dry batch, `_STANDBY_READY`) restores the newest snapshot, refolds the
committed batches after it and re-runs batch 3; the cold restart also starts its session and
runs its warm start (a dry batch) before it takes the lease. Target: the active
standby's first published batch at most 0.3x the warm standby's takeover time.
"""
