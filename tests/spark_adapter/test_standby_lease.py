"""A warm standby takes the lease from a primary only (no Spark: the lease loop alone)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.lease import Lease
from spark_adapter.standby import STANDBY_READY, EndedMeanwhile, _acquire, _follow


def test_a_standby_started_first_waits_for_a_primary_then_takes_over(tmp_path: Path) -> None:
    path = tmp_path / "lease.sqlite"
    follows: list[float] = []
    log = SimpleNamespace(ended_at=lambda: None)
    pipe = SimpleNamespace(dir=tmp_path, log=log, restore=lambda: follows.append(time.time()) or 0)
    got: list[int] = []
    standby = threading.Thread(
        target=lambda: got.append(_acquire(Lease(path, 0.5), "standby-1", "standby", pipe)),
        daemon=True,
    )
    standby.start()
    time.sleep(1.5)  # three lease lifetimes: a free lease no driver has held stays free
    assert standby.is_alive() and not got
    assert (tmp_path / STANDBY_READY).exists() and follows  # ready, following meanwhile
    assert Lease(path, 0.5).acquire("primary-2") == 1  # the primary starts, then dies
    standby.join(timeout=10)
    assert got == [2]  # the standby took over once the primary's lease expired


def test_a_damaged_lease_file_is_named_not_a_database_error(tmp_path: Path) -> None:
    """``pipeline run`` and the daemon exited 1 with "DatabaseError: file is not a database"."""
    from core.lease import Lease, lease_problem

    f = tmp_path / "lease.sqlite"
    f.write_text("garbage")
    with pytest.raises(ValueError, match="lease.sqlite: not a trimtab lease file"):
        Lease(f)
    assert "not a trimtab lease file" in (lease_problem(f) or "")
    f.unlink()
    Lease(f).close()  # a new one is made where none was
    assert lease_problem(f) is None


def test_a_lease_got_after_the_pipeline_ended_runs_nothing(tmp_path: Path) -> None:
    """The driver that held the lease ran the last batch (it closed every window) while this
    one waited: taking over ran a batch after it, which started from an infinite watermark
    (a worker's OverflowError, or a read of a segment trimmed past the last snapshot)."""
    path = tmp_path / "lease.sqlite"
    assert Lease(path, 0.5).acquire("primary-1") == 1  # its lease runs out after its last batch
    pipe = SimpleNamespace(dir=tmp_path, log=SimpleNamespace(ended_at=lambda: 3), restore=int)
    with pytest.raises(EndedMeanwhile, match="batch 3 closed every window") as e:
        _acquire(Lease(path, 0.5), "standby-2", "standby", pipe)
    assert (e.value.role, e.value.batch) == ("standby", 3)


def test_a_follow_that_read_a_segment_trimmed_meanwhile_waits_for_the_snapshot() -> None:
    """The primary snapshots and trims the input past the snapshot while a waiting standby
    refolds from it: the standby's follow failed (exit 1, a Spark read error) where the next
    follow loads the newer snapshot. A failure with no newer snapshot is raised."""

    def trimmed() -> int:
        raise RuntimeError("FAILED_READ_FILE: seg-000000.parquet does not exist")

    snapshots = {"newest": (4, "state/batch=4")}
    log = SimpleNamespace(latest_snapshot=lambda: snapshots["newest"])
    pipe = SimpleNamespace(log=log, states={2: "state after batch 2"}, restore=trimmed)
    _follow(pipe)  # batch 4's snapshot is newer than the state: the next follow loads it
    snapshots["newest"] = (2, "state/batch=2")
    with pytest.raises(RuntimeError, match="FAILED_READ_FILE"):
        _follow(pipe)
