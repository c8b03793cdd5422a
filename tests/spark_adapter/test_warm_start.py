"""A driver's warm start: one dry batch of its own query before it takes work (local[2])."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

import spark_adapter.warm_start as ws
from controller.scenario import load_scenario
from spark_adapter.query import compile_query
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.spark


def _warm_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("trimtab-warm-*")}


def test_the_dry_batch_runs_the_query_and_leaves_nothing_behind(spark: Any) -> None:
    sc = load_scenario(SCENARIOS / "spark-overload-ramp.yaml")
    before = _warm_dirs()
    done = ws.warm_start(spark, sc, compile_query(sc), 2)
    assert "failed" not in done, done
    assert done["dry_batches"] == 1  # the pipeline itself ran one batch over the segment
    assert done["dry_snapshots"] == 1  # and wrote a state snapshot (a live driver's first was cold)
    # the scenario's first tick (3,000 rows) scaled down to about DRY_ROWS
    assert 0.5 * ws.DRY_ROWS <= done["dry_rows"] <= 2 * ws.DRY_ROWS
    assert done["executors"] is None and done["wait_s"] < 1.0  # local[2]: nothing to wait for
    assert _warm_dirs() == before
    # a driver that takes no snapshots does not pay for one
    assert ws.warm_start(spark, sc, compile_query(sc), 2, snapshot=False)["dry_snapshots"] == 0


def test_a_warm_start_that_fails_leaves_the_driver_running(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")

    def broken(_: Any) -> Any:
        raise OSError("no space left on device")

    monkeypatch.setattr(ws, "rates", broken)
    before = _warm_dirs()
    done = ws.warm_start(spark, sc, compile_query(sc), 2)
    assert done["failed"] == "OSError: no space left on device"
    assert "dry_batches" not in done and _warm_dirs() == before
