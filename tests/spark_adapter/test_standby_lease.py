"""A warm standby takes the lease from a primary only (no Spark: the lease loop alone)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.lease import Lease
from spark_adapter.standby import STANDBY_READY, EndedMeanwhile, _acquire, _follow
from spark_adapter.standby_floor import standby_floor


def test_a_standby_started_first_waits_for_a_primary_then_takes_over(tmp_path: Path) -> None:
    path = tmp_path / "lease.sqlite"
    follows: list[float] = []
    # the primary committed batches 0 and 1, which read segments 0 and 1
    infos = {b: {"event_range": [b << 32, (b << 32) + 9]} for b in (0, 1)}
    log = SimpleNamespace(ended_at=lambda: None, commit_infos=lambda: infos)

    def restore() -> int:
        follows.append(time.time())
        pipe.states = {1: "state after batch 1"}
        return 1

    pipe = SimpleNamespace(dir=tmp_path, log=log, states={}, restore=restore)
    got: list[int] = []
    standby = threading.Thread(
        target=lambda: got.append(_acquire(Lease(path, 0.5), "standby-1", "standby", pipe)),
        daemon=True,
    )
    standby.start()
    time.sleep(1.5)  # three lease lifetimes: a free lease no driver has held stays free
    assert standby.is_alive() and not got
    assert (tmp_path / STANDBY_READY).exists() and follows  # ready, following meanwhile
    # the primary keeps segment 2 on for the standby's next follow (``standby_floor``)
    assert standby_floor(tmp_path)() == 2
    assert Lease(path, 0.5).acquire("primary-2") == 1  # the primary starts, then dies
    standby.join(timeout=10)
    assert got == [2]  # the standby took over once the primary's lease expired
    assert standby_floor(tmp_path)() is None  # and holds the trimming back no more


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
    log = SimpleNamespace(ended_at=lambda: 3)
    pipe = SimpleNamespace(dir=tmp_path, log=log, states={}, restore=int)
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
