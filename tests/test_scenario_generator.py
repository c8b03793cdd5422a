"""The shipped scenario files are what ``scenarios/make_scenarios.py`` writes: a file edited by
hand, a generator changed without regenerating, or a shipped file the generator does not know
fails here by name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import SCENARIOS


def test_the_generator_writes_every_shipped_scenario_as_committed(tmp_path: Path) -> None:
    script = SCENARIOS / "make_scenarios.py"
    r = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    shipped = {p.name for p in SCENARIOS.glob("*.yaml")}
    written = {p.name for p in tmp_path.glob("*.yaml")}
    assert written == shipped, (sorted(shipped - written), sorted(written - shipped))
    differ = [
        n for n in sorted(shipped) if (SCENARIOS / n).read_text() != (tmp_path / n).read_text()
    ]
    assert not differ, f"regenerate with python scenarios/make_scenarios.py: {differ}"


def test_the_generator_refuses_an_out_that_is_not_a_directory(tmp_path: Path) -> None:
    script = SCENARIOS / "make_scenarios.py"
    missing = tmp_path / "missing"
    r = subprocess.run(
        [sys.executable, str(script), "--out", str(missing)], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].endswith(f"--out: {missing} is not a directory")
    assert not missing.exists()
