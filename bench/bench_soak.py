"""Soak: does the daemon run for months? Memory, open files and decision-log size over many
rounds.

Run: .venv/bin/python -m bench.bench_soak [ROUNDS]
The daemon of ``examples/controller.yaml`` (correlation placement, LP shedding, upstream
backup on the simulator), with its decision log and state in a temporary directory and
``decision_retention_rounds`` 2,000, runs ROUNDS control rounds (default 20,000) back to back
through ``Daemon.tick``, the function the scheduler calls (the scheduler's own interval is
left out, so 20,000 rounds take minutes, not the 17 at ``interval_s: 0.05``). Every 1,000
rounds it samples the process's RSS, open files and the decision log's rows and bytes.
Target: after the first 1,000 rounds RSS grows by at most 5% over the rest; open files flat;
the decision log within its retention.

External mode (``external``, run by default after the simulator): the same daemon steering a
pipeline's working directory (``substrate.kind: spark-external``, seed-groupby-window, lp
shedding): before every round a synthetic pipeline writes the next micro-batch's statistics
file (the pipeline's own writer and metrics retention, numbers drawn around a real run's), and
the daemon reads it and publishes plans to the plan store. Sampled as above, plus the round's
duration and the files in the metrics and plans directories.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from bench.common import ROOT, environment, write_section
from controller.config import load_settings
from controller.daemon import Daemon
from spark_adapter.actuator import PlanLog, PlanStore, retire_plans
from spark_adapter.batchstats import BatchStats, retire_batch_stats, write_batch_stats

RETENTION = 2000
EVERY = 1000


def _rows(db: Path) -> tuple[int, int]:
    """Rows of the decision log's rounds and plans tables."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        rounds = int(c.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])
        return rounds, int(c.execute("SELECT COUNT(*) FROM plans").fetchone()[0])


KEEP_BATCH_FILES = 1000  # the pipeline's default metrics retention
SNAPSHOT_EVERY = 10  # the synthetic pipeline's state snapshots, after which it retires plans


def synthetic_batch(b: int, rng: np.random.Generator, n: int = 2, kgs: int = 8) -> BatchStats:
    """A micro-batch's statistics around a seed-groupby-window run's (about 300 rows per
    partition, 200 us per row, Zipf-skewed keys)."""
    rows = rng.poisson(300, n)
    keys = np.arange(40)
    return BatchStats(
        batch_id=b,
        plan_version=0,
        replay=False,
        duration_s=float(rng.uniform(1.5, 2.5)),
        rows=rows,
        busy_s=rows * 2e-4 + 0.02,
        kg_rows=rng.multinomial(int(rows.sum()), np.full(kgs, 1 / kgs)),
        key_rows=pd.DataFrame(
            {"key": keys, "side": 0, "rows": rng.zipf(1.3, keys.size).clip(max=500)}
        ),
        stream_rows={"s": int(rows.sum())},
        state_rows=int(rng.integers(800, 1200)),
        state_moved=0,
        late=0,
        rows_out=int(rng.integers(0, 200)),
        event_range=(b << 32, (b << 32) + int(rows.sum()) - 1),
        max_ts=float(b),
        info={"started_at": time.time()},
    )


def soak_external(rounds: int) -> list[dict[str, float]]:
    """The daemon steering a working directory that a synthetic pipeline feeds."""
    proc = psutil.Process(os.getpid())
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory(prefix="trimtab-soak-ext-") as tmp:
        work, db = Path(tmp) / "w", Path(tmp) / "decisions.sqlite"
        metrics = work / "metrics"
        metrics.mkdir(parents=True)
        settings = load_settings(
            ROOT / "examples" / "controller.yaml",
            decision_log=str(db),
            state_dir=str(Path(tmp) / "state"),
            decision_retention_rounds=RETENTION,
            substrate={
                "kind": "spark-external",
                "workdir": str(work),
                "scenario": str(ROOT / "scenarios" / "seed-groupby-window.yaml"),
            },
            placement={"method": "correlation-oneway"},
            shedding={"method": "lp"},
            availability={"policy": "upstream"},
        )
        daemon = Daemon(settings)
        plans, log = PlanStore(work / "plans"), PlanLog(work / "planlog.sqlite")
        samples = []
        t0 = time.perf_counter()
        spent = 0.0
        for r in range(1, rounds + 1):
            # the pipeline's side: pin, write the statistics, commit, snapshot and retire
            log.resolve(r, plans, float(r))
            write_batch_stats(synthetic_batch(r, rng), metrics)
            retire_batch_stats(metrics, r, KEEP_BATCH_FILES)
            log.commit(r, 0)
            if r % SNAPSHOT_EVERY == 0:
                log.record_snapshot(r, "synthetic")
                retire_plans(log, plans)
            t = time.perf_counter()
            daemon.tick()
            spent += time.perf_counter() - t
            if r % EVERY == 0:
                samples.append(
                    {
                        "round": r,
                        "rss_mb": proc.memory_info().rss / 2**20,
                        "open_files": proc.num_fds(),
                        "log_rows": _rows(db)[0],
                        "metric_files": sum(1 for _ in metrics.iterdir()),
                        "plan_files": sum(1 for _ in (work / "plans").glob("v*.json")),
                        "round_ms": 1000 * spent / EVERY,
                        "s": time.perf_counter() - t0,
                    }
                )
                spent = 0.0
        daemon.log.close()
        log.close()
    return samples


def soak(rounds: int) -> list[dict[str, float]]:
    proc = psutil.Process(os.getpid())
    with tempfile.TemporaryDirectory(prefix="trimtab-soak-") as tmp:
        db = Path(tmp) / "decisions.sqlite"
        settings = load_settings(
            ROOT / "examples" / "controller.yaml",
            decision_log=str(db),
            state_dir=str(Path(tmp) / "state"),
            decision_retention_rounds=RETENTION,
        )
        daemon = Daemon(settings)
        samples = []
        t0 = time.perf_counter()
        for r in range(1, rounds + 1):
            daemon.tick()
            if r % EVERY == 0:
                samples.append(
                    {
                        "round": r,
                        "rss_mb": proc.memory_info().rss / 2**20,
                        "open_files": proc.num_fds(),
                        "log_rows": (rows := _rows(db))[0],
                        "plan_rows": rows[1],
                        "log_mb": sum(f.stat().st_size for f in Path(tmp).glob("decisions*"))
                        / 2**20,
                        "s": time.perf_counter() - t0,
                    }
                )
        daemon.log.close()
    return samples


def external_section(rounds: int, samples: list[dict[str, float]]) -> str:
    first, last = samples[0], samples[-1]
    growth = last["rss_mb"] / first["rss_mb"] - 1
    rows = "\n".join(
        f"| {s['round']} | {s['rss_mb']:.1f} | {s['open_files']} | {s['log_rows']} | "
        f"{s['metric_files']} | {s['plan_files']} | {s['round_ms']:.1f} | {s['s']:.0f} |"
        for s in samples
    )
    return f"""
External mode (`.venv/bin/python -m bench.bench_soak {rounds} external`): the daemon steering a
pipeline's working directory (seed-groupby-window, correlation-oneway, lp, upstream backup)
that a synthetic pipeline feeds one micro-batch's statistics file per round (the pipeline's
own writer, keeping the newest {KEEP_BATCH_FILES:,} files; it pins each batch in a plan log,
snapshots every {SNAPSHOT_EVERY} batches and then retires the plans no restore needs beyond the
newest 1,000, as a `trimtab pipeline run` driver does). The controller publishes a plan
almost every round: the live partitioner re-routes each micro-batch's hot keys. RSS from round {first["round"]:,} to
{last["round"]:,}: {first["rss_mb"]:.1f} to {last["rss_mb"]:.1f} MB ({growth:+.1%}; target at most
+5%); open files {first["open_files"]} to {last["open_files"]}; a round took
{first["round_ms"]:.1f} ms over the first {EVERY:,} rounds and {last["round_ms"]:.1f} ms over the last.

| round | RSS (MB) | open files | decision-log rounds | metrics files | plan files | round (ms, mean) | elapsed (s) |
|---|---|---|---|---|---|---|---|
{rows}
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    if sys.argv[2:] == ["external"]:
        ext = soak_external(rounds)
        write_section("Soak, external mode", external_section(rounds, ext))
        print(external_section(rounds, ext))
        return
    samples = soak(rounds)
    first, last = samples[0], samples[-1]
    growth = last["rss_mb"] / first["rss_mb"] - 1
    rows = "\n".join(
        f"| {s['round']} | {s['rss_mb']:.1f} | {s['open_files']} | {s['log_rows']} | "
        f"{s['plan_rows']} | "
        f"{s['log_mb']:.2f} | {s['s']:.0f} |"
        for s in samples
    )
    write_section(
        "Soak",
        f"""
Command: `.venv/bin/python -m bench.bench_soak {rounds}` ({environment()}).

The `examples/controller.yaml` daemon (simulator; correlation placement, LP shedding, upstream
backup), its own round function called {rounds:,} times back to back, decision-log retention
{RETENTION:,} rounds. RSS from round {first["round"]:,} to {last["round"]:,}: {first["rss_mb"]:.1f}
to {last["rss_mb"]:.1f} MB ({growth:+.1%}; target at most +5%); open files
{first["open_files"]} to {last["open_files"]}; decision log {last["log_rows"]:,} rows (target:
within the retention of {RETENTION:,}).

| round | RSS (MB) | open files | decision-log rounds | plans kept | decision-log MB | elapsed (s) |
|---|---|---|---|---|---|---|
{rows}
""",
    )
    print(rows)
    print(f"rss growth {growth:+.1%}")
    ext = soak_external(rounds)
    write_section("Soak, external mode", external_section(rounds, ext))
    print(external_section(rounds, ext))


if __name__ == "__main__":
    main()
