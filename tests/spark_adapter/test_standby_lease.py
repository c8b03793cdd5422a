"""A warm standby takes the lease from a primary only (no Spark: the lease loop alone)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.lease import Lease
from spark_adapter.standby import STANDBY_READY, _acquire


def test_a_standby_started_first_waits_for_a_primary_then_takes_over(tmp_path: Path) -> None:
    path = tmp_path / "lease.sqlite"
    follows: list[float] = []
    pipe = SimpleNamespace(dir=tmp_path, restore=lambda: follows.append(time.time()) or 0)
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
