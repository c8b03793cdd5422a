"""The decision log: every control round, its observation summary, decision, reason and plan.

SQLite (the embedded default). Each round stores the observation summary (node loads,
variance, correlation, rates), the decision kind and reason with the numbers behind it
(scores, expected gain, shadow prices, moves), the plan version and whether it was applied or
only recommended. Plans are stored in full so a restarted controller resumes from the last
one. Retention is bounded by rounds.

The controllers' lease (``core.lease``) lives in its own file beside the log
(``lease_file``), so that a primary frozen inside one of the log's commits (SIGSTOP, a stalled
disk) holds only the log's write lock, never the lease: its standby still takes over on time.
A writer that set its ``epoch`` is fenced twice: by the lease (a newer epoch holds it) and by
the log itself (a newer epoch has written here). Writes that find the log locked by another
process past ``wait_s`` wait in memory, in order, and go in with the next write that gets the
lock (``pending``); round numbers stay unique when they do.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3
import threading
from collections import deque
from collections.abc import Collection
from pathlib import Path
from typing import Any

from core.files import connect_read_only, file_problem
from core.lease import StaleEpochError, is_busy, read_lease
from core.plans import Plan

__all__ = ["DecisionLog", "DecisionLogError", "lease_file"]

SQLITE_MAGIC = b"SQLite format 3\x00"


def iso_utc(ts: float) -> str:
    """Seconds since the epoch as ISO-8601 UTC with milliseconds.

    >>> iso_utc(0.0)
    '1970-01-01T00:00:00.000Z'
    """
    dt = datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def lease_file(decision_log: str | Path) -> Path:
    """Where the controllers sharing ``decision_log`` keep their lease.

    >>> lease_file("/srv/trimtab/decisions.sqlite").name
    'decisions.sqlite.lease'
    """
    p = Path(decision_log)
    return p.with_name(p.name + ".lease")


class DecisionLogError(ValueError):
    """A file that is not a readable trimtab decision log."""


def change_summary(round_no: int, ts: float, kind: str, reason: str) -> dict[str, Any]:
    """A round as a daemon's status shows it: its number, time, kind and reason."""
    return {"round": round_no, "time": iso_utc(ts), "kind": str(kind), "reason": reason}


class DecisionLog:
    """Append-only rounds and plans in SQLite, safe to read while the daemon writes."""

    @classmethod
    def read_only(cls, path: str | Path) -> DecisionLog:
        """Open an existing decision log for reading: the file is never written, and a file
        that is not a trimtab decision log is refused (``DecisionLogError`` naming why)."""
        p = Path(path)
        if (problem := file_problem(p, named=False)) is not None:
            raise DecisionLogError(f"{p}: {problem}")
        with open(p, "rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise DecisionLogError(f"{p}: not a trimtab decision log (not an SQLite file)")
        db = connect_read_only(p, timeout=5.0)
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

    def __init__(
        self, path: str | Path, retention_rounds: int = 10_000, wait_s: float = 10.0
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.retention = retention_rounds
        self.wait_s = wait_s
        # the writer's controller epoch: set, every write is refused once the lease
        # (lease_file) or this log has seen a newer one; None writes unfenced (tests)
        self.epoch: int | None = None
        # writes not yet in the database (another process held its write lock): (epoch,
        # "round" or "plan", row), oldest first; at most twice what retention keeps
        self._pending: deque[tuple[int | None, str, tuple[Any, ...]]] = deque(
            maxlen=2 * max(1, retention_rounds)
        )
        self.dropped = 0  # pending writes dropped because more waited than retention keeps
        # how far this writer's round numbers were moved up, because a writer that lost the
        # lease committed the same numbers after this one counted from the log
        self.round_shift = 0
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
            CREATE TABLE IF NOT EXISTS fence (id INTEGER PRIMARY KEY CHECK (id = 0),
                epoch INTEGER NOT NULL);
            """
        )
        self._db.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")

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
    ) -> bool:
        """Append one round (and trim rounds and plans to the retention bound).

        Returns False when the log was locked by another process: the round waits in
        ``pending`` and goes in with the next write that gets the lock."""
        row = (
            ts,
            round_no,
            kind,
            reason,
            plan_version,
            int(applied),
            duration_s,
            json.dumps(observation, default=float),
            json.dumps(details, default=float),
        )
        return self._write("round", row)

    def record_plan(self, ts: float, plan: Plan, applied: bool) -> bool:
        """Store a plan the controller published (or recommended); False when it waits in
        ``pending`` (see ``record``)."""
        return self._write("plan", (plan.version, ts, int(applied), plan.to_json()))

    @property
    def pending(self) -> int:
        """Writes waiting for the log's write lock."""
        return len(self._pending)

    def flush(self, wait_s: float | None = None) -> bool:
        """Write what is pending (waiting up to ``wait_s`` for the lock); True when none is
        left. A pending write from an epoch that has been overtaken raises StaleEpochError."""
        with self._lock:
            return self._flush(wait_s)

    def discard_pending(self) -> int:
        """Drop the writes still waiting (a writer stepping down: they would be refused once
        its successor has written); how many there were."""
        with self._lock:
            n = len(self._pending)
            self._pending.clear()
            return n

    def _write(self, what: str, row: tuple[Any, ...]) -> bool:
        with self._lock:
            if len(self._pending) == self._pending.maxlen:
                self.dropped += 1
            self._pending.append((self.epoch, what, row))
            return self._flush(None)

    def _flush(self, wait_s: float | None) -> bool:
        if not self._pending:
            return True
        if wait_s is not None:
            self._db.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if is_busy(e):
                return False
            raise
        finally:
            if wait_s is not None:
                self._db.execute(f"PRAGMA busy_timeout = {int(self.wait_s * 1000)}")
        try:
            while self._pending:
                epoch, what, row = self._pending[0]
                if epoch is not None:
                    self._check_epoch(epoch)
                if what == "round":
                    self._insert_round(row)
                else:
                    self._db.execute("INSERT OR REPLACE INTO plans VALUES (?,?,?,?)", row)
                if epoch is not None:
                    self._db.execute(
                        "INSERT INTO fence VALUES (0, ?) ON CONFLICT(id) DO UPDATE SET "
                        "epoch = MAX(epoch, excluded.epoch)",
                        (epoch,),
                    )
                self._pending.popleft()
        except StaleEpochError:
            # what went before it stands; the refused epoch's writes go
            stale = self._pending[0][0]
            self._db.execute("COMMIT")
            self._pending = deque(
                (w for w in self._pending if w[0] != stale), maxlen=self._pending.maxlen
            )
            raise
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return True

    def _insert_round(self, row: tuple[Any, ...]) -> None:
        top = self._db.execute("SELECT MAX(round) FROM rounds").fetchone()[0]
        if top is not None and row[1] + self.round_shift <= top:
            self.round_shift = top + 1 - row[1]
        row = (row[0], row[1] + self.round_shift, *row[2:])
        self._db.execute(
            "INSERT INTO rounds (ts, round, kind, reason, plan_version, applied, duration_s, observation, details) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            row,
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

    def _check_epoch(self, epoch: int) -> None:
        """Refuse ``epoch`` (inside the write transaction) when this log has stored a newer
        epoch's write, or the lease has moved past it."""
        row = self._db.execute("SELECT epoch FROM fence").fetchone()
        if row is not None and int(row[0]) > epoch:
            raise StaleEpochError(
                f"epoch: write from controller epoch {epoch} refused; "
                f"controller epoch {row[0]} has written this log since"
            )
        self._check_lease(epoch)

    def _check_lease(self, epoch: int) -> None:
        lease = read_lease(lease_file(self.path))
        if lease is not None and lease.epoch > epoch:
            raise StaleEpochError(
                f"epoch: write from controller epoch {epoch} refused; "
                f"{lease.holder or 'another controller'} holds epoch {lease.epoch}"
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

    def last(self, n: int = 20, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The ``n`` most recent rounds, oldest first (an ``n`` past SQLite's integers: all);
        with ``kinds``, the most recent of the rounds whose kind is, or joins with ``+``, one
        of them (``place+shed`` is a ``place`` and a ``shed``)."""
        where, args = "", [f"%+{k}+%" for k in sorted(kinds or ())]
        if kinds is not None:
            where = "WHERE " + (" OR ".join(["('+' || kind || '+') LIKE ?"] * len(args)) or "0")
        rows = self._db.execute(
            "SELECT ts, round, kind, reason, plan_version, applied, duration_s, observation, details FROM rounds "
            f"{where} ORDER BY id DESC LIMIT ?",
            (*args, min(n, 2**63 - 1)),
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

    def last_change(self, kinds: Collection[str]) -> dict[str, Any] | None:
        """The newest round of ``kinds`` (the kinds that decide something) as a daemon's
        status shows it (``change_summary``), or None."""
        rows = self.last(1, kinds)
        return (
            change_summary(*(rows[0][k] for k in ("round", "ts", "kind", "reason")))
            if rows
            else None
        )

    def last_round(self) -> int:
        """The highest round number recorded (0 for an empty log)."""
        row = self._db.execute("SELECT MAX(round) FROM rounds").fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        """Rounds stored."""
        return int(self._db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])

    def close(self, wait_s: float | None = None) -> int:
        """Write what is pending (waiting up to ``wait_s``, by default the log's own wait) and
        close the database; the number of writes that could not go in."""
        with self._lock:
            left = 0
            if getattr(self, "_pending", None):  # a read-only log has none
                with contextlib.suppress(StaleEpochError):
                    self._flush(self.wait_s if wait_s is None else wait_s)
                left = len(self._pending)
            self._db.close()
            return left
