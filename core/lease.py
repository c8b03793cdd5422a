"""A time-limited, epoch-numbered lease in SQLite, and the fencing error its epochs raise.

One holder at a time. Taking a free or expired lease increments its epoch; the holder renews it
(a heartbeat) and loses it when a renewal comes after the expiry. The epoch is a fencing token
(Kleppmann, "How to do distributed locking", 2016): whatever a holder writes carries its
epoch, and a store that has seen epoch e refuses a write from an epoch below e, so a holder
that was paused across its expiry and wakes up cannot overwrite its successor's work.

Used by the Spark driver's warm standby (the lease in the working directory) and by the
controller's standby (the lease in a file beside the decision log).

A holder frozen inside one of the lease's own writes (SIGSTOP, a stalled disk) holds SQLite's
write lock for as long as it is frozen. The writes are single statements that never wait on
the disk (``synchronous=NORMAL`` under WAL), so that window is a few microseconds per renewal,
and no contender waits on it for long: ``acquire`` gives up after ``wait_s`` (the lease is
"held"), and ``renew`` answers from the expiry it last wrote itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.files import connect_read_only

__all__ = [
    "Lease",
    "LeaseState",
    "StaleEpochError",
    "holder_name",
    "is_busy",
    "lease_problem",
    "read_lease",
]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 0), "
    "epoch INTEGER, holder TEXT, expires REAL)"
)


class StaleEpochError(ValueError):
    """A write from a holder whose epoch is older than the store's."""


def holder_name(role: str = "controller") -> str:
    """``role:host:pid``, the name a process holds a lease under.

    >>> holder_name("driver").split(":")[0]
    'driver'
    """
    return f"{role}:{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class LeaseState:
    """The lease as stored: its epoch, holder and expiry (seconds since the epoch)."""

    epoch: int
    holder: str
    expires: float

    @property
    def pid(self) -> int | None:
        """The holder's process id, when its name is ``role:host:pid``.

        >>> LeaseState(3, "controller:box:4242", 0.0).pid
        4242
        >>> LeaseState(0, "", 0.0).pid is None
        True
        """
        tail = self.holder.rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else None

    @property
    def host(self) -> str:
        """The holder's host name ('' when the name has no host part)."""
        parts = self.holder.split(":")
        return parts[1] if len(parts) == 3 else ""

    def held(self, now: float | None = None) -> bool:
        """True while some holder has it and it has not expired."""
        return bool(self.holder) and self.expires > (time.time() if now is None else now)


class Lease:
    """A time-limited, epoch-numbered lease in a SQLite file (one holder at a time).

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "l.sqlite"
    >>> a, b = Lease(f, ttl_s=5), Lease(f, ttl_s=5)
    >>> a.acquire("a", now=100.0), b.acquire("b", now=101.0)
    (1, None)
    >>> a.renew("a", 1, now=104.0), b.acquire("b", now=110.0), a.renew("a", 1, now=110.5)
    (True, 2, False)
    """

    def __init__(self, path: str | Path, ttl_s: float = 3.0, wait_s: float | None = None) -> None:
        self.path = Path(path)
        self.ttl_s = ttl_s
        # how long a write waits for another process's write lock (a quarter of the lease by
        # default, at most 1 s); a healthy holder keeps it for microseconds
        self.wait_s = min(1.0, ttl_s / 4) if wait_s is None else wait_s
        self._db = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=10
        )
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError):  # busy or locked: not the file's fault
                raise
            self._db.close()
            raise ValueError(f"{self.path}: not a trimtab lease file ({e})") from None
        self._db.execute(_SCHEMA)
        if self._db.execute("SELECT COUNT(*) FROM lease").fetchone()[0] == 0:
            self._db.execute("INSERT OR IGNORE INTO lease VALUES (0, 0, '', 0)")
        self._db.execute(f"PRAGMA busy_timeout = {int(self.wait_s * 1000)}")
        # no fsync per commit: a power loss can only undo the last writes, and it also ends
        # every process that could hold them (the lease is one host's)
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._lock = threading.Lock()
        self._granted: dict[tuple[str, int], float] = {}  # the expiry this object last wrote

    def acquire(self, holder: str, now: float | None = None, min_epoch: int = 0) -> int | None:
        """Take the lease if it is free, expired or already ``holder``'s; the new epoch (the
        next one, or ``min_epoch`` when that is higher), or None."""
        now = time.time() if now is None else now
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if is_busy(e):  # another process is inside a write (or frozen there): held
                    return None
                raise
            epoch, owner, expires = self._db.execute(
                "SELECT epoch, holder, expires FROM lease"
            ).fetchone()
            if owner and expires > now and owner != holder:
                self._db.execute("ROLLBACK")
                return None
            new = int(max(epoch + 1, min_epoch))
            self._db.execute(
                "UPDATE lease SET epoch=?, holder=?, expires=?", (new, holder, now + self.ttl_s)
            )
            self._db.execute("COMMIT")
            self._granted = {(holder, new): now + self.ttl_s}
            return new

    def renew(self, holder: str, epoch: int, now: float | None = None) -> bool:
        """Extend the lease while ``holder`` still owns ``epoch`` and it has not expired.

        When another process holds the write lock past ``wait_s``, the answer is whether the
        expiry this object last wrote is still ahead: no one can take the lease before it."""
        now = time.time() if now is None else now
        with self._lock:
            try:
                cur = self._db.execute(
                    "UPDATE lease SET expires=? WHERE holder=? AND epoch=? AND expires>?",
                    (now + self.ttl_s, holder, epoch, now),
                )
            except sqlite3.OperationalError as e:
                if not is_busy(e):
                    raise
                return self._granted.get((holder, epoch), 0.0) > now
            if cur.rowcount == 1:
                self._granted = {(holder, epoch): now + self.ttl_s}
                return True
            self._granted.pop((holder, epoch), None)
            return False

    def release(self, holder: str, epoch: int) -> bool:
        """Give the lease up at once (a clean stop), keeping the epoch; False if not held
        (or another process holds the write lock: the lease then runs out by itself)."""
        with self._lock:
            self._granted.pop((holder, epoch), None)
            try:
                cur = self._db.execute(
                    "UPDATE lease SET expires=0 WHERE holder=? AND epoch=?", (holder, epoch)
                )
            except sqlite3.OperationalError as e:
                if not is_busy(e):
                    raise
                return False
            return cur.rowcount == 1

    def valid(self, epoch: int, now: float | None = None) -> bool:
        """True while ``epoch`` is the current, unexpired lease."""
        st = self.state()
        return st.epoch == epoch and st.expires > (time.time() if now is None else now)

    def state(self) -> LeaseState:
        """The lease as stored now."""
        with self._lock:
            e, h, x = self._db.execute("SELECT epoch, holder, expires FROM lease").fetchone()
        return LeaseState(int(e), str(h), float(x))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def is_busy(e: sqlite3.OperationalError) -> bool:
    """True for SQLite's "database is locked" (another connection holds the write lock)."""
    return "locked" in str(e) or "busy" in str(e)


def lease_problem(path: str | Path) -> str | None:
    """Why the file at ``path`` cannot hold a lease (None: it can, or is not there yet):
    another file, or a database without trimtab's lease table. Read-only.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "x.lease"
    >>> lease_problem(f) is None
    True
    >>> _ = f.write_text("garbage")
    >>> lease_problem(f)
    '... is not a trimtab lease file (file is not a database)'
    """
    p = Path(path)
    if not p.exists():
        return None
    if not p.is_file():
        return f"{p} is not a file"
    try:
        with contextlib.closing(connect_read_only(p)) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as e:
        return f"{p} is not a trimtab lease file ({e})"
    if tables and "lease" not in tables:
        return f"{p} is not a trimtab lease file (it has no lease table)"
    return None


def read_lease(path: str | Path, leave_no_files: bool = False) -> LeaseState | None:
    """The lease stored in ``path``, read-only; None if the file holds none (never writes it;
    ``leave_no_files``: nor creates the files SQLite keeps beside it, for a read-only
    command, ``files.connect_read_only``).

    >>> import tempfile
    >>> read_lease(Path(tempfile.mkdtemp()) / "missing.sqlite") is None
    True
    """
    p = Path(path)
    if not p.exists():
        return None
    with contextlib.closing(connect_read_only(p, leave_no_files=leave_no_files)) as db:
        try:
            row = db.execute("SELECT epoch, holder, expires FROM lease").fetchone()
        except sqlite3.DatabaseError:
            return None
    return None if row is None else LeaseState(int(row[0]), str(row[1]), float(row[2]))
