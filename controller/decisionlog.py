"""The decision log: every control round, its observation summary, decision, reason and plan.

SQLite (the embedded default). Each round stores the observation summary (node loads,
variance, correlation, rates), the decision kind and reason with the numbers behind it
(scores, expected gain, shadow prices, moves), the plan version and whether it was applied or
only recommended. Plans are stored in full so a restarted controller resumes from the last
one. Retention is bounded by rounds. The controllers' lease (``core.lease``) lives in the same
database, and a writer that set its ``epoch`` is fenced by it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.lease import StaleEpochError
from core.plans import Plan

__all__ = ["DecisionLog", "DecisionLogError"]

SQLITE_MAGIC = b"SQLite format 3\x00"


def iso_utc(ts: float) -> str:
    """Seconds since the epoch as ISO-8601 UTC with milliseconds.

    >>> iso_utc(0.0)
    '1970-01-01T00:00:00.000Z'
    """
    dt = datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class DecisionLogError(ValueError):
    """A file that is not a readable trimtab decision log."""


class DecisionLog:
    """Append-only rounds and plans in SQLite, safe to read while the daemon writes."""

    @classmethod
    def read_only(cls, path: str | Path) -> DecisionLog:
        """Open an existing decision log for reading: the file is never written, and a file
        that is not a trimtab decision log is refused (``DecisionLogError`` naming why)."""
        p = Path(path)
        if not p.is_file():
            raise DecisionLogError(f"{p}: no such file")
        with open(p, "rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise DecisionLogError(f"{p}: not a trimtab decision log (not an SQLite file)")
        db = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as e:
            db.close()
            raise DecisionLogError(f"{p}: not a trimtab decision log ({e})") from None
        if not {"rounds", "plans"} <= tables:
            db.close()
            raise DecisionLogError(f"{p}: not a trimtab decision log (no rounds and plans tables)")
        log = cls.__new__(cls)
        log.path, log.retention, log._lock, log._db = p, 0, threading.Lock(), db
        return log

    def __init__(self, path: str | Path, retention_rounds: int = 10_000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.retention = retention_rounds
        # the writer's controller epoch: set, every write is refused once the lease stored in
        # this database (core.lease) has moved past it; None writes unfenced (replays, tests)
        self.epoch: int | None = None
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=10
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS rounds (
                id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, round INTEGER NOT NULL,
                kind TEXT NOT NULL, reason TEXT NOT NULL, plan_version INTEGER NOT NULL,
                applied INTEGER NOT NULL, duration_s REAL NOT NULL, observation TEXT NOT NULL,
                details TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS plans (version INTEGER PRIMARY KEY, ts REAL NOT NULL,
                applied INTEGER NOT NULL, plan TEXT NOT NULL);
            """
        )

    def record(
        self,
        ts: float,
        round_no: int,
        kind: str,
        reason: str,
        plan_version: int,
        applied: bool,
        duration_s: float,
        observation: dict[str, Any],
        details: dict[str, Any],
    ) -> None:
        """Append one round (and trim rounds and plans to the retention bound)."""
        with self._fenced():
            self._db.execute(
                "INSERT INTO rounds (ts, round, kind, reason, plan_version, applied, duration_s, observation, details) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    ts,
                    round_no,
                    kind,
                    reason,
                    plan_version,
                    int(applied),
                    duration_s,
                    json.dumps(observation, default=float),
                    json.dumps(details, default=float),
                ),
            )
            self._db.execute(
                "DELETE FROM rounds WHERE id <= (SELECT MAX(id) FROM rounds) - ?", (self.retention,)
            )
            # plans older than every retained round go too, except the newest applied one
            # (a restarted daemon resumes from it)
            self._db.execute(
                "DELETE FROM plans WHERE version < (SELECT MIN(plan_version) FROM rounds) "
                "AND version <> (SELECT MAX(version) FROM plans WHERE applied=1)"
            )

    def record_plan(self, ts: float, plan: Plan, applied: bool) -> None:
        """Store a plan the controller published (or recommended)."""
        with self._fenced():
            self._db.execute(
                "INSERT OR REPLACE INTO plans VALUES (?,?,?,?)",
                (plan.version, ts, int(applied), plan.to_json()),
            )

    @contextlib.contextmanager
    def _fenced(self) -> Iterator[None]:
        """One write transaction, refused (StaleEpochError) when the stored lease's epoch is
        newer than this writer's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self.epoch is not None:
                    self._check_epoch(self.epoch)
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _check_epoch(self, epoch: int) -> None:
        try:
            row = self._db.execute("SELECT epoch, holder FROM lease").fetchone()
        except sqlite3.OperationalError:  # no lease table: no controller ever held one
            return
        if row is not None and int(row[0]) > epoch:
            raise StaleEpochError(
                f"epoch: write from controller epoch {epoch} refused; "
                f"{row[1] or 'another controller'} holds epoch {row[0]}"
            )

    def last_plan(self, applied_only: bool = True) -> Plan | None:
        """The newest stored plan (applied ones only, by default)."""
        q = (
            "SELECT plan FROM plans"
            + (" WHERE applied=1" if applied_only else "")
            + " ORDER BY version DESC LIMIT 1"
        )
        row = self._db.execute(q).fetchone()
        return None if row is None else Plan.from_json(row[0])

    def last(self, n: int = 20) -> list[dict[str, Any]]:
        """The ``n`` most recent rounds, oldest first."""
        rows = self._db.execute(
            "SELECT ts, round, kind, reason, plan_version, applied, duration_s, observation, details FROM rounds "
            "ORDER BY id DESC LIMIT ?",
            (n,),
        ).fetchall()
        return [
            {
                "ts": r[0],
                "time": iso_utc(r[0]),
                "round": r[1],
                "kind": r[2],
                "reason": r[3],
                "plan_version": r[4],
                "applied": bool(r[5]),
                "duration_s": r[6],
                "observation": json.loads(r[7]),
                "details": json.loads(r[8]),
            }
            for r in reversed(rows)
        ]

    def last_round(self) -> int:
        """The highest round number recorded (0 for an empty log)."""
        row = self._db.execute("SELECT MAX(round) FROM rounds").fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        """Rounds stored."""
        return int(self._db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
