"""Active standby for the driver: a second driver that processes every batch the primary runs.

Borealis's (and Hwang et al.'s, ICDE 2005) active standby keeps a replica that processes the
same input as the primary, so a failover needs no replay. Here the replica is a second driver
process with its own SparkSession and executors. While the primary holds the lease it *follows*:
for each batch b the primary has pinned, it reads the same input files (the primary's file
source log, ``checkpoint/sources/0``), copies the pin (plan version and watermarks) into its own
plan log and runs the same batch steps into its own directory (``WORKDIR/active-standby``:
state, output, statistics). Nothing it writes is published: its output is fenced by being
private. It records the next segment it needs (``_FOLLOWED``), and the primary does not trim
the input log past it (``standby_floor``).

When the primary's lease expires, the standby takes it with a new epoch, catches up on the
batches the primary pinned, and *publishes* those the primary had not committed: their output
directories move into ``output/`` and their commits into the shared plan log, each checked
against the epoch (fencing). It then runs on as the primary from its own state, on the shared
streaming checkpoint; the batch Spark re-runs there is pinned, so its output is the same.
There is no snapshot restore and no refold: a takeover costs about a lease expiry.

The cached-state replication of the ``active`` availability policy
(``PipelineOptions.replicate_state``: every cached state block on two executors) is a
different thing: it protects a batch against a lost executor, not against a lost driver.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_adapter.actuator import PlanLog, atomic_write
from spark_adapter.recovery import source_log_files
from spark_adapter.source import INPUT_SCHEMA_DDL

__all__ = ["FOLLOWED", "SHADOW", "follow", "handover", "publish", "shadow_dir"]

SHADOW = "active-standby"
FOLLOWED = "_FOLLOWED"


def shadow_dir(work: Path) -> Path:
    """The active standby's private directory, sharing the input log and plans by links."""
    d = work / SHADOW
    d.mkdir(parents=True, exist_ok=True)
    for name in ("input", "plans"):
        link = d / name
        if not link.exists():
            (work / name).mkdir(parents=True, exist_ok=True)
            os.symlink(Path("..") / name, link)
    return d


def _primary_pin(work: Path, batch_id: int) -> tuple[int, int, float, float, float] | None:
    """The primary's pin of ``batch_id`` (read-only: the standby never writes the shared log
    while it follows): batch, plan version, watermarks (previous, stable, tentative)."""
    db = work / "planlog.sqlite"
    if not db.exists():
        return None
    uri = f"{db.resolve().as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
            row = conn.execute(
                "SELECT batch_id, plan_version, wm_prev, wm, COALESCE(twm, wm) FROM pins "
                "WHERE batch_id=?",
                (batch_id,),
            ).fetchone()
    except sqlite3.OperationalError:  # the primary is still creating its log: not pinned yet
        return None
    return None if row is None else (int(row[0]), int(row[1]), row[2], row[3], row[4])


def follow(shadow: Any, work: Path, batch_id: int) -> bool:
    """Run ``batch_id`` in the standby's pipeline (``shadow``) exactly as the primary pinned it,
    once the primary has pinned it and logged its files; False while it has not."""
    pin = _primary_pin(work, batch_id)
    files = source_log_files(work / "checkpoint" / "sources" / "0", batch_id)
    if pin is None or not files:
        return False
    shadow.log.copy_pin(*pin)
    df = shadow.spark.read.schema(INPUT_SCHEMA_DDL).parquet(*sorted(files))
    st = shadow.process(df, batch_id)
    if st.event_range[1] >= 0:
        atomic_write(shadow.dir / FOLLOWED, str((st.event_range[1] >> 32) + 1).encode())
    return True


def publish(shadow: Any, work: Path, fence: Callable[[], bool]) -> list[int]:
    """Publish the batches the standby processed and the primary did not commit: output (and
    tentative) directories replace the shared ones, statistics files are copied, and the
    commits go into the shared plan log. Returns the batches published."""
    shared = PlanLog(work / "planlog.sqlite")
    try:
        done, infos = set(shared.committed()), shadow.log.commit_infos()
        rows = dict(shadow.log.committed_rows())
        out = []
        for b in shadow.log.committed():
            if b in done:
                continue
            if not fence():
                raise RuntimeError(f"fenced: lost the lease while publishing batch {b}")
            for sub in ("output", "tentative"):
                _replace_dir(shadow.dir / sub / f"batch={b}", work / sub / f"batch={b}")
            stats = shadow.dir / "metrics" / f"batch-{b}.json"
            if stats.exists():
                atomic_write(work / "metrics" / stats.name, stats.read_bytes())
            shared.commit(b, rows.get(b, 0), infos.get(b, {}))
            out.append(b)
        return out
    finally:
        shared.close()


def _replace_dir(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst`` (a partial output the primary left is replaced whole)."""
    if not src.exists():
        return
    tmp = dst.with_name(f".{dst.name}.publishing")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, dst)


def handover(shadow: Any, primary: Any) -> None:
    """Give the shared pipeline the standby's live state: cached states, watermark, coverage."""
    primary.states = dict(shadow.states)
    primary.max_ts = shadow.max_ts
    primary.dpc.restore(shadow.dpc.state())
    primary.stats.update(shadow.stats)
