"""The versioned plan store and the per-batch plan log.

``PlanStore``: immutable plan versions ``plans/v000042.json`` plus a ``current`` pointer, each
written to a temporary file, fsynced and ``os.replace``d (atomic on POSIX), so a reader sees the
old or the new version, never half of one. Published versions are never edited. Publishing
holds an exclusive lock on the store and refuses a plan from an older controller epoch than the
current plan's (fencing: a controller paused across its lease's expiry cannot publish).

``PlanLog``: SQLite, ``batch_id -> (plan version, watermarks)``. ``resolve`` pins a batch to the
current plan on its first execution and returns the pinned entry on every replay, so a
replayed micro-batch routes, drops and closes windows exactly as the first attempt did. It also
records committed batches and state snapshots (for recovery and input-log trimming).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from core.files import connect_read_only
from core.lease import StaleEpochError
from core.plans import Plan
from core.scenario import format_validation_error

__all__ = ["BatchPin", "PinRow", "PlanLog", "PlanStore", "atomic_write", "retire_plans"]


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PlanStore:
    """Immutable plan versions behind an atomically replaced ``current`` pointer."""

    CACHED = 256  # published versions never change, so recent loads are kept

    def __init__(self, root: str | Path, read_only: bool = False) -> None:
        self.root = Path(root)
        if not read_only:  # a reader (``pipeline verify``) creates nothing
            self.root.mkdir(parents=True, exist_ok=True)
        self._cache: dict[int, Plan] = {}

    def _path(self, version: int) -> Path:
        return self.root / f"v{version:06d}.json"

    def has(self, version: int) -> bool:
        """Is ``version`` still stored (not retired)?"""
        return self._path(version).exists()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive among the store's writers (processes included) for check-then-write."""
        with open(self.root / ".lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def publish(self, plan: Plan) -> int:
        """Write ``plan`` as its version (refusing to overwrite, and refusing a plan from an
        older controller epoch than the current plan's) and point ``current`` at it."""
        with self._locked():
            self._fence(plan)
            self._write(plan)
        return plan.version

    def _fence(self, plan: Plan) -> None:
        v = self.current_version()
        if v is not None and (cur := self.load(v)).epoch > plan.epoch:
            raise StaleEpochError(
                f"epoch: plan v{plan.version} from controller epoch {plan.epoch} refused; "
                f"the store's current plan v{v} is from epoch {cur.epoch}"
            )

    def _write(self, plan: Plan) -> None:
        p = self._path(plan.version)
        if p.exists():
            if Plan.from_json(p.read_bytes()) != plan:
                raise ValueError(
                    f"version: plan version {plan.version} is already published with other content"
                )
        else:
            atomic_write(p, plan.to_json().encode())
        atomic_write(self.root / "current", str(plan.version).encode())

    def publish_next(self, plan: Plan) -> Plan:
        """Publish a controller's ``plan`` after whatever is current: renumbered past another
        writer's newer version, and carrying the current plan's operator parameters (those
        are the user's, ``trimtab publish-operator``; the controller never sets them)."""
        with self._locked():
            self._fence(plan)
            v = self.current_version()
            if v is not None:
                cur = self.load(v)
                update: dict[str, Any] = {}
                if cur.operators != plan.operators:
                    update["operators"] = cur.operators
                if v >= plan.version and cur != plan:
                    update["version"] = v + 1
                if update:
                    plan = plan.model_copy(update=update)
            self._write(plan)
        return plan

    def current_version(self) -> int | None:
        """The version ``current`` points at, or None before the first publish."""
        c = self.root / "current"
        if not c.exists():
            return None
        text = c.read_text(errors="replace").strip()
        if not text.isdigit():
            raise ValueError(f"{c}: not a plan version (it reads {text[:40]!r})")
        return int(text)

    def load(self, version: int) -> Plan:
        """A published version."""
        if version in self._cache:
            return self._cache[version]
        p = self._path(version)
        if not p.exists():
            raise KeyError(f"plan version {version} is not in {self.root}")
        try:
            plan = Plan.from_json(p.read_bytes())
        except ValidationError as e:
            raise ValueError(f"{p}: not a trimtab plan ({format_validation_error(e)[0]})") from None
        if len(self._cache) >= self.CACHED:
            self._cache.pop(next(iter(self._cache)))
        self._cache[version] = plan
        return plan

    def load_current(self) -> Plan:
        """The current plan."""
        v = self.current_version()
        if v is None:
            raise KeyError(f"no plan published in {self.root}")
        return self.load(v)

    def trim(self, below: int) -> int:
        """Remove the published versions before ``below``, never the current one; the number
        removed. Only the pipeline knows which versions a replay or a restore still needs
        (``retire_plans``)."""
        removed = 0
        with self._locked():
            cur = self.current_version()
            for p in self.root.glob("v*.json"):
                v = int(p.stem[1:])
                if v < below and v != cur:
                    p.unlink(missing_ok=True)
                    self._cache.pop(v, None)
                    removed += 1
        return removed


@dataclass(frozen=True)
class BatchPin:
    """What a batch was pinned to on its first execution."""

    batch_id: int
    plan_version: int
    watermark_prev: float
    watermark: float
    replay: bool
    tentative: tuple[float, float] = (-math.inf, -math.inf)  # DPC: (previous, this batch's)


class PinRow(NamedTuple):
    """One pin of the plan log: the plan and the watermarks a batch was first run with."""

    batch_id: int
    plan_version: int
    wm_prev: float
    wm: float


class PlanLog:
    """SQLite log of batch pins, commits and state snapshots."""

    def __init__(self, path: str | Path, read_only: bool = False, polled: bool = False) -> None:
        """``read_only``: an existing log, nothing written or created beside it unless
        ``polled`` (a reader that reads it again and again while a driver may start writing:
        ``files.connect_read_only``)."""
        self.path = Path(path)
        try:
            self._open(read_only, polled)
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError):  # busy or locked: not the file's fault
                raise
            raise ValueError(f"{self.path}: not a trimtab plan log ({e})") from None

    def _open(self, read_only: bool, polled: bool) -> None:
        if read_only:  # an existing log, opened so that nothing is written or created
            self._db = connect_read_only(self.path, leave_no_files=not polled)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
            # a database without the log's tables (an empty file, another SQLite file) read
            # as "OperationalError: no such table: commits", exit 1; a polled reader may find
            # a log its driver is creating
            if not polled and (missing := sorted({"pins", "commits"} - tables)):
                self._db.close()
                raise ValueError(f"{self.path}: not a trimtab plan log (no {missing[0]} table)")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS pins (batch_id INTEGER PRIMARY KEY, plan_version INTEGER NOT NULL,
                                             wm_prev REAL NOT NULL, wm REAL NOT NULL, twm REAL);
            CREATE TABLE IF NOT EXISTS commits (batch_id INTEGER PRIMARY KEY, rows_out INTEGER, info TEXT);
            CREATE TABLE IF NOT EXISTS snapshots (batch_id INTEGER PRIMARY KEY, path TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
            """
        )
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(pins)")}
        if "twm" not in cols:  # a log from before DPC: tentative = stable
            self._db.execute("ALTER TABLE pins ADD COLUMN twm REAL")

    def resolve(
        self,
        batch_id: int,
        plans: PlanStore,
        watermark: float,
        tentative: float | None = None,
        choose: Callable[[], Plan] | None = None,
    ) -> tuple[Plan, BatchPin]:
        """The pinned plan and watermarks for ``batch_id``; pins the current ones on first sight.

        ``watermark`` is the stable watermark, ``tentative`` DPC's (``spark_adapter.dpc``;
        default: the stable one). Both are pinned and never go back. ``choose`` picks the plan
        a new pin takes (default: the store's current one; ``plan_fit.PlanGuard`` refuses a
        plan the pipeline cannot run).
        """
        row = self._db.execute(
            "SELECT plan_version, wm_prev, wm, COALESCE(twm, wm) FROM pins WHERE batch_id=?",
            (batch_id,),
        ).fetchone()
        prev = self._db.execute(
            "SELECT wm, COALESCE(twm, wm) FROM pins WHERE batch_id<? ORDER BY batch_id DESC "
            "LIMIT 1",
            (batch_id,),
        ).fetchone()
        twm_prev = prev[1] if prev else -math.inf
        if row is not None:
            pin = BatchPin(batch_id, row[0], row[1], row[2], True, (twm_prev, row[3]))
            return plans.load(row[0]), pin
        wm_prev = prev[0] if prev else float("-inf")
        wm = max(watermark, wm_prev)
        twm = max(wm, twm_prev, watermark if tentative is None else tentative)
        plan = choose() if choose is not None else plans.load_current()
        self._db.execute(
            "INSERT INTO pins (batch_id, plan_version, wm_prev, wm, twm) VALUES (?,?,?,?,?)",
            (batch_id, plan.version, wm_prev, wm, twm),
        )
        return plan, BatchPin(batch_id, plan.version, wm_prev, wm, False, (twm_prev, twm))

    def pin_rows(self) -> list[PinRow]:
        """All pins, in batch order."""
        return [
            PinRow(int(b), int(v), float(a), float(w))
            for b, v, a, w in self._db.execute(
                "SELECT batch_id, plan_version, wm_prev, wm FROM pins ORDER BY batch_id"
            )
        ]

    def last_pinned_version(self) -> int | None:
        """The plan version of the newest pin (None: nothing is pinned)."""
        row = self._db.execute(
            "SELECT plan_version FROM pins ORDER BY batch_id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else int(row[0])

    def pin_of(self, batch_id: int) -> int | None:
        """The plan version pinned for ``batch_id``."""
        row = self._db.execute(
            "SELECT plan_version FROM pins WHERE batch_id=?", (batch_id,)
        ).fetchone()
        return None if row is None else int(row[0])

    def pins(self) -> list[tuple[int, int]]:
        """All (batch id, plan version) pins, in batch order."""
        return [
            (int(b), int(v))
            for b, v in self._db.execute(
                "SELECT batch_id, plan_version FROM pins ORDER BY batch_id"
            )
        ]

    def commit(self, batch_id: int, rows_out: int, info: dict[str, object] | None = None) -> None:
        """Record that ``batch_id``'s output is written (idempotent)."""
        self._db.execute(
            "INSERT OR REPLACE INTO commits VALUES (?,?,?)",
            (batch_id, rows_out, json.dumps(info or {})),
        )

    def commit_infos(self) -> dict[int, dict[str, Any]]:
        """The info recorded with each commit (event range, plan version, keeps), by batch."""
        return {
            int(b): json.loads(i or "{}")
            for b, i in self._db.execute("SELECT batch_id, info FROM commits")
        }

    def committed_rows(self) -> list[tuple[int, int]]:
        """(batch, output rows) of every commit."""
        return [
            (int(b), int(r or 0))
            for b, r in self._db.execute("SELECT batch_id, rows_out FROM commits ORDER BY batch_id")
        ]

    def copy_pin(self, batch_id: int, version: int, wm_prev: float, wm: float, twm: float) -> None:
        """Pin a batch as another driver pinned it (an active standby following the primary)."""
        self._db.execute(
            "INSERT OR IGNORE INTO pins (batch_id, plan_version, wm_prev, wm, twm) "
            "VALUES (?,?,?,?,?)",
            (batch_id, version, wm_prev, wm, twm),
        )

    def ended_at(self) -> int | None:
        """The committed batch that closed every window (its watermark infinite: the end of
        a batch run, or of a live one whose log was closed), if one did: the stream ended."""
        row = self._db.execute(
            "SELECT MAX(batch_id) FROM pins JOIN commits USING (batch_id) WHERE pins.wm = ?",
            (math.inf,),
        ).fetchone()
        return None if row[0] is None else int(row[0])

    def committed(self) -> list[int]:
        """Committed batch ids, ascending."""
        return [
            int(r[0]) for r in self._db.execute("SELECT batch_id FROM commits ORDER BY batch_id")
        ]

    def record_snapshot(self, batch_id: int, path: str) -> None:
        """A state snapshot taken after ``batch_id``."""
        self._db.execute("INSERT OR REPLACE INTO snapshots VALUES (?,?)", (batch_id, path))

    def snapshots(self) -> list[tuple[int, str]]:
        """Every recorded snapshot as (batch id, path), in batch order."""
        rows = self._db.execute("SELECT batch_id, path FROM snapshots ORDER BY batch_id")
        return [(int(b), str(p)) for b, p in rows]

    def oldest_needed_version(self, current: int) -> int | None:
        """The oldest plan version a restore or a replay can still load: the oldest pinned by a
        batch after the newest snapshot (a restore refolds those), else ``current`` (the next
        batch pins it or a newer one); None without a snapshot (then a restore refolds from
        batch 0 and every version is needed)."""
        snap = self.latest_snapshot()
        if snap is None:
            return None
        row = self._db.execute(
            "SELECT MIN(plan_version) FROM pins WHERE batch_id > ?", (snap[0],)
        ).fetchone()
        return current if row is None or row[0] is None else min(int(row[0]), current)

    def latest_snapshot(self, at_most: int | None = None) -> tuple[int, str] | None:
        """The newest snapshot at or before ``at_most``."""
        q = "SELECT batch_id, path FROM snapshots"
        args: tuple[int, ...] = ()
        if at_most is not None:
            q += " WHERE batch_id<=?"
            args = (at_most,)
        row = self._db.execute(q + " ORDER BY batch_id DESC LIMIT 1", args).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def set_meta(self, key: str, value: str) -> None:
        """Store a small setting (e.g. the fencing epoch)."""
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", (key, value))

    def get_meta(self, key: str) -> str | None:
        """Read a small setting."""
        row = self._db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def retire_plans(log: PlanLog, plans: PlanStore, keep: int = 1000) -> int:
    """Remove the plan versions no restore or replay can load any more (before the oldest pinned
    by a batch after the newest snapshot) and not among the newest ``keep`` (a reference check
    over recent batches still finds theirs), so a months-long run's plan store stays bounded;
    the number removed. Without a snapshot nothing is removed."""
    cur = plans.current_version()
    oldest = None if cur is None else log.oldest_needed_version(cur)
    if oldest is None or cur is None:
        return 0
    return plans.trim(min(oldest, cur - keep + 1))


def pipeline_ended(workdir: Path, polled: bool = False) -> int | None:
    """The batch that ended the pipeline in ``workdir`` (``PlanLog.ended_at``), or None (not
    ended, or no plan log yet); reads only (``polled``: see ``PlanLog``). ``ValueError`` for a
    file that is no plan log."""
    f = workdir / "planlog.sqlite"
    if not f.is_file():
        return None
    log = PlanLog(f, read_only=True, polled=polled)
    try:
        return log.ended_at()
    finally:
        log.close()
