"""A months-long run's files stay bounded: the plan store retires versions no restore needs,
the metrics directory keeps the newest batches, and the external controller forgets files the
pipeline retired. No Spark: these are the pipeline's and the controller's file protocols."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from controller.testing import key_group_plan
from spark_adapter.actuator import PlanLog, PlanStore, retire_plans
from spark_adapter.batchstats import BatchStats, retire_batch_stats, write_batch_stats
from spark_adapter.external import ExternalSparkSubstrate

Q = SimpleNamespace(op_id="agg", key_groups=4)


def _publish(store: PlanStore, v: int) -> None:
    store.publish(key_group_plan(Q, [v % 2, 0, 1, 0], version=v))


def test_plans_a_restore_can_load_are_kept(tmp_path: Path) -> None:
    store, log = PlanStore(tmp_path / "plans"), PlanLog(tmp_path / "log.sqlite")
    for v in range(6):
        _publish(store, v)
        log.resolve(v, store, float(v))  # batch v pins version v
    assert retire_plans(log, store, keep=1) == 0  # no snapshot: a restore refolds from batch 0
    log.record_snapshot(2, "snap")
    # batches 3..5 (after the snapshot) pin versions 3..5: 0..2 can go, the current stays
    assert retire_plans(log, store, keep=1) == 3
    assert sorted(int(p.stem[1:]) for p in (tmp_path / "plans").glob("v*.json")) == [3, 4, 5]
    with pytest.raises(KeyError):
        store.load(1)
    _, pin = log.resolve(4, store, 4.0)  # a replay of batch 4 still finds its plan
    assert pin.replay and store.load(pin.plan_version).version == 4
    # the newest ``keep`` versions stay even when no restore needs them
    log.record_snapshot(5, "snap")
    assert retire_plans(log, store, keep=2) == 1  # only 3: 4 is among the newest two
    assert store.current_version() == 5 and store.load(4).version == 4


def _stats(b: int) -> BatchStats:
    return BatchStats(
        batch_id=b,
        plan_version=0,
        replay=False,
        duration_s=1.0,
        rows=np.array([3, 4]),
        busy_s=np.array([0.1, 0.1]),
        kg_rows=np.array([2, 2, 2, 1]),
        key_rows=pd.DataFrame({"key": [1], "side": [0], "rows": [3]}),
        stream_rows={"s": 7},
        state_rows=4,
        state_moved=0,
        late=0,
        rows_out=1,
        event_range=(b << 32, (b << 32) + 6),
        max_ts=float(b),
    )


def test_the_external_controller_forgets_retired_batch_files(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    _publish(PlanStore(tmp_path / "plans"), 0)
    ext = ExternalSparkSubstrate(tmp_path, ["s"], 2)
    seen = []
    for b in range(12):
        write_batch_stats(_stats(b), metrics)
        retire_batch_stats(metrics, b, 3)
        seen += [st.batch_id for st in ext.observe().batches]
    assert seen == list(range(12))  # every batch observed once
    assert len(list(metrics.iterdir())) == 3 and len(ext.mtimes) == 3
    write_batch_stats(_stats(11), metrics)  # a replay rewrites the newest batch's file
    assert [st.batch_id for st in ext.observe().batches] == [11]


def test_an_unreadable_batch_file_is_named_and_the_others_still_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One batch file that is not a trimtab batch file (cut short, or another tool's) is
    logged by name and left out; before, it failed the round and the batches read with it
    were dropped, so the daemon's next rounds saw no samples."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    _publish(PlanStore(tmp_path / "plans"), 0)
    ext = ExternalSparkSubstrate(tmp_path, ["s"], 2)
    for b in range(4):
        write_batch_stats(_stats(b), metrics)
    bad = sorted(metrics.iterdir())[2]
    bad.write_text('{"batch_id": 2}')
    with caplog.at_level("WARNING", logger="trimtab.external"):
        assert [st.batch_id for st in ext.observe().batches] == [0, 1, 3]
    assert any(
        bad.name in r.getMessage() or bad.name in str(r.__dict__.get("fields"))
        for r in caplog.records
    )
    assert not ext.observe().batches  # named once, not again every round
    write_batch_stats(_stats(2), metrics)  # the pipeline writes it again (a replay)
    assert [st.batch_id for st in ext.observe().batches] == [2]


def test_the_batch_poll_sees_each_new_file_and_lists_the_directory_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``unseen_mtime`` (a daemon with ``control.on_batch`` calls it five times a second) names
    a new or rewritten batch file until ``observe`` reads it, and while the directory's own
    stamp holds it answers from its last scan instead of listing 1,000 files again."""
    import time

    metrics = tmp_path / "metrics"
    metrics.mkdir()
    _publish(PlanStore(tmp_path / "plans"), 0)
    ext = ExternalSparkSubstrate(tmp_path, ["s"], 2)
    scans = []
    stamps = ext._stamps
    monkeypatch.setattr(ext, "_stamps", lambda: scans.append(1) or stamps())
    assert ext.unseen_mtime() == 0
    path = write_batch_stats(_stats(0), metrics)
    time.sleep(0.1)  # past the 50 ms a directory stamp is not trusted for
    assert ext.unseen_mtime() == path.stat().st_mtime_ns
    before = len(scans)
    assert ext.unseen_mtime() == path.stat().st_mtime_ns  # unchanged: no listing
    assert len(scans) == before
    ext.observe()
    assert ext.unseen_mtime() == 0  # read: nothing unseen, though the directory is as it was
    path = write_batch_stats(_stats(0), metrics)  # a replay rewrites it
    time.sleep(0.1)
    assert ext.unseen_mtime() == path.stat().st_mtime_ns
    ext.observe()
    retire_batch_stats(metrics, 1, 1)  # the pipeline retires the file (batch 1 is newest)
    assert ext.unseen_mtime() == 0
