"""Passive standby for the driver: a lease with an epoch in SQLite, and the driver process.

Two driver processes share one working directory. The *primary* holds the lease and renews it
(a heartbeat). A *warm standby* starts its SparkSession in advance and waits; when the lease
expires (the primary's heartbeat stopped), it takes the lease with a new epoch, restores the
newest state snapshot, refolds the committed batches after it, and resumes the streaming
query on the same checkpoint: Spark re-runs the batch the primary had not committed, with the
plan and watermarks pinned in the plan log, and the idempotent sink replaces any output the
primary wrote. A driver checks its epoch before writing and before committing, so two drivers
never commit the same batch (fencing).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Lease", "run_driver", "wait_for_holder"]


class Lease:
    """A time-limited, epoch-numbered lease in SQLite (one holder at a time)."""

    def __init__(self, path: str | Path, ttl_s: float = 3.0) -> None:
        self.path = Path(path)
        self.ttl_s = ttl_s
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=10
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 0), epoch INTEGER, holder TEXT, expires REAL)"
        )
        self._db.execute("INSERT OR IGNORE INTO lease VALUES (0, 0, '', 0)")
        self._lock = threading.Lock()

    def acquire(self, holder: str, now: float | None = None) -> int | None:
        """Take the lease if it is free or expired; returns the new epoch, or None."""
        now = time.time() if now is None else now
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            epoch, owner, expires = self._db.execute(
                "SELECT epoch, holder, expires FROM lease"
            ).fetchone()
            if owner and expires > now and owner != holder:
                self._db.execute("ROLLBACK")
                return None
            self._db.execute(
                "UPDATE lease SET epoch=?, holder=?, expires=?",
                (epoch + 1, holder, now + self.ttl_s),
            )
            self._db.execute("COMMIT")
            return int(epoch + 1)

    def renew(self, holder: str, epoch: int, now: float | None = None) -> bool:
        """Extend the lease while ``holder`` still owns ``epoch``."""
        now = time.time() if now is None else now
        with self._lock:
            cur = self._db.execute(
                "UPDATE lease SET expires=? WHERE holder=? AND epoch=? AND expires>?",
                (now + self.ttl_s, holder, epoch, now),
            )
            return cur.rowcount == 1

    def valid(self, epoch: int, now: float | None = None) -> bool:
        """True while ``epoch`` is the current, unexpired lease."""
        now = time.time() if now is None else now
        with self._lock:
            e, _, expires = self._db.execute("SELECT epoch, holder, expires FROM lease").fetchone()
        return bool(e == epoch and expires > now)


def wait_for_holder(lease_file: str | Path, prefix: str, timeout_s: float = 120.0) -> bool:
    """Wait until a holder whose name starts with ``prefix`` has the lease (for harnesses)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if Path(lease_file).exists():
            with contextlib.closing(sqlite3.connect(str(lease_file))) as db:
                try:
                    row = db.execute("SELECT holder FROM lease").fetchone()
                except sqlite3.OperationalError:
                    row = None
            if row and str(row[0]).startswith(prefix):
                return True
        time.sleep(0.2)
    return False


def _warm_up(spark: Any, partitions: int) -> None:
    """Run a tiny Arrow/pandas job on every executor so its Python worker is up (warm standby)."""

    def ident(it: Any) -> Any:
        yield from it

    slots = max(partitions, spark.sparkContext.defaultParallelism)
    spark.range(0, 64 * slots, numPartitions=slots).repartition(slots).mapInPandas(
        ident, "id long"
    ).count()


def run_driver(
    workdir: str | Path,
    scenario_path: str,
    role: str,
    master: str = "local[2]",
    partitions: int = 2,
    lease_ttl_s: float = 3.0,
    snapshot_every: int = 2,
    kill_after_output: int | None = None,
    result_file: str | Path | None = None,
    mtbf_s: float | None = None,
    trigger_s: float | None = None,
    window_drops: bool = False,
) -> dict[str, Any]:
    """Run a pipeline driver as ``primary`` or warm ``standby`` over ``workdir``'s input log.

    A standby starts its session, warms its executors and follows the primary's commits
    (restoring snapshots and refolding) while it waits, so a takeover has little left to do.
    Without ``trigger_s`` the driver processes the segments present and closes every window;
    with it, it follows the log live, a micro-batch every ``trigger_s`` seconds, until the log
    is closed (then it closes the windows) or SIGTERM/SIGINT (then it drains what has arrived
    and stops with the windows open, for the next driver to restore).
    """
    if trigger_s is not None and trigger_s <= 0:
        raise ValueError(f"trigger_s must be positive, got {trigger_s}")
    from core.scenario import load_scenario
    from spark_adapter.faults import publish_app, serve_lose_requests
    from spark_adapter.operators import compile_query
    from spark_adapter.pipeline import PipelineOptions, SparkPipeline
    from spark_adapter.session import make_session

    if role not in ("primary", "standby"):
        raise ValueError(f"role: expected 'primary' or 'standby', got {role!r}")
    work = Path(workdir)
    holder = f"{role}-{os.getpid()}"
    lease = Lease(work / "lease.sqlite", lease_ttl_s)
    t_start = time.time()
    spark = make_session(
        master, f"trimtab-driver-{role}", {"spark.sql.shuffle.partitions": str(partitions)}
    )
    _warm_up(spark, partitions)
    sc = load_scenario(scenario_path)
    opts = PipelineOptions(
        partitions,
        snapshot_every=snapshot_every,
        snapshot_mtbf_s=mtbf_s,  # Young/Daly from the measured snapshot cost, starting at k
        snapshot_max_every=max(50, snapshot_every),
        retention="passive",
        window_drops=window_drops,
    )
    pipe = SparkPipeline(spark, compile_query(sc), work, opts)
    epoch: int | None = None
    give_up = (
        time.time() + 2 * lease_ttl_s + 1
    )  # a primary waits out a dead holder's lease, no longer
    last_follow = 0.0
    while epoch is None:
        epoch = lease.acquire(holder)
        if epoch is None:
            if role == "primary" and time.time() > give_up:
                raise RuntimeError("lease: another driver holds the lease")
            if role == "standby" and time.time() - last_follow > 1.0:
                pipe.restore()  # follow the primary's commits: the state stays warm
                last_follow = time.time()
            time.sleep(0.1)
    t_lease = time.time()
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(lease_ttl_s / 3):
            if not lease.renew(holder, epoch):
                return

    threading.Thread(target=heartbeat, daemon=True).start()
    pipe.fence = lambda: lease.valid(epoch)
    first_commit: list[float] = []

    def hook(batch_id: int, phase: str) -> None:
        if (
            phase == "output_written"
            and kill_after_output is not None
            and batch_id == kill_after_output
        ):
            os.kill(os.getpid(), signal.SIGKILL)  # crash between the output and its commit

    pipe.fault_hook = hook
    publish_app(spark, work, master)  # `trimtab inject` finds the driver doing the work

    def on_batch(st: Any) -> None:
        if not first_commit:
            first_commit.append(time.time())
        serve_lose_requests(spark, work)

    pipe.on_batch = on_batch
    restored = pipe.restore()
    t_restored = time.time()
    if trigger_s is None:
        pipe.run_available()
        ended = True
    else:
        halt = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: halt.set())
        ended = pipe.run_stream(trigger_s, halt)
    if ended:
        pipe.flush()
    stop.set()
    result = {
        "role": role,
        "epoch": epoch,
        "pid": os.getpid(),
        "restored_through": restored,
        "t_start": t_start,
        "t_lease": t_lease,
        "t_restored": t_restored,
        "t_first_commit": first_commit[0] if first_commit else None,
        "t_end": time.time(),
        "batches": sorted(pipe.stats),
        "ended": ended,
        "committed": pipe.log.committed(),
        "trim_log": pipe.trim_log,
    }
    if result_file is not None:
        Path(result_file).write_text(json.dumps(result))
    pipe.cleanup()
    with contextlib.suppress(Exception):
        spark.stop()
    return result
