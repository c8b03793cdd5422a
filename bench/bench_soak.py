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
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.common import ROOT, environment, write_section
from controller.config import load_settings
from controller.daemon import Daemon

RETENTION = 2000
EVERY = 1000


def _rows(db: Path) -> tuple[int, int]:
    """Rows of the decision log's rounds and plans tables."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        rounds = int(c.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])
        return rounds, int(c.execute("SELECT COUNT(*) FROM plans").fetchone()[0])


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


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
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


if __name__ == "__main__":
    main()
