"""Fault injection against a running Spark application, and executor failure detection.

Executors are found by pid: a ``CoarseGrainedExecutorBackend`` process whose command line has
``--executor-id <id>`` (with the trailing space, so 1 does not match 10) and the application
id. Nothing is found or killed by name.

* ``kill_executor``: ``SIGKILL`` (crashed, the cluster manager starts a replacement);
* ``lose_executor``: ``killExecutor`` through the SparkContext (gone for good: it lowers the
  target executor count, so no replacement comes);
* ``stop_executor``: ``SIGSTOP`` for some seconds, then ``SIGCONT`` (a straggler or GC pause).

``ExecutorMonitor`` feeds the pure ``ha.detector.FailureDetector`` from REST polls: an
executor that is listed active and has made progress (or has nothing to do) heartbeats. One
that stays silent past the failure timeout is declared failed and fenced: ended by pid when its
process is on this machine (a stopped process cannot act on a polite request), through
``killExecutor`` otherwise, so its tasks are rescheduled at once, long before Spark's network
timeout. A replacement that joins after an executor was lost or fenced is warmed by a small
job before batches need it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from core.cluster import NodeStatus
from ha.detector import FailureDetector, Transition
from spark_adapter.executor_pool import warm_up
from spark_adapter.metrics import RestPoller
from spark_adapter.pids import process_start, same_process

__all__ = [
    "FAULTS",
    "ExecutorMonitor",
    "executor_alive",
    "executor_pids",
    "inject",
    "kill_executor",
    "lose_executor",
    "pause_process",
    "publish_app",
    "serve_lose_requests",
    "stop_executor",
    "watching",
]


def executor_pids(app_id: str) -> dict[str, int]:
    """Executor id -> pid for the executors of ``app_id`` on this machine."""
    out: dict[str, int] = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "CoarseGrainedExecutorBackend" not in cmd or app_id not in cmd:
            continue
        parts = (cmd + " ").split("--executor-id ")
        if len(parts) > 1:
            out[parts[1].split(" ")[0]] = int(p.info["pid"])
    return out


def _pid(app_id: str, executor_id: str) -> int:
    pids = executor_pids(app_id)
    if executor_id not in pids:
        raise LookupError(
            f"executor: no executor {executor_id!r} of {app_id} on this machine (have {sorted(pids)})"
        )
    return pids[executor_id]


def kill_executor(app_id: str, executor_id: str) -> int:
    """``kill -9`` one executor; returns its pid."""
    pid = _pid(app_id, executor_id)
    os.kill(pid, signal.SIGKILL)
    return pid


def lose_executor(spark: Any, executor_id: str) -> bool:
    """Remove an executor for good (no replacement)."""
    return bool(spark.sparkContext._jsc.sc().killExecutor(executor_id))


def stop_executor(app_id: str, executor_id: str, seconds: float) -> int:
    """``SIGSTOP`` an executor and ``SIGCONT`` it after ``seconds`` (``pause_process``)."""
    pid = _pid(app_id, executor_id)
    pause_process(pid, seconds)
    return pid


def pause_process(pid: int, seconds: float) -> int:
    """``SIGSTOP`` ``pid`` now and ``SIGCONT`` it after ``seconds``, from a detached helper
    process (its own session), so the resume happens even when the caller exits at once, as
    ``trimtab inject`` does. Returns the helper's pid."""
    if not seconds > 0:
        raise ValueError(f"seconds: must be > 0, got {seconds}")
    os.kill(pid, signal.SIGSTOP)
    code = (
        "import os, signal, time\n"
        f"time.sleep({float(seconds)!r})\n"
        "try:\n"
        f"    os.kill({int(pid)}, signal.SIGCONT)\n"
        "except ProcessLookupError:\n"
        "    pass\n"
    )
    helper = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return helper.pid


class ExecutorMonitor:
    """REST-fed failure detection for executors, with fencing of failed ones."""

    def __init__(
        self,
        spark: Any,
        suspect_s: float = 2.0,
        fail_s: float = 4.0,
        fence: bool = True,
        warm: bool = True,
    ) -> None:
        self.spark = spark
        self.rest = RestPoller(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId)
        self.fence = fence
        self.detector: FailureDetector | None = None
        self.transitions: list[Transition] = []
        # each fencing: the executor, when (wall clock), and how long it had been silent
        self.fencings: list[dict[str, Any]] = []
        self.lost: set[str] = set()  # executors Spark lists as gone (not released)
        self.warmed: list[dict[str, Any]] = []  # replacement executors warmed, and how long
        self.warm = warm
        self.errors: list[str] = []  # polls that failed (``watching``)
        self.suspect_s, self.fail_s = suspect_s, fail_s

    def poll(self, now: float | None = None) -> list[Transition]:
        """One poll: heartbeats for live executors; fence the failed (never the last one).

        An executor's heartbeat is ``executor_alive``: its process on this machine, Spark's own
        liveness for executors elsewhere.
        """
        now = time.monotonic() if now is None else now
        raw = [e for e in self.rest._get("/allexecutors") if e["id"] != "driver"]
        pids = executor_pids(self.spark.sparkContext.applicationId)
        if self.detector is None:
            self.detector = FailureDetector(
                [e["id"] for e in raw], self.suspect_s, self.fail_s, now
            )
        for e in raw:
            eid = e["id"]
            if released(e):  # the application let it go (scale-in): not a failure
                for table in (self.detector.last, self.detector.status, self.detector.epoch):
                    table.pop(eid, None)
                continue
            if eid not in self.detector.last:  # a replacement executor joined
                self.detector.last[eid] = now
                self.detector.status[eid] = NodeStatus.UP
                self.detector.epoch[eid] = 0
                if self.warm and (self.fenced or self.lost):  # a replacement, not a start
                    threading.Thread(target=self._warm, args=(eid,), daemon=True).start()
            if not e.get("isActive", True):
                self.lost.add(eid)
            if executor_alive(e, pids.get(eid)):
                self.detector.heartbeat(eid, now)
        tr = self.detector.check(now)
        for t in tr:
            if t.new is NodeStatus.DOWN and self.fence and t.node not in self.fenced:
                live = [
                    x
                    for x, st in self.detector.status.items()
                    if st is NodeStatus.UP and x not in self.fenced
                ]
                if live:  # fencing the last executor would stop the application
                    self._fence(t.node, pids.get(t.node), now - self.detector.last[t.node])
        self.transitions += tr
        return tr

    @property
    def fenced(self) -> list[str]:
        """The executors fenced, in order."""
        return [f["executor"] for f in self.fencings]

    def report(self) -> dict[str, list[Any]]:
        """What a run reports of its executors: those fenced, each fencing (when, and how long
        the executor had been silent), and the replacements warmed."""
        return {
            "executors_fenced": self.fenced,
            "executor_fencings": list(self.fencings),
            "executors_warmed": list(self.warmed),
        }

    def _fence(self, executor_id: str, pid: int | None, silent_s: float) -> None:
        """End a failed executor: by pid when it runs on this machine (SIGKILL: a stopped
        process cannot act on a polite request, and the cluster manager reports the exit at
        once and starts a replacement); through Spark otherwise (``killExecutor``). Asking
        Spark first for a local one delayed its tasks' rescheduling by about 5 s: the driver
        then waited for the kill it had asked for, not for the exit it could see."""
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        else:
            with contextlib.suppress(Exception):
                lose_executor(self.spark, executor_id)
        self.fencings.append(
            {"executor": executor_id, "at": time.time(), "silent_s": round(silent_s, 3)}
        )

    def _warm(self, executor_id: str) -> None:
        """Warm a replacement executor (``executor_pool.warm_up``) before batches need it."""
        t0 = time.monotonic()
        try:
            slots = max(2, self.spark.sparkContext.defaultParallelism)
            warm_up(self.spark, slots, first_stage=True)
        except Exception as exc:  # a warm-up must never fail a batch
            self.errors.append(f"warm-up of {executor_id}: {exc!r}"[:200])
            return
        self.warmed.append({"executor": executor_id, "warm_s": round(time.monotonic() - t0, 3)})


def monitor_report(monitor: ExecutorMonitor | None) -> dict[str, list[Any]]:
    """``ExecutorMonitor.report``, empty where no monitor ran (``local[N]``)."""
    if monitor is None:
        return {"executors_fenced": [], "executor_fencings": [], "executors_warmed": []}
    return monitor.report()


@contextlib.contextmanager
def watching(
    spark: Any, suspect_s: float, fail_s: float, every_s: float = 0.5
) -> Iterator[ExecutorMonitor | None]:
    """An ``ExecutorMonitor`` polled on a daemon thread while the block runs, on masters with
    executors of their own (local-cluster, standalone); ``None`` on ``local[N]``, whose tasks
    run in the driver. A stopped or dead executor is fenced within ``fail_s`` plus a poll,
    instead of stalling a batch until Spark's network timeout (160 s measured)."""
    master = spark.sparkContext.master
    if not master.startswith(("local-cluster", "spark://")):
        yield None
        return
    monitor = ExecutorMonitor(spark, suspect_s=suspect_s, fail_s=fail_s)
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(every_s):
            try:
                monitor.poll()
            except Exception as exc:  # the REST API may not answer for a moment
                monitor.errors.append(repr(exc)[:200])

    t = threading.Thread(target=poll, name="trimtab-executor-monitor", daemon=True)
    t.start()
    try:
        yield monitor
    finally:
        stop.set()
        t.join(timeout=5)


FAULTS = ("kill-executor", "lose-executor", "stop-executor", "kill-driver")


def inject(fault: str, target: str | None, workdir: Path, seconds: float = 10.0) -> dict[str, Any]:
    """Inject ``fault`` into the application running in ``workdir`` (its ``app.json``).

    ``kill-executor`` / ``stop-executor`` signal the executor's JVM (SIGKILL; SIGSTOP for
    ``seconds``); ``lose-executor`` asks the driver to release the executor through Spark
    (the driver polls ``inject-lose``); ``kill-driver`` sends the driver SIGKILL. Returns what
    was done. Raises ``ValueError`` for a bad request and ``LookupError`` when the target
    is not running.
    """
    if fault not in FAULTS:
        raise ValueError(f"fault: {fault!r} is not {', '.join(FAULTS[:-1])} or {FAULTS[-1]}")
    f = workdir / "app.json"
    if not f.exists():
        raise ValueError(
            f"--workdir: no app.json in {workdir} (is a replay or a driver running there?)"
        )
    app = _read_app(f)
    if fault == "kill-driver":
        pid = int(app["driver_pid"])
        if process_start(pid) is not None and not same_process(pid, app.get("driver_started")):
            raise LookupError(f"driver {pid} is not running (pid {pid} is another process now)")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            raise LookupError(f"driver {pid} is not running") from None
        return {"killed_driver": pid}
    if target is None:
        raise ValueError(f"{fault}: an executor id is needed")
    driver = int(app["driver_pid"])
    if not same_process(driver, app.get("driver_started")):  # nothing would carry it out
        raise LookupError(f"{app['app_id']} is not running: its driver {driver} has exited")
    if fault == "kill-executor":
        return {"killed_executor": target, "pid": kill_executor(app["app_id"], str(target))}
    if fault == "stop-executor":
        pid = stop_executor(app["app_id"], str(target), seconds)
        return {"stopped_executor": target, "pid": pid, "resumes_after_s": seconds}
    (workdir / "inject-lose").write_text(str(target))  # the driver calls killExecutor
    return {"lose_requested": target}


def _read_app(f: Path) -> dict[str, Any]:
    """A driver's ``app.json``, or ValueError naming it when it is not one."""
    try:
        app = json.loads(f.read_text())
        int(app["driver_pid"]), str(app["app_id"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as e:
        why = f"no {e.args[0]!r}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        raise ValueError(f"{f}: not the app record a trimtab driver writes ({why})") from None
    return dict(app)


def publish_app(spark: Any, workdir: str | Path, master: str) -> None:
    """Write ``workdir/app.json``: what ``trimtab inject`` needs to find a running driver
    (application id, web UI, driver pid, master). Written by the driver doing the work."""
    from spark_adapter.actuator import atomic_write

    sc = spark.sparkContext
    info = {
        "app_id": sc.applicationId,
        "ui": sc.uiWebUrl,
        "driver_pid": os.getpid(),
        "driver_started": process_start(os.getpid()),  # with the pid, names this process
        "master": master,
    }
    atomic_write(Path(workdir) / "app.json", json.dumps(info).encode())


def serve_lose_requests(spark: Any, workdir: str | Path) -> None:
    """Carry out a pending ``trimtab inject lose-executor`` (the ``inject-lose`` file): only
    the driver can ask the cluster manager to remove an executor. Called between batches."""
    req = Path(workdir) / "inject-lose"
    if req.exists():
        lose_executor(spark, req.read_text().strip())
        req.unlink()


def released(row: dict[str, Any]) -> bool:
    """Whether an ``/allexecutors`` row is an executor the driver itself removed (a scale-in's
    release, or a fencing already done), as opposed to one that failed.

    >>> released({"isActive": False, "removeReason": "Executor killed by driver."})
    True
    >>> released({"isActive": False, "removeReason": "Command exited with code 137"})
    False
    """
    return not row.get("isActive", True) and "killed by driver" in (row.get("removeReason") or "")


def executor_alive(row: dict[str, Any], pid: int | None) -> bool:
    """Whether one REST ``/allexecutors`` row counts as a heartbeat.

    An executor on this machine (``pid`` known) is alive while its process runs: a stopped
    (SIGSTOP) or dead process is not, which the detector sees within its own timeouts. For an
    executor elsewhere only Spark knows: alive while Spark counts it active, which it stops
    doing when the executor's heartbeats have been missing for ``spark.network.timeout``.
    Task progress is no signal: an executor busy with one long task shows none and is healthy,
    and fencing it would kill a good executor.
    """
    if not row.get("isActive", True):
        return False
    return _running(pid) if pid is not None else True


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (
            psutil.STATUS_STOPPED,
            psutil.STATUS_ZOMBIE,
            psutil.STATUS_DEAD,
        )
    except psutil.NoSuchProcess:
        return False
