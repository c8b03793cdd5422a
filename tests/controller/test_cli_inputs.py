"""What a user's bad input gets: one line, the right exit code, and no file touched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SCENARIOS

EXE = str(Path(sys.executable).parent / "trimtab")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_decisions_never_writes_a_file_that_is_not_its_own(tmp_path: Path) -> None:
    foreign = tmp_path / "other.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.close()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for f in (foreign, empty):
        before = _digest(f)
        r = _run("decisions", "--decision-log", str(f))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().count("\n") == 0 and "not a trimtab decision log" in r.stderr
        assert "Traceback" not in r.stderr
        assert _digest(f) == before  # not a byte changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "other.sqlite"]


def test_zero_ticks_is_refused() -> None:
    r = _run("replay", str(SCENARIOS / "seed-shedding-2node.yaml"), "--ticks", "0", "--json")
    assert r.returncode == 2 and "ticks" in r.stderr
