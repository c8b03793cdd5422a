"""An active standby polls the primary's plan log before the primary has created its tables:
that is "not pinned yet", not a crash (the cause of the active-standby test's intermittent
failure: the standby exited with 'no such table: pins')."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spark_adapter.active_standby import _primary_pin
from spark_adapter.actuator import PlanLog


def test_a_plan_log_being_created_is_not_pinned_yet(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "planlog.sqlite").close()  # the file exists, no table yet
    assert _primary_pin(tmp_path, 0) is None


def test_a_fresh_plan_log_has_the_tentative_watermark_from_its_creation(tmp_path: Path) -> None:
    PlanLog(tmp_path / "planlog.sqlite")
    with sqlite3.connect(tmp_path / "planlog.sqlite") as db:
        cols = {r[1] for r in db.execute("PRAGMA table_info(pins)")}
    assert "twm" in cols
    assert _primary_pin(tmp_path, 0) is None  # created, nothing pinned
