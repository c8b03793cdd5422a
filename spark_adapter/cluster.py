"""A standalone Spark cluster on 127.0.0.1: master and workers started with ``spark-class``.

``up`` starts the master (``--host 127.0.0.1``), waits for it to be elected leader, starts the
workers and waits until each has registered; the pids with their start times, the ports and
the log files go to a state file. ``down`` ends exactly those processes (SIGTERM, then SIGKILL
after a grace period), leaving alone a pid the system has since given to another process (after
a reboot, say); ``status`` reads the master's JSON endpoint. Nothing is found or killed by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spark_adapter.pids import process_start, same_process
from spark_adapter.session import STANDALONE_EXECUTOR_MEMORY

__all__ = [
    "ClusterState",
    "cluster_down",
    "cluster_status",
    "cluster_up",
    "spark_home",
    "worker_memory_problem",
]

LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """The installed pyspark package, which ships ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).parent


_MEMORY = re.compile(r"([1-9][0-9]*)([kmgt]?)b?", re.IGNORECASE)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _bytes(size: str) -> int:
    m = _MEMORY.fullmatch(size)
    assert m is not None
    return int(m[1]) * _UNIT[m[2].lower()]


def worker_memory_problem(memory: str, workers: int, machine: int) -> str | None:
    """Why ``workers`` standalone workers of ``memory`` each are not a cluster trimtab runs
    on (None: they are), ``machine`` being this machine's memory in bytes. Spark reads a size
    with no unit as bytes; a worker with less than a trimtab executor asks for
    (``STANDALONE_EXECUTOR_MEMORY``) starts but never runs one, and the workers together must
    fit the machine.

    >>> gib = 1 << 30
    >>> worker_memory_problem("1g", 2, 24 * gib) is None
    True
    >>> worker_memory_problem("1.5g", 2, 24 * gib)
    "'1.5g' is not a worker memory size like 512m or 2g"
    >>> worker_memory_problem("1024", 2, 24 * gib)
    "'1024' has no unit, which Spark reads as bytes: write 1024m for MiB"
    >>> worker_memory_problem("256m", 2, 24 * gib)
    '256m is less than the 512m a trimtab executor asks for: at least 512m'
    >>> worker_memory_problem("16g", 2, 24 * gib)
    "2 workers x 16g = 32.0 GiB is more than this machine's 24.0 GiB"
    """
    m = _MEMORY.fullmatch(memory)
    if m is None:
        return f"{memory!r} is not a worker memory size like 512m or 2g"
    if not m[2]:
        return f"{memory!r} has no unit, which Spark reads as bytes: write {memory}m for MiB"
    need = STANDALONE_EXECUTOR_MEMORY
    if _bytes(memory) < _bytes(need):
        return f"{memory} is less than the {need} a trimtab executor asks for: at least {need}"
    total = workers * _bytes(memory)
    if total > machine:
        gib = 1 << 30
        return (
            f"{workers} workers x {memory} = {total / gib:.1f} GiB is more than this "
            f"machine's {machine / gib:.1f} GiB"
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


_STATE_TYPES = {"master_url": str, "master_pid": int, "master_web_port": int, "worker_pids": list}


@dataclass
class ClusterState:
    """What ``up`` started."""

    master_url: str
    master_pid: int
    master_web_port: int
    worker_pids: list[int] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    started: dict[str, float | None] = field(default_factory=dict)  # pid -> its start time

    def add(self, pid: int) -> None:
        """Record a started process's start time: with the pid, it names that process."""
        self.started[str(pid)] = process_start(pid)

    def owns(self, pid: int) -> bool:
        """``pid`` still runs the process ``up`` started (not a recycled pid, e.g. after a
        reboot; a state file from before start times were kept trusts the pid)."""
        return same_process(pid, self.started.get(str(pid)))

    def save(self, path: Path) -> None:
        """Write the state file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> ClusterState | None:
        """Read the state file, if any; ValueError naming it when it is not one ``up`` wrote
        (its pids then cannot be trusted, so nothing is stopped on its word)."""
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not JSON ({str(e).splitlines()[0]})") from None
        fields = isinstance(data, dict) and all(
            isinstance(data.get(k), t) for k, t in _STATE_TYPES.items()
        )
        if not fields or not all(isinstance(p, int) for p in data["worker_pids"]):
            raise ValueError(f"{path}: not a trimtab cluster state (cluster up writes it)")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=LOOPBACK,
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    f = open(log, "wb")  # noqa: SIM115 - the child keeps the file
    return subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), *args],
        stdout=f,
        stderr=subprocess.STDOUT,
        env=_env(),
        start_new_session=True,
    )


def _log_reason(log: Path) -> str | None:
    """The last exception a JVM's log names (``java.lang.X: why``), if any.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = Path(d) / "w.log"
    ...     _ = f.write_text("INFO up\\njava.lang.IllegalStateException: Memory is below 1MB\\n\\tat x\\n")
    ...     _log_reason(f)
    'java.lang.IllegalStateException: Memory is below 1MB'
    """
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    found = [ln.strip() for ln in lines if re.match(r"\s*[\w.$]+(Exception|Error): ", ln)]
    return found[-1] if found else None


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            why = _log_reason(log)
            raise RuntimeError(
                f"{log.name}: process exited ({proc.returncode}) before '{text}'"
                + (f": {why}" if why else "")
            )
        time.sleep(0.2)
    raise TimeoutError(f"{log.name}: no '{text}' within {timeout_s} s")


def cluster_up(
    state_file: Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 60.0
) -> ClusterState:
    """Start a master and ``workers`` workers on loopback; refuses if a recorded cluster is alive."""
    old = ClusterState.load(state_file)
    if old is not None and old.owns(old.master_pid):
        raise RuntimeError(
            f"a cluster is already up ({old.master_url}, pid {old.master_pid}); run 'trimtab cluster down'"
        )
    logs = state_file.parent / "cluster-logs"
    logs.mkdir(parents=True, exist_ok=True)
    port, web = _free_port(), _free_port()
    mlog = logs / "master.log"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--webui-port",
            str(web),
        ],
        mlog,
    )
    state = ClusterState(f"spark://{LOOPBACK}:{port}", master.pid, web, [], [str(mlog)])
    state.add(master.pid)
    state.save(state_file)
    try:
        _wait_for(mlog, "I have been elected leader", master, timeout_s)
        for i in range(workers):
            wlog = logs / f"worker-{i}.log"
            w = _start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    state.master_url,
                    "--host",
                    LOOPBACK,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(logs / f"work-{i}"),
                ],
                wlog,
            )
            state.worker_pids.append(w.pid)
            state.add(w.pid)
            state.logs.append(str(wlog))
            state.save(state_file)
            _wait_for(wlog, "Successfully registered with master", w, timeout_s)
    except BaseException:
        cluster_down(state_file)
        raise
    return state


def cluster_down(state_file: Path, grace_s: float = 10.0) -> list[int]:
    """Stop the recorded workers, then the master, by pid (only while each pid still runs
    the process ``up`` started); returns the pids that were stopped."""
    state = ClusterState.load(state_file)
    if state is None:
        return []
    stopped = [pid for pid in [*state.worker_pids, state.master_pid] if state.owns(pid)]
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid in stopped:
        while state.owns(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        if state.owns(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    state_file.unlink(missing_ok=True)
    return stopped


def cluster_status(state_file: Path) -> dict[str, Any]:
    """Recorded pids with liveness, and the master's view of its workers."""
    state = ClusterState.load(state_file)
    if state is None:
        return {"up": False}
    out: dict[str, Any] = {
        "up": state.owns(state.master_pid),
        "master_url": state.master_url,
        "master_pid": state.master_pid,
        "workers": [{"pid": p, "alive": state.owns(p)} for p in state.worker_pids],
    }
    if out["up"]:
        try:
            with urllib.request.urlopen(
                f"http://{LOOPBACK}:{state.master_web_port}/json/", timeout=2
            ) as r:
                info = json.load(r)
            out["registered_workers"] = [
                {"id": w["id"], "state": w["state"], "cores": w["cores"]}
                for w in info.get("workers", [])
            ]
            out["master_state"] = info.get("status")
        except OSError as e:
            out["master_error"] = str(e)
    return out
