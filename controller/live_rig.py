"""The production setup on one machine, for the suite, the benches and users' own checks: the
controller daemon in external mode, a live pipeline driver and a paced input writer, each its
own ``trimtab`` process (ended by pid, never by name).

* ``daemon_config``: a daemon config steering a working directory;
* ``run_live``: daemon first (it publishes plan 0), then the driver on a processing-time
  trigger, then, once the driver's session is up, the writer (a segment every trigger, landing
  half a trigger before it fires, then the log is closed), so the driver's start-up does not
  become a backlog. Returns what
  ``trimtab pipeline run`` printed (end-to-end latency, backlog, fenced executors);
* ``run_silenced``: a live driver (plan 0, no daemon) and a paced writer, with one input
  stream silenced by ``trimtab inject silence-stream`` part-way: DPC's timeline;
* ``driver_failover``: a primary driver that dies between a batch's output and its commit,
  and the driver that takes over: an active standby, a warm (passive) standby or a cold
  restart.

Each process writes its stdout and stderr to ``WORK/logs/NAME.out`` and ``.err`` (kept for a
failed run's diagnosis), never to a pipe left unread while it runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["daemon_config", "driver_failover", "run_live", "run_silenced", "trimtab_exe"]


def trimtab_exe() -> str:
    """The ``trimtab`` console script of this interpreter's environment."""
    return str(Path(sys.executable).parent / "trimtab")


def daemon_config(tmp: Path, scenario: Path, work: Path, **sections: Any) -> Path:
    """Write ``tmp/controller.yaml``: a daemon steering ``work`` (2 partitions) with
    ``sections`` (control, placement, shedding, scaling); metrics on a free port, the
    decision log and state under ``tmp``."""
    cfg = tmp / "controller.yaml"
    substrate = {"kind": "spark-external", "scenario": str(scenario), "workdir": str(work)}
    body = {
        **sections,
        "substrate": substrate | {"partitions": 2},
        "metrics": {"port": 0},
        "decision_log": str(tmp / "decisions.sqlite"),
        "state_dir": str(tmp / "state"),
    }
    cfg.write_text(json.dumps(body))  # JSON is YAML
    return cfg


class _Proc:
    """A ``trimtab`` process whose stdout and stderr go to files (``logs/NAME.out``,
    ``.err``), not pipes: a pipe nobody reads while the process runs fills (Spark logs to
    stderr) and then blocks the process in its next write."""

    def __init__(self, cmd: list[str], env: dict[str, str], logs: Path, name: str) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = logs / f"{name}.out", logs / f"{name}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        self.args, self.pid = cmd, self.p.pid

    @property
    def returncode(self) -> int | None:
        return self.p.returncode

    def poll(self) -> int | None:
        return self.p.poll()

    def wait(self, timeout: float) -> int:
        return self.p.wait(timeout=timeout)

    def communicate(self, timeout: float) -> tuple[str, str]:
        """Wait for the end; what it printed on stdout and stderr."""
        self.p.wait(timeout=timeout)
        return self.out_path.read_text(), self.err_path.read_text()

    def kill(self) -> None:
        """SIGKILL by pid, if it still runs."""
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)


def _wait_for(path: Path, proc: _Proc, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}) before writing {path.name}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: no {path.name} after {timeout_s:.0f} s")
        time.sleep(0.2)


def run_live(
    cfg: Path,
    scenario: Path,
    work: Path,
    master: str,
    segments: int,
    scale: float = 0.1,
    trigger_s: float = 3.0,
    timeout_s: float = 400.0,
    lead_s: float | None = None,
) -> dict[str, Any]:
    """Run the three processes to the end of the input; every batch must succeed (else a
    ``RuntimeError`` with the failing process's stderr). The driver's printed result.

    The writer lands each segment ``lead_s`` (default: half a trigger) before the driver's
    trigger fires (``input generate --lead-s``): half a trigger is the mean wait of a writer
    at a random phase, and what the calibrated simulator's live timeline assumes. At a random
    phase the latencies moved with the phase alone (LP on ``spark-overload-ramp``, four runs:
    p50 2.8 to 4.3 s, the phase's wait 0.7 to 2.3 s)."""
    lead_s = trigger_s / 2 if lead_s is None else lead_s
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    exe, common = trimtab_exe(), [str(scenario), "--workdir", str(work)]
    logs = work / "logs"
    procs: list[_Proc] = []
    try:
        procs.append(_Proc([exe, "run", "--config", str(cfg)], env, logs, "daemon"))
        _wait_for(work / "plans" / "current", procs[0], 60, "the daemon")
        drv = [exe, "pipeline", "run", *common, "--master", master, "--trigger-s", str(trigger_s)]
        procs.append(_Proc(drv, env, logs, "driver"))
        _wait_for(work / "app.json", procs[1], 120, "the driver")  # its session is up
        gen = [exe, "input", "generate", *common, "--segments", str(segments)]
        gen += ["--scale", str(scale), "--pace-s", str(trigger_s), "--close"]
        procs.append(_Proc([*gen, "--lead-s", str(lead_s)], env, logs, "writer"))
        outs = []
        for p in (procs[2], procs[1]):
            out, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise RuntimeError(f"{p.args[1]} failed ({p.returncode}): {err[-3000:]}")
            outs.append(out)
        os.kill(procs[0].pid, signal.SIGTERM)
        if procs[0].wait(timeout=60) != 0:
            raise RuntimeError(f"the daemon exited {procs[0].returncode} on SIGTERM")
        return json.loads(outs[1])
    finally:
        for p in procs:
            p.kill()


def run_silenced(
    scenario: Path,
    work: Path,
    segments: int,
    silence: tuple[str, int, float],
    scale: float = 0.1,
    trigger_s: float = 2.0,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """A live local[2] driver and writer; once segment ``silence[1]`` is written,
    ``trimtab inject silence-stream silence[0] --seconds silence[2]``. Returns the driver's
    result, under ``timeline`` ``spark_adapter.dpc.result_timeline`` (the scenario's ``ha.dpc``
    decides the mode) and under ``verify`` the stable view against the reference."""
    from controller.scenario import load_scenario
    from spark_adapter.dpc import result_timeline
    from spark_adapter.query import compile_query
    from spark_adapter.source import InputLog
    from spark_adapter.verification import verify_workdir

    sc = load_scenario(scenario)
    stream, at, seconds = silence
    live = next(s.id for s in sc.streams if s.id != stream)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    exe, common = trimtab_exe(), [str(scenario), "--workdir", str(work)]
    drv = [exe, "pipeline", "run", *common, "--trigger-s", str(trigger_s), "--default-plan"]
    gen = [exe, "input", "generate", *common, "--segments", str(segments)]
    gen += ["--scale", str(scale), "--pace-s", str(trigger_s), "--close"]
    logs = work / "logs"
    procs: list[_Proc] = []
    try:
        procs.append(_Proc(drv, env, logs, "driver"))
        _wait_for(work / "app.json", procs[0], 120, "the driver")
        procs.append(_Proc(gen, env, logs, "writer"))
        _wait_for(
            work / "input" / f"seg-{at:06d}.parquet", procs[1], 60 + at * trigger_s, "the writer"
        )
        inject = [exe, "inject", "silence-stream", stream, "--seconds", str(seconds)]
        subprocess.run([*inject, "--workdir", str(work)], env=env, check=True, capture_output=True)
        outs = []
        for p in (procs[1], procs[0]):
            out, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                raise RuntimeError(f"{p.args[1]} failed ({p.returncode}): {err[-3000:]}")
            outs.append(out)
        result = json.loads(outs[1])
    finally:
        for p in procs:
            p.kill()
    q = compile_query(sc)
    # exactly once: the stable view against the reference over the log written again with the
    # holds its journal recorded (the driver trims the live log past its snapshots)
    ref = InputLog(work.parent / f"{work.name}-ref-input")
    ref.generate(sc, segments, scale=scale, silence=InputLog(work / "input").silences())
    return result | {
        "timeline": result_timeline(work, q.size_s, live, stream),
        "verify": verify_workdir(work, q, input_dir=ref.root),
    }


def driver_failover(
    scenario: Path,
    work: Path,
    mode: str,
    kill_after: int = 3,
    master: str = "local-cluster[2,1,1024]",
    lease_ttl_s: float = 3.0,
) -> dict[str, Any]:
    """``work`` holds an input log and a plan. The primary (``trimtab pipeline run``) is killed
    by ``--kill-after-output kill_after``; ``mode`` ``active`` starts an active standby first
    (the primary once it follows), ``standby`` a warm standby first (the primary once it waits
    for the lease), ``cold`` a new primary after the crash. Returns the next driver's result
    and ``t_crash``."""
    from spark_adapter.standby import READY, STANDBY_READY, wait_for_holder

    if mode not in ("active", "standby", "cold"):
        raise ValueError(f"mode: expected active, standby or cold, got {mode!r}")
    exe = trimtab_exe()
    common = [exe, "pipeline", "run", str(scenario), "--workdir", str(work), "--master", master]
    common += ["--lease-ttl-s", str(lease_ttl_s), "--snapshot-every", "2"]
    nxt = [*common, "--role", "primary" if mode == "cold" else mode]
    nxt += ["--result", str(work / "next.json")]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    logs = work / "logs"
    procs: list[_Proc] = []
    try:
        if mode in ("active", "standby"):  # up and warm before the primary starts
            procs.append(_Proc(nxt, env, logs, "next"))
            ready = work / "active-standby" / READY if mode == "active" else work / STANDBY_READY
            _wait_for(ready, procs[-1], 180, f"the {mode} standby")
        primary = _Proc(
            [*common, "--role", "primary", "--kill-after-output", str(kill_after)],
            env,
            logs,
            "primary",
        )
        procs.append(primary)
        if not wait_for_holder(work / "lease.sqlite", "primary", 180):
            raise RuntimeError("the primary never took the lease")
        primary.wait(timeout=600)
        t_crash = time.time()
        if primary.returncode != -signal.SIGKILL:
            err = primary.err_path.read_text()
            lines = [x for x in err.splitlines() if "Error" in x or "error:" in x]
            raise RuntimeError(f"the primary exited {primary.returncode}: {lines[-5:]}")
        if mode == "cold":
            procs.append(_Proc(nxt, env, logs, "next"))
        _, err = procs[0 if mode != "cold" else -1].communicate(timeout=600)
        if not (work / "next.json").exists():  # its first errors name the cause, the tail the end
            first = [x for x in err.splitlines() if "ERROR" in x or "Error:" in x][:5]
            raise RuntimeError(
                f"the next driver wrote no result; first errors: {first}; last: {err[-2000:]}"
            )
        return json.loads((work / "next.json").read_text()) | {"t_crash": t_crash}
    finally:
        for p in procs:
            p.kill()
