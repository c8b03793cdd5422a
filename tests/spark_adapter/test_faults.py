"""The executor heartbeat rule on its own (no Spark: REST rows and real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from spark_adapter.faults import executor_alive


def test_a_local_executor_is_alive_while_its_process_runs() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        row = {"id": "1", "isActive": True, "activeTasks": 1}
        assert executor_alive(row, child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert not executor_alive(row, child.pid)  # stopped: no heartbeat
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.2)
        assert executor_alive(row, child.pid)
    finally:
        child.kill()
        child.wait()
    assert not executor_alive(row, child.pid)  # gone


def test_a_remote_executor_busy_with_one_long_task_is_not_suspected() -> None:
    busy = {"id": "2", "isActive": True, "activeTasks": 1, "completedTasks": 5}
    for _ in range(3):  # the same totals poll after poll: no visible progress
        assert executor_alive(busy, None)
    assert not executor_alive({**busy, "isActive": False}, None)  # Spark lost its heartbeats


def test_a_paused_process_resumes_after_the_injecting_process_has_exited(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`trimtab inject stop-executor --seconds S` exits at once; the resume must not die with
    it (a timer thread in the CLI process did, and the executor stayed stopped)."""
    import psutil

    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = f"from spark_adapter.faults import pause_process; pause_process({target.pid}, 1.5)"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)  # exits at once
        proc = psutil.Process(target.pid)
        assert proc.status() == psutil.STATUS_STOPPED
        deadline = time.monotonic() + 20
        while proc.status() == psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "never resumed"
            time.sleep(0.1)
        assert proc.status() in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING)
    finally:
        target.kill()
        target.wait()


def test_kill_driver_never_kills_a_process_that_took_the_drivers_pid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``app.json`` outlives its driver. A workdir whose driver exited long ago names a pid
    the system may have given to another process: ``inject kill-driver`` checks the pid's
    start time against the driver's and leaves another process alone."""
    import json

    import pytest

    from spark_adapter.faults import inject
    from spark_adapter.pids import process_start

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = process_start(child.pid)
        app = {"app_id": "app-1", "driver_pid": child.pid, "driver_started": started - 60}
        (tmp_path / "app.json").write_text(json.dumps(app))
        with pytest.raises(LookupError, match=f"pid {child.pid} is another process now"):
            inject("kill-driver", None, tmp_path)
        assert child.poll() is None  # still running
        (tmp_path / "app.json").write_text(json.dumps({**app, "driver_started": started}))
        assert inject("kill-driver", None, tmp_path) == {"killed_driver": child.pid}
        assert child.wait(10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
    with pytest.raises(LookupError, match="is not running"):
        inject("kill-driver", None, tmp_path)


def test_cluster_down_leaves_alone_a_process_that_took_a_recorded_pid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``.trimtab/cluster.json`` outlives its cluster (a reboot, a crash): ``cluster down``
    and ``status`` take a recorded pid for the cluster's only while its start time matches."""
    from spark_adapter.cluster import ClusterState, cluster_down, cluster_status
    from spark_adapter.pids import process_start

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        f = tmp_path / "cluster.json"
        state = ClusterState("spark://127.0.0.1:1", child.pid, 1)
        state.started[str(child.pid)] = process_start(child.pid) - 60  # an earlier process
        state.save(f)
        assert cluster_status(f)["up"] is False
        assert cluster_down(f, grace_s=1.0) == [] and child.poll() is None
        state.add(child.pid)
        state.save(f)
        assert cluster_down(f, grace_s=5.0) == [child.pid]
        assert process_start(child.pid) is None  # ended (and reaped: it is our child here)
    finally:
        child.kill()
        child.wait()


def test_executor_faults_on_an_application_that_ended_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A finished replay's workdir keeps its ``app.json``: an executor fault there names the
    application as ended, with no quoting of Python's, and ``lose-executor`` leaves no request
    behind that a later driver in the workdir would carry out."""
    import json

    from typer.testing import CliRunner

    from controller.cli import app as cli
    from spark_adapter.pids import process_start

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    app = {"app_id": "app-7", "driver_pid": child.pid, "driver_started": 1.0}
    (tmp_path / "app.json").write_text(json.dumps(app))
    for fault in ("kill-executor", "stop-executor", "lose-executor"):
        r = CliRunner().invoke(cli, ["inject", fault, "1", "--workdir", str(tmp_path)])
        assert r.exit_code == 1, r.output
        assert r.stderr == f"error: app-7 is not running: its driver {child.pid} has exited\n"
    assert not (tmp_path / "inject-lose").exists()
    # a running driver with no such executor: the message is the text, not a repr of it
    me = {**app, "driver_pid": os.getpid(), "driver_started": process_start(os.getpid())}
    (tmp_path / "app.json").write_text(json.dumps(me))
    r = CliRunner().invoke(cli, ["inject", "kill-executor", "9", "--workdir", str(tmp_path)])
    assert r.exit_code == 1 and r.stderr.startswith("error: executor: no executor '9'"), r.stderr


def test_every_fault_says_which_options_it_uses() -> None:
    """``trimtab inject`` refuses an option a fault would ignore by its table: a fault added
    without a row would fail with a KeyError instead of running."""
    from controller.cli.spark import _FAULT_USES
    from controller.leadership import CONTROLLER_FAULTS
    from spark_adapter.faults import FAULTS

    assert list(_FAULT_USES) == [*FAULTS, "silence-stream", *CONTROLLER_FAULTS]
