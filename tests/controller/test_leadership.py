"""Controller standby: one primary per decision log, takeover on lease expiry, fencing by epoch."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from controller.daemon import Daemon
from controller.decisionlog import DecisionLog, lease_file
from controller.testing import key_group_plan
from core.lease import Lease, StaleEpochError, read_lease
from spark_adapter.actuator import PlanStore
from tests.conftest import ROOT, SCENARIOS
from tests.controller.test_daemon import settings

EXE = str(Path(sys.executable).parent / "trimtab")


def test_plan_store_refuses_a_plan_from_an_older_epoch(tmp_path: Path) -> None:
    store = PlanStore(tmp_path / "plans")
    base = key_group_plan(SimpleNamespace(op_id="agg", key_groups=4), [0, 1, 0, 1])
    store.publish(base.model_copy(update={"version": 1, "epoch": 2}))
    old = base.model_copy(update={"version": 2, "epoch": 1})
    with pytest.raises(StaleEpochError, match="epoch 1 refused.*epoch 2"):
        store.publish(old)
    with pytest.raises(StaleEpochError):
        store.publish_next(old)
    assert store.current_version() == 1 and not (tmp_path / "plans" / "v000002.json").exists()
    # the same epoch and a newer one go through
    assert store.publish_next(base.model_copy(update={"version": 2, "epoch": 2})).version == 2
    assert store.publish(base.model_copy(update={"version": 3, "epoch": 3})) == 3


def test_decision_log_refuses_writes_once_the_lease_moved_on(tmp_path: Path) -> None:
    f = tmp_path / "d.sqlite"
    log = DecisionLog(f)
    lease = Lease(lease_file(f), ttl_s=60)
    first = lease.acquire("a")
    log.epoch = first
    plan = key_group_plan(SimpleNamespace(op_id="agg", key_groups=4), [0, 1, 0, 1])
    log.record_plan(1.0, plan.model_copy(update={"epoch": first}), applied=True)
    assert lease.acquire("b", now=time.time() + 120) == 2  # a's lease expired; b takes over
    with pytest.raises(StaleEpochError, match="epoch 1 refused"):
        log.record_plan(2.0, plan.model_copy(update={"version": 1, "epoch": first}), True)
    with pytest.raises(StaleEpochError):
        log.record(2.0, 1, "hold", "x", 0, False, 0.0, {}, {})
    assert log.count() == 0 and log.last_plan().version == 0  # type: ignore[union-attr]
    log.epoch = None  # an unfenced writer (a replay) is not affected
    log.record(3.0, 1, "hold", "x", 0, False, 0.0, {}, {})
    assert log.count() == 1


def test_the_log_refuses_an_older_epoch_once_a_newer_one_has_written_it(tmp_path: Path) -> None:
    """The log fences by itself: the lease is read outside the log's transaction, so a
    writer can find it unchanged and still be late; the newer epoch's write decides."""
    f = tmp_path / "d.sqlite"
    old, new = DecisionLog(f), DecisionLog(f)  # no lease file at all
    old.epoch, new.epoch = 1, 2
    assert old.record(1.0, 1, "hold", "x", 0, False, 0.0, {}, {})
    assert new.record(2.0, 2, "hold", "y", 0, False, 0.0, {}, {})
    with pytest.raises(StaleEpochError, match="epoch 1 refused; controller epoch 2 has written"):
        old.record(3.0, 3, "hold", "z", 0, False, 0.0, {}, {})
    assert old.pending == 0 and [r["reason"] for r in new.last()] == ["x", "y"]
    # `decisions --last 100000000000000000000` (all of them) was an OverflowError
    assert [r["reason"] for r in new.last(10**20)] == ["x", "y"]


def test_writes_wait_while_the_log_is_locked_up_to_what_retention_keeps(tmp_path: Path) -> None:
    f = tmp_path / "d.sqlite"
    log = DecisionLog(f, retention_rounds=3, wait_s=0.05)
    frozen = sqlite3.connect(f, isolation_level=None)
    frozen.execute("BEGIN IMMEDIATE")
    for i in range(10):
        assert not log.record(float(i), i + 1, "hold", f"r{i + 1}", 0, False, 0.0, {}, {})
    assert (log.pending, log.dropped) == (6, 4)  # 2 x retention wait; the oldest 4 went
    frozen.execute("ROLLBACK")
    assert log.flush() and log.pending == 0
    assert [r["reason"] for r in log.last()] == ["r8", "r9", "r10"]
    frozen.execute("BEGIN IMMEDIATE")
    log.record(11.0, 11, "hold", "r11", 0, False, 0.0, {}, {})
    assert log.close(wait_s=0.05) == 1  # still locked at the stop: one record unwritten
    frozen.execute("ROLLBACK")


def test_a_holder_frozen_inside_a_lease_write_holds_up_no_one_for_long(tmp_path: Path) -> None:
    """A process stopped inside one of the lease's writes keeps SQLite's write lock. The
    others wait ``wait_s`` for it, not SQLite's 10 s: taking the lease then fails (it is held),
    and a renewal answers from the expiry its holder last wrote."""
    f = tmp_path / "l.sqlite"
    a, b = Lease(f, ttl_s=2.0), Lease(f, ttl_s=2.0)
    assert a.wait_s == 0.5
    epoch = a.acquire("a")
    frozen = sqlite3.connect(f, isolation_level=None)
    frozen.execute("BEGIN IMMEDIATE")  # a third process, stopped mid-write
    t0 = time.monotonic()
    assert b.acquire("b", now=time.time() + 10) is None  # expired, but the lock is held
    assert a.renew("a", epoch)  # not expired: still a's
    assert not a.renew("a", epoch, now=time.time() + 10)  # past the expiry a last wrote
    assert time.monotonic() - t0 < 3 * a.wait_s + 0.5
    frozen.execute("ROLLBACK")  # it resumes
    assert b.acquire("b", now=time.time() + 10) == epoch + 1  # type: ignore[operator]


def test_a_primary_frozen_inside_a_decision_log_commit_does_not_hold_up_failover(
    tmp_path: Path,
) -> None:
    """The primary stopped inside a commit holds the decision log's write lock. Its
    standby still takes the lease (it lives in its own file) and runs its rounds at once;
    their records wait in memory and go in after the frozen commit, in order, with round
    numbers that do not repeat the frozen primary's."""
    ttl = 0.5
    s = settings(
        tmp_path, control={"interval_s": 0.05, "window_samples": 5, "lease_timeout_s": ttl}
    )
    a = Daemon(s)
    # a running daemon renews its lease every quarter of it while its rounds run in other
    # threads; so here. Without it a's first round (0.25-0.5 s, loading the placement's code)
    # let its 0.5 s lease expire before b started, and b took it at its start (a flake)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 4):
            a.heartbeat()

    renewer = threading.Thread(target=renew)
    renewer.start()
    for _ in range(4):
        a.tick()
    stop.set()
    renewer.join()
    b = Daemon(s)
    assert a.lead.primary and not b.lead.primary  # b starts as a's standby
    f = tmp_path / "decisions.sqlite"
    # a is stopped inside the commit of its fifth round: it holds the log's write lock
    frozen = sqlite3.connect(f, isolation_level=None)
    frozen.execute("BEGIN IMMEDIATE")
    frozen.execute(
        "INSERT INTO rounds (ts, round, kind, reason, plan_version, applied, duration_s, "
        "observation, details) VALUES (?, ?, 'hold', 'frozen', 0, 0, 0, '{}', '{}')",
        (time.time(), a.round_base + a.loop.round + 1),
    )
    time.sleep(ttl + 0.1)  # and renews nothing: its lease expires
    t0 = time.monotonic()
    b.heartbeat()
    for _ in range(3):
        b.tick()
    took = time.monotonic() - t0
    assert b.lead.primary and b.lead.epoch == 2 and b.loop.round >= 3
    # about one lock wait (0.125 s) per write; SQLite's own 10 s before this change
    assert took < 2.0, f"the standby's takeover and 3 rounds took {took:.2f} s"
    waiting = b.log.pending
    assert waiting >= 4, waiting  # the resumed plan and three rounds
    assert b.status()["decision_log_pending"] == waiting
    assert b.status()["decision_log_dropped"] == 0
    pending = b.telemetry.registry.get_sample_value("trimtab_decision_log_pending")
    assert pending == waiting
    frozen.execute("COMMIT")  # a resumes and finishes its commit
    b.tick()
    assert b.log.pending == 0
    assert b.telemetry.registry.get_sample_value("trimtab_decision_log_pending") == 0
    rows = DecisionLog.read_only(f).last(1000)
    rounds = [r["round"] for r in rows]
    assert len(rounds) == len(set(rounds)) and rounds == sorted(rounds), rounds
    assert [r["reason"] for r in rows].index("frozen") == len(rows) - 5  # b's four rounds after
    assert b.status()["last_round"]["round"] == rounds[-1]
    assert _plans(f)[-1].epoch == 2
    # a wakes up and goes on with its next round: refused, it steps down
    a.tick()
    assert a.refused == 1 and not a.lead.primary
    assert DecisionLog.read_only(f).count() == len(rows)


def test_standby_takes_over_and_a_woken_primary_is_fenced(tmp_path: Path) -> None:
    s = settings(
        tmp_path, control={"interval_s": 0.05, "window_samples": 5, "lease_timeout_s": 0.5}
    )
    a = Daemon(s)
    assert a.lead.primary and a.status()["role"] == "primary"
    for _ in range(4):
        a.tick()
    b = Daemon(s)
    assert not b.lead.primary and b.status()["role"] == "standby"
    log = DecisionLog.read_only(tmp_path / "decisions.sqlite")
    rows = log.count()
    b.tick()  # a standby's round does nothing
    assert log.count() == rows
    a_version = a.loop.plan.version
    time.sleep(0.6)  # a is "paused": no heartbeat, its lease expires
    b.heartbeat()
    assert b.lead.primary and b.lead.epoch == a.lead.epoch + 1  # type: ignore[operator]
    # b resumed a's plan as the next version, under its own epoch, and says whom it replaced
    assert b.loop.plan.version == a_version + 1 and b.loop.plan.epoch == b.lead.epoch
    assert b.loop.plan.placement == a.loop.plan.placement
    assert b.status()["took_over_from"]["holder"] == a.lead.holder
    assert f"taking over from {a.lead.holder}" in b.loop.plan.reason
    # a wakes up mid-round, still believing it is primary: its writes are refused
    a.tick()
    assert a.refused == 1 and not a.lead.primary and a.status()["role"] == "standby"
    assert log.count() == rows
    b.tick()
    assert log.count() == rows + 1
    assert [p.epoch for p in _plans(tmp_path / "decisions.sqlite")][-1] == b.lead.epoch


def _plans(f: Path) -> list:  # type: ignore[type-arg]
    from core.plans import Plan

    with sqlite3.connect(f"{f.resolve().as_uri()}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT plan FROM plans ORDER BY version").fetchall()
    return [Plan.from_json(r[0]) for r in rows]


def _daemon(cfg: Path, tmp: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [EXE, "run", "--config", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / f"{name}.err", "w"),
        text=True,
    )


def _status(state: Path) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [EXE, "status", "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def _wait(cond, timeout_s: float = 60.0, step_s: float = 0.05) -> float:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError("timed out")
        time.sleep(step_s)
    return time.monotonic() - t0


def _steers(state: Path, pid: int, after_version: int) -> bool:
    """``pid`` is primary by its status file and the lease, with a plan newer than the one
    its predecessor last reported."""
    st = _status(state)
    return (
        st["pid"] == pid
        and st["role"] == "primary"
        and st["leader_pid"] == pid
        and st["plan_version"] > after_version
    )


def _first_plan_of(f: Path, epoch: int) -> bool:
    try:
        return any(p.epoch == epoch for p in _plans(f))
    except sqlite3.Error:
        return False


@pytest.mark.parametrize("stop", ["stop-controller", "stop-controller-in-commit"])
def test_controller_failover_between_processes(tmp_path: Path, stop: str) -> None:
    """Two `trimtab run` processes: the standby takes over within 2 lease timeouts of the
    primary's stop (also when the primary is stopped holding the decision log's write lock,
    as inside a commit); the old primary, resumed, publishes nothing and stays standby;
    killing the new primary hands back. Plan versions never repeat and epochs never go back."""
    ttl = 1.5
    log_f, state = tmp_path / "d.sqlite", tmp_path / "st"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "control": {"interval_s": 0.1, "window_samples": 5, "lease_timeout_s": ttl},
                "placement": {"method": "correlation-oneway"},
                "substrate": {
                    "kind": "sim",
                    "scenario": str(SCENARIOS / "anticorrelated-diurnal.yaml"),
                    "ticks_per_round": 5,
                },
                "metrics": {"port": 0},
                "decision_log": str(log_f),
                "state_dir": str(state),
            }
        )
    )
    a = _daemon(cfg, tmp_path, "a")
    procs = [a]
    try:
        _wait(lambda: (state / "status.json").exists() and _status(state)["role"] == "primary")
        b = _daemon(cfg, tmp_path, "b")
        procs.append(b)
        _wait(lambda: (state / f"standby-{b.pid}.json").exists())
        st = _status(state)
        assert st["leader_pid"] == a.pid and st["epoch"] == 1 and b.pid in st["standby_pids"]

        st = _status(state)
        out = subprocess.run(
            [EXE, "inject", stop, "--decision-log", str(log_f), "--seconds", "8"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout)["stopped_controller"] == a.pid
        # b steers within 2 lease timeouts, whether or not a was stopped inside a commit of
        # the decision log (then b's records wait for a to resume)
        took = _wait(lambda: _steers(state, b.pid, after_version=st["plan_version"]), 30)
        assert took <= 2 * ttl, f"standby published after {took:.2f} s (bound {2 * ttl} s)"
        st = _status(state)
        assert st["leader_pid"] == b.pid and st["epoch"] == 2 and st["role"] == "primary"

        # a resumes after 8 s, believing it is primary: it steps down and publishes nothing
        _wait(lambda: (state / f"standby-{a.pid}.json").exists(), timeout_s=30)
        _wait(lambda: _first_plan_of(log_f, 2), timeout_s=10)
        time.sleep(1.0)
        err = (tmp_path / "a.err").read_text()
        assert '"event": "stepped_down"' in err, err[-2000:]
        assert _status(state)["leader_pid"] == b.pid
        if stop == "stop-controller-in-commit":  # b's records waited for the lock, then went in
            err = (tmp_path / "b.err").read_text()
            assert '"event": "decision_log_waiting"' in err, err[-2000:]
            assert '"event": "decision_log_caught_up"' in err, err[-2000:]

        out = subprocess.run(
            [EXE, "inject", "kill-controller", "--decision-log", str(log_f)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(out.stdout)["killed_controller"] == b.pid
        took = _wait(lambda: _first_plan_of(log_f, 3), timeout_s=30)
        assert took <= 2 * ttl, f"old primary took over after {took:.2f} s"
        assert read_lease(lease_file(log_f)).pid == a.pid  # type: ignore[union-attr]
        a.send_signal(signal.SIGTERM)
        assert a.wait(timeout=30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    plans = _plans(log_f)
    epochs = [p.epoch for p in plans]
    assert epochs == sorted(epochs) and set(epochs) >= {1, 2, 3}, epochs
    # every round after a takeover is the new primary's: round numbers go on without repeats
    rows = DecisionLog.read_only(log_f).last(100_000)
    rounds = [r["round"] for r in rows]
    assert len(rounds) == len(set(rounds)), "a round number was written twice"


def test_controller_faults_need_a_held_lease(tmp_path: Path) -> None:
    no_log = subprocess.run([EXE, "inject", "kill-controller"], capture_output=True, text=True)
    assert no_log.returncode == 2 and "--decision-log is needed" in no_log.stderr
    assert len(no_log.stderr.strip().splitlines()) == 1
    f = tmp_path / "d.sqlite"
    DecisionLog(f).close()
    idle = subprocess.run(
        [EXE, "inject", "stop-controller", "--decision-log", str(f)],
        capture_output=True,
        text=True,
    )
    assert idle.returncode == 1 and "no controller holds the lease" in idle.stderr
    bad = subprocess.run([EXE, "inject", "kill-everything"], capture_output=True, text=True)
    assert bad.returncode == 2 and "kill-controller" in bad.stderr


def test_a_lease_taken_with_a_floor_starts_at_it_and_counts_on(tmp_path: Path) -> None:
    """`trimtab run --take-over`: the first lead is at least the floor; later ones count on
    from it (a standby of the same log fences the taker as usual)."""
    lease = Lease(tmp_path / "l.sqlite", ttl_s=60)
    assert lease.acquire("a", min_epoch=4) == 4
    assert lease.acquire("b", now=time.time() + 120) == 5
    assert lease.acquire("c", now=time.time() + 240, min_epoch=2) == 6  # a floor below: +1
