"""One wording for a path that should name a readable file and does not, and a read of an
SQLite file (a decision log, a lease, a plan log) that writes nothing beside it."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def file_problem(path: Path, named: bool = True) -> str | None:
    """Why ``path`` is not a file to read (missing, a directory, a device or pipe), or None
    when it is one; the path leads the reason unless ``named`` is False (the caller names it).

    >>> file_problem(Path("/dev/zero")), file_problem(Path("/dev/zero"), named=False)
    ('/dev/zero is not a regular file', 'not a regular file (a device or a pipe)')
    """
    if path.is_file():
        return None
    if path.is_dir():
        return f"{path} is a directory, not a file" if named else "a directory, not a file"
    if path.exists():
        return (
            f"{path} is not a regular file" if named else "not a regular file (a device or a pipe)"
        )
    return f"file not found: {path}" if named else "file not found"


def read_text(path: Path) -> tuple[str | None, str | None]:
    """The file's text and None, or None and why it is not a text file to read:
    ``file_problem`` (the caller names the path), or not UTF-8 (a binary given for a YAML
    file). UTF-16 with its byte-order mark reads too (``text_encoding``).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".yaml") as f:
    ...     _ = f.write(b"name: \\xf0\\x28")
    ...     f.flush()
    ...     read_text(Path(f.name))
    (None, 'not a UTF-8 text file (byte 6 is not UTF-8)')
    """
    if (problem := file_problem(path, named=False)) is not None:
        return None, problem
    try:
        return path.read_text(encoding=(enc := text_encoding(path))), None
    except UnicodeDecodeError as e:
        kind = "UTF-16" if enc == "utf-16" else "UTF-8"
        return None, f"not a {kind} text file (byte {e.start} is not {kind})"


def text_encoding(path: Path) -> str:
    """The encoding to read a text file written by another tool with: ``utf-16`` when it
    starts with a UTF-16 byte-order mark (Windows PowerShell's ``>`` and "Unicode text"
    exports), else ``utf-8-sig`` (UTF-8, a leading byte-order mark dropped, as a
    spreadsheet's "CSV UTF-8" writes it).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write("t_s,rate".encode("utf-16"))
    ...     f.flush()
    ...     text_encoding(Path(f.name))
    'utf-16'
    """
    with path.open("rb") as f:
        head = f.read(2)
    return "utf-16" if head in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"


def connect_read_only(
    path: Path, timeout: float = 10.0, leave_no_files: bool = True
) -> sqlite3.Connection:
    """An existing SQLite database opened for reading only.

    SQLite's read-only mode still creates a WAL database's ``-wal`` and ``-shm`` files beside
    it when they are missing, i.e. when no process has the database open. With
    ``leave_no_files`` (a read-only command: ``status``, ``decisions``, ``validate``) such a
    database is opened immutable, which creates nothing; if a writer opened it meanwhile and
    the immutable read fails, it is read again the usual way. A ``-wal`` file present means a
    writer has it open: the reader then shares the writer's ``-shm``, as a reader polling in a
    protocol (``leave_no_files=False``) always does.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> with sqlite3.connect(d / "x.sqlite") as w:
    ...     _ = w.execute("PRAGMA journal_mode=WAL").fetchone()
    ...     _ = w.execute("CREATE TABLE t (a)")
    >>> w.close()
    >>> db = connect_read_only(d / "x.sqlite")
    >>> db.execute("SELECT count(*) FROM t").fetchone(), sorted(p.name for p in d.iterdir())
    ((0,), ['x.sqlite'])
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if leave_no_files and not path.with_name(path.name + "-wal").exists():
        db = sqlite3.connect(
            uri + "&immutable=1", uri=True, timeout=timeout, check_same_thread=False
        )
        try:
            db.execute("SELECT name FROM sqlite_master").fetchall()
            return db
        except sqlite3.DatabaseError:
            db.close()  # another file (the caller's read names it), or a writer started
    return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
