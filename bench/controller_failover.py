"""Controller failover, measured with two real `trimtab run` processes on one decision log.

Each run starts a primary and a warm standby (simulator substrate, the default 10 s lease
timeout), then either kills the primary (SIGKILL) or pauses it (SIGSTOP) for 2.5 lease
timeouts and resumes it. Measured: the time from the fault to the standby's first plan in the
decision log (its epoch), in lease timeouts (target: at most 2); for the pause, the plans from
the old epoch accepted after the takeover (target: 0) and what the woken primary did.

Part of ``bench.bench_ha``; ``python -m bench.bench_ha controller`` re-measures only this.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import ROOT
from core.plans import Plan

EXE = str(Path(sys.executable).parent / "trimtab")
TTL = 10.0  # the default control.lease_timeout_s


def _plans(f: Path) -> list[tuple[float, Plan]]:
    try:
        with sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT ts, plan FROM plans ORDER BY version").fetchall()
    except sqlite3.Error:
        return []
    return [(float(ts), Plan.from_json(p)) for ts, p in rows]


def _until(cond: Any, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("controller failover bench: timed out")
        time.sleep(0.05)


def one_run(fault: str, rng: random.Random) -> dict[str, Any]:
    """One fault (``kill`` or ``stop``) against a primary with a standby beside it, at a
    random point of the lease's renewal cycle."""
    work = Path(tempfile.mkdtemp(prefix="trimtab-ctl-ha-"))
    log_f, state = work / "d.sqlite", work / "st"
    cfg = work / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "control": {"interval_s": 0.5, "window_samples": 10, "lease_timeout_s": TTL},
                "placement": {"method": "correlation-oneway"},
                "shedding": {"method": "lp"},
                "substrate": {
                    "kind": "sim",
                    "scenario": str(ROOT / "scenarios" / "anticorrelated-diurnal.yaml"),
                    "ticks_per_round": 5,
                },
                "metrics": {"port": 0},
                "decision_log": str(log_f),
                "state_dir": str(state),
            }
        )
    )

    def start(name: str) -> subprocess.Popen[bytes]:
        err = open(work / f"{name}.err", "wb")  # noqa: SIM115 (kept for the process's life)
        return subprocess.Popen(
            [EXE, "run", "--config", str(cfg)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err
        )

    a = start("a")
    procs = [a]
    try:
        _until(lambda: (state / "status.json").exists(), 120)
        b = start("b")
        procs.append(b)
        _until(lambda: (state / f"standby-{b.pid}.json").exists(), 120)
        time.sleep(3.0 + rng.uniform(0.0, TTL / 4))  # a few rounds as primary
        t_fault = time.time()
        os.kill(a.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        _until(lambda: any(p.epoch == 2 for _, p in _plans(log_f)), 6 * TTL)
        first = min(ts for ts, p in _plans(log_f) if p.epoch == 2)
        out: dict[str, Any] = {"takeover_s": first - t_fault}
        if fault == "stop":
            time.sleep(max(0.0, t_fault + 2.5 * TTL - time.time()))
            os.kill(a.pid, signal.SIGCONT)
            _until(lambda: (state / f"standby-{a.pid}.json").exists(), 2 * TTL)
            time.sleep(2.0)
            err = (work / "a.err").read_text()
            out["woken"] = "publication refused" if "publish_refused" in err else "lease lost"
            out["stale_accepted"] = sum(
                1 for ts, p in _plans(log_f) if p.epoch == 1 and ts >= first
            )
            epochs = [p.epoch for _, p in _plans(log_f)]
            out["epochs_in_order"] = epochs == sorted(epochs)
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()


def controller_failover(repeat: int = 3) -> dict[str, Any]:
    """``repeat`` kills and ``repeat`` pauses; their measurements."""
    rng = random.Random(7)
    kills = [one_run("kill", rng) for _ in range(repeat)]
    stops = [one_run("stop", rng) for _ in range(repeat)]
    return {"kill": kills, "stop": stops}


def section(res: dict[str, Any]) -> str:
    """The BENCHMARKS text for ``controller_failover``'s result."""
    kill = [r["takeover_s"] for r in res["kill"]]
    stop = [r["takeover_s"] for r in res["stop"]]
    stale = sum(r["stale_accepted"] for r in res["stop"])
    woken = sorted({r["woken"] for r in res["stop"]})
    order = all(r["epochs_in_order"] for r in res["stop"])
    fmt = ", ".join
    return f"""
Controller failover (`python -m bench.bench_ha controller`): two `trimtab run` processes
(simulator, `anticorrelated-diurnal`, correlation-oneway + lp, 0.5 s rounds) on one decision
log, the default lease timeout of {TTL:.0f} s. Time from the fault to the standby's first
plan in the decision log (target: at most 2 lease timeouts), {len(kill)} runs each:

| fault | takeover (s), each run | worst, in lease timeouts |
|---|---|---|
| primary killed (SIGKILL) | {fmt(f"{x:.1f}" for x in kill)} | {max(kill) / TTL:.2f} |
| primary paused (SIGSTOP) for {2.5 * TTL:.0f} s | {fmt(f"{x:.1f}" for x in stop)} | {max(stop) / TTL:.2f} |

Each fault comes at a random point (seeded) of the primary's renewal cycle. The primary
renews every quarter timeout and the standby polls as often, so a takeover comes between 0.75
and 1.25 timeouts after the fault. After the pause the woken primary stepped down
({fmt(woken)}); plans of the old epoch accepted after the takeover: {stale} (target 0); epochs
in version order in every run: {order}.
"""
