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
