"""Controller failover, measured with two real `trimtab run` processes on one decision log.

Each run starts a primary and a warm standby (simulator substrate, the default 10 s lease
timeout), then kills the primary (SIGKILL), pauses it (SIGSTOP) for 2.5 lease timeouts and
resumes it, or pauses it as if inside a commit of the decision log: the bench takes the log's
write lock first (after any commit in flight) and holds it for the pause, as a primary stopped
mid-commit would. Measured: the time from the fault to the standby's first plan (the time
the plan was made, its ``ts``), in lease timeouts (target: at most 2), and to that plan's
appearing in the decision log; for the pauses, the plans from the old epoch accepted after
the takeover (target: 0) and what the woken primary did.

Part of ``bench.bench_ha``; ``python -m bench.bench_ha controller`` re-measures only this.
"""

from __future__ import annotations

import json
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


def _leader(state: Path) -> int | None:
    """The pid in the primary's status file (None while there is none)."""
    try:
        return int(json.loads((state / "status.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _until(cond: Any, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("controller failover bench: timed out")
        time.sleep(0.05)


FAULTS = ("kill", "stop", "stop-in-commit")


def one_run(fault: str, rng: random.Random) -> dict[str, Any]:
    """One fault (``FAULTS``) against a primary with a standby beside it, at a random point
    of the lease's renewal cycle."""
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
        lock = sqlite3.connect(log_f, isolation_level=None, timeout=30)
        if fault == "stop-in-commit":
            lock.execute("BEGIN IMMEDIATE")  # the log's write lock, held through the pause
        t_fault = time.time()
        os.kill(a.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        _until(lambda: _leader(state) == b.pid, 6 * TTL)  # b's status file: it is primary

        def resume() -> None:  # the pause ends: the lock it held goes with it
            time.sleep(max(0.0, t_fault + 2.5 * TTL - time.time()))
            if lock.in_transaction:
                lock.execute("ROLLBACK")
            os.kill(a.pid, signal.SIGCONT)

        if fault == "stop-in-commit":
            resume()
        _until(lambda: any(p.epoch == 2 for _, p in _plans(log_f)), 6 * TTL)
        logged = time.time()
        if fault == "stop":
            resume()
        first = min(ts for ts, p in _plans(log_f) if p.epoch == 2)
        out: dict[str, Any] = {"takeover_s": first - t_fault, "logged_s": logged - t_fault}
        if fault != "kill":
            _until(lambda: (state / f"standby-{a.pid}.json").exists(), 2 * TTL)
            time.sleep(2.0)
            err = (work / "a.err").read_text()
            out["woken"] = "publication refused" if "publish_refused" in err else "lease lost"
            out["stale_accepted"] = sum(
                1 for ts, p in _plans(log_f) if p.epoch == 1 and ts >= first
            )
            epochs = [p.epoch for _, p in _plans(log_f)]
            out["epochs_in_order"] = epochs == sorted(epochs)
            out["waited"] = '"event": "decision_log_waiting"' in (work / "b.err").read_text()
        lock.close()
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
    """``repeat`` runs of each fault; their measurements."""
    rng = random.Random(7)
    return {f: [one_run(f, rng) for _ in range(repeat)] for f in FAULTS}


def section(res: dict[str, Any]) -> str:
    """The BENCHMARKS text for ``controller_failover``'s result."""
    paused = res["stop"] + res["stop-in-commit"]
    stale = sum(r["stale_accepted"] for r in paused)
    woken = sorted({r["woken"] for r in paused})
    order = all(r["epochs_in_order"] for r in paused)
    waited = [r["waited"] for r in res["stop-in-commit"]]
    fmt = ", ".join
    label = {
        "kill": "primary killed (SIGKILL)",
        "stop": f"primary paused (SIGSTOP) for {2.5 * TTL:.0f} s",
        "stop-in-commit": f"primary paused for {2.5 * TTL:.0f} s inside a decision-log commit",
    }

    def each(runs: list[dict[str, Any]], key: str) -> str:
        return fmt(f"{r[key]:.1f}" for r in runs)

    rows = "\n".join(
        f"| {label[f]} | {each(runs, 'takeover_s')} | "
        f"{max(r['takeover_s'] for r in runs) / TTL:.2f} | {each(runs, 'logged_s')} |"
        for f, runs in res.items()
    )
    n = len(res["kill"])
    return f"""
Controller failover (`python -m bench.bench_ha controller`): two `trimtab run` processes
(simulator, `anticorrelated-diurnal`, correlation-oneway + lp, 0.5 s rounds) on one decision
log, the default lease timeout of {TTL:.0f} s. Takeover: from the fault to the time the
standby made its first plan (target: at most 2 lease timeouts); in the log: from the fault to
that plan's being readable in the decision log. {n} runs each:

| fault | takeover (s), each run | worst, in lease timeouts | in the log after (s), each run |
|---|---|---|---|
{rows}

Each fault comes at a random point (seeded) of the primary's renewal cycle. The primary
renews every quarter timeout and the standby polls as often, so a takeover comes between 0.75
and 1.25 timeouts after the fault. For the pause inside a commit, the bench takes the decision
log's write lock (after any commit in flight) just before it stops the primary, and releases
it when the primary resumes, as a primary stopped mid-commit holds it. The lease is in its
own file, so the takeover is not held up; the new primary's records waited in memory until
the lock was free (its log said `decision_log_waiting` in {sum(waited)} of {len(waited)} runs),
which is why they reach the log about when the pause ends. After the pauses the woken
primary stepped down ({fmt(woken)}); plans of the old epoch accepted after the takeover:
{stale} (target 0); epochs in version order in every run: {order}.
"""
