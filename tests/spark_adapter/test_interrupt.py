"""Ctrl-C on a Spark replay: the run stops once the batch in progress has committed and says
so in one line (exit 130). Before, PySpark's own handler cancelled the jobs from inside the
blocked py4j call: about a hundred lines of py4j and JVM traces, no line of trimtab's, and the
plan log closed under the batch still committing ("Cannot operate on a closed database")."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from spark_adapter.actuator import PlanLog
from tests.conftest import SCENARIOS

BATCHES = 30


def test_ctrl_c_stops_a_spark_replay_after_a_committed_batch(tmp_path: Path) -> None:
    work = tmp_path / "w"
    exe = Path(sys.executable).with_name("trimtab")
    cmd = [exe, "replay", str(SCENARIOS / "seed-groupby-window.yaml"), "--substrate", "spark"]
    cmd += ["--batches", str(BATCHES), "--workdir", str(work)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (work / "metrics" / "batch-00000002.json").exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(r"error: interrupted: the run stopped once batch (\d+) had committed", last)
    assert m, err[-3000:]
    assert out == ""  # no summary of a run cut short
    stopped = int(m.group(1))
    committed = PlanLog(work / "planlog.sqlite").committed()
    # the batches up to the one named, each committed once; none after it started
    assert committed == list(range(stopped + 1)), committed
    assert 2 <= stopped < BATCHES - 1, stopped
    written = sorted(int(d.name.split("=")[1]) for d in (work / "output").glob("batch=*"))
    assert written == committed, written
