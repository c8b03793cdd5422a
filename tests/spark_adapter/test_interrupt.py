"""Ctrl-C on a Spark replay: the run stops once the batch in progress has committed and says
so in one line (exit 130). Before, PySpark's own handler cancelled the jobs from inside the
blocked py4j call: about a hundred lines of py4j and JVM traces, no line of trimtab's, and the
plan log closed under the batch still committing ("Cannot operate on a closed database")."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("group", [False, True], ids=["pid", "process-group"])
def test_sigterm_stops_a_spark_replay_the_same_way_and_removes_its_temporary_workdir(
    tmp_path: Path, group: bool
) -> None:
    """``kill PID`` (a job runner ending the command) killed a Spark replay at once: its
    temporary working directory (input log, plans, output) was left behind, and the JVM printed
    a NullPointerException trace as it shut down under the running query. SIGTERM now stops it
    as a Ctrl-C does, after a committed batch, exit 143; the directory is removed. Sent to the
    process group (as ``timeout`` does) it stopped Spark's JVM too: the run ended in
    "ConnectionRefusedError", exit 1, with the directory left, then (the error taken for the
    signal) in a line saying Spark stopped under the run, after the JVM's traces of its
    shutdown. The JVM now runs in a process group of its own: the run stops after a committed
    batch in both cases, the JVM untouched until the run stops it."""
    import os

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    exe = Path(sys.executable).with_name("trimtab")
    cmd = [exe, "replay", str(SCENARIOS / "seed-groupby-window.yaml"), "--substrate", "spark"]
    cmd += ["--batches", str(BATCHES)]
    env = {**os.environ, "TMPDIR": str(tmp)}
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=group,
    )
    try:
        deadline = time.monotonic() + 180
        while not list(tmp.glob("trimtab-spark-*/metrics/batch-00000002.json")):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        if group:
            os.killpg(p.pid, signal.SIGTERM)
        else:
            p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(r"error: interrupted: the run stopped once batch (\d+) had committed", last)
    assert "Exception" not in err, err[-3000:]  # no trace of a JVM stopped under the run
    assert m and 2 <= int(m.group(1)) < BATCHES - 1, err[-3000:]
    assert out == ""
    assert not list(tmp.glob("trimtab-spark-*")), list(tmp.iterdir())


def _interrupt(cmd: list, ready: Callable[[subprocess.Popen], bool]) -> tuple[int, str, list]:
    """Run ``cmd``, SIGINT it once ``ready(p)``; its exit code, stderr and JVM pids."""
    import psutil

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jvms: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not ready(p):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        jvms = [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert out == ""  # no summary of a run cut short
    return p.returncode, err, jvms


def test_ctrl_c_while_spark_starts_is_one_line(tmp_path: Path) -> None:
    """A Ctrl-C while the JVM starts: Python died in ``launch_gateway`` and the JVM printed a
    NoSuchFileException trace and lived on, orphaned (found still running 20 minutes later);
    a little later PySpark's handler fired inside a py4j call (two screens of py4j traces).
    Now the start-up finishes, the session stops, one line, exit 130, and the JVM is gone."""
    import psutil

    exe = Path(sys.executable).with_name("trimtab")
    cmd = [exe, "replay", str(SCENARIOS / "seed-groupby-window.yaml"), "--substrate", "spark"]
    cmd += ["--batches", "3", "--workdir", str(tmp_path / "w")]

    def jvm_starting(p: subprocess.Popen) -> bool:
        with contextlib.suppress(psutil.NoSuchProcess):
            return any("java" in c.name() for c in psutil.Process(p.pid).children(True))
        return False

    code, err, jvms = _interrupt(cmd, jvm_starting)
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err, err[-3000:]
    assert (
        err.strip().splitlines()[-1] == "error: interrupted while Spark was starting; nothing ran"
    )
    assert not (tmp_path / "w" / "planlog.sqlite").exists()  # nothing ran
    deadline = time.monotonic() + 20
    while any(psutil.pid_exists(j) for j in jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [j for j in jvms if psutil.pid_exists(j)], jvms


def test_ctrl_c_after_start_up_before_the_first_batch_is_one_line(tmp_path: Path) -> None:
    """Spark is up and the input written (``app.json`` published), the query not yet running:
    PySpark's handler used to fire inside whatever py4j call was blocked. Now the Ctrl-C is
    held to the next batch boundary: no batch, or the first only, committed; one line."""
    work = tmp_path / "w"
    exe = Path(sys.executable).with_name("trimtab")
    cmd = [exe, "replay", str(SCENARIOS / "seed-groupby-window.yaml"), "--substrate", "spark"]
    cmd += ["--batches", str(BATCHES), "--workdir", str(work)]
    code, err, _ = _interrupt(cmd, lambda p: (work / "app.json").exists())
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    before = last == "error: interrupted before the first batch ran"
    m = re.fullmatch(r"error: interrupted: the run stopped once batch (\d+) had committed", last)
    assert before or (m and int(m.group(1)) == 0), err[-3000:]
    committed = PlanLog(work / "planlog.sqlite").committed()
    assert committed == ([] if before else [0]), (last, committed)


def test_ctrl_c_on_a_standby_waiting_for_the_lease_is_one_line(tmp_path: Path) -> None:
    """A warm standby with no primary waits for the lease, following commits: a held Ctrl-C
    must be carried out in that wait (else it would wait on), in one line."""
    from controller.scenario import load_scenario
    from spark_adapter.source import InputLog

    sc_path, work = SCENARIOS / "seed-groupby-window.yaml", tmp_path / "w"
    InputLog(work / "input").generate(load_scenario(sc_path), 2, scale=0.1)
    exe = Path(sys.executable).with_name("trimtab")
    cmd = [exe, "pipeline", "run", str(sc_path), "--workdir", str(work), "--role", "standby"]
    cmd += ["--trigger-s", "2", "--default-plan"]
    code, err, _ = _interrupt(cmd, lambda p: (work / "_STANDBY_READY").exists())
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == "error: interrupted: the standby stopped waiting for the lease", err[-3000:]


def test_the_jvm_closing_its_accumulator_connection_prints_no_traceback(spark, capfd) -> None:  # type: ignore[no-untyped-def]
    """A driver stopped by SIGTERM printed PySpark's "Exception occurred during processing of
    request ... EOFError" traceback: the JVM closed its accumulator connection while the
    context shut down. The session's accumulator server now takes that end quietly, as
    socketserver calls its handler (from inside the except block); other errors still print."""
    server = spark.sparkContext._accumulatorServer
    for error, printed in ((EOFError(), False), (ValueError("bad token"), True)):
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 0))
        err = capfd.readouterr().err
        assert (type(error).__name__ in err) is printed, err
