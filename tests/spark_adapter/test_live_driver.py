"""A live pipeline driver as users run it: a paced input writer, a driver on a trigger, SIGTERM,
and a second driver that resumes from the first one's snapshots (real processes, local[2])."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from controller.scenario import load_scenario
from controller.testing import alternating_plan, assert_matches_reference
from core.lease import read_lease
from spark_adapter.actuator import PlanStore
from spark_adapter.operators import reference_output
from spark_adapter.query import compile_query
from spark_adapter.source import InputLog
from tests.conftest import ROOT, SCENARIOS

pytestmark = pytest.mark.spark
EXE = str(Path(sys.executable).parent / "trimtab")
SC = SCENARIOS / "seed-groupby-window.yaml"


def _spawn(args: list[str], log: Path, group: bool = False) -> subprocess.Popen:
    """A process with its stdout piped (its JSON result, read at the end) and its stderr in
    ``log``: a stderr pipe left unread while it runs blocks it once 64 KiB are written. With
    ``group``, in a process group (and session) of its own, as a shell's job is."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=group
        )
    proc.errlog = log  # type: ignore[attr-defined]
    return proc


def _err(p: subprocess.Popen) -> str:
    return p.errlog.read_text()[-3000:]  # type: ignore[attr-defined]


def _json_out(p: subprocess.Popen) -> dict:
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, _err(p)
    return json.loads(out.strip().splitlines()[-1])


def _sample(text: str, name: str) -> float:
    """One unlabelled sample of a Prometheus text exposition (-1 when absent)."""
    for ln in text.splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[-1])
    return -1.0


def test_live_driver_stops_on_sighup_and_the_next_one_resumes(tmp_path: Path) -> None:
    """Stopped by SIGHUP, as a driver run in a terminal is when the terminal closes (it died
    by the signal); SIGTERM and SIGINT stop it through the same handler
    (``core.stopping``), as the writer's SIGTERM here shows. The signal goes to the driver's
    whole process group, as a closing terminal's shell sends it to a job (and ``timeout`` or a
    job runner its SIGTERM): Spark's JVM, in that group too, stopped at once under the
    running query, and the driver said "ConnectionRefusedError", exit 1, its lease held; the
    JVM now runs in a group of its own and the driver stops Spark itself."""
    # the workdir does not exist yet: a live driver started first makes it and waits (it
    # opened its lease in the missing directory: OperationalError, exit 1)
    logs, work = tmp_path, tmp_path / "w"
    sc = load_scenario(SC)
    q = compile_query(sc)
    common = [str(SC), "--workdir", str(work)]
    run = [EXE, "pipeline", "run", *common, "--master", "local[2]", "--snapshot-every", "2"]
    drv = _spawn(
        [*run, "--trigger-s", "1", "--result", str(logs / "a.json")], logs / "a.err", group=True
    )
    gen = None
    try:
        deadline = time.monotonic() + 180
        while not (work / "app.json").exists():  # warmed and holding the lease
            assert time.monotonic() < deadline and drv.poll() is None, "the driver did not start"
            time.sleep(0.2)
        paced = ["--segments", "60", "--scale", "0.1", "--pace-s", "1"]
        gen = _spawn([EXE, "input", "generate", *common, *paced], logs / "gen.err")
        # started before its controller published a plan, the driver waits for one
        while len(list((work / "input").glob("seg-*.parquet"))) < 2:
            assert time.monotonic() < deadline and gen.poll() is None, "no input written"
            time.sleep(0.2)
        time.sleep(1.5)  # a trigger and more: a batch would have started
        assert drv.poll() is None, (logs / "a.err").read_text()[-2000:]
        assert not list((work / "metrics").glob("batch-*.json"))
        assert "waiting for a plan in" in (logs / "a.err").read_text()
        PlanStore(work / "plans").publish(alternating_plan(q))
        while len(list((work / "metrics").glob("batch-*.json"))) < 4:
            assert time.monotonic() < deadline and drv.poll() is None, "driver made no progress"
            time.sleep(0.5)
        os.kill(gen.pid, signal.SIGTERM)
        first_gen = _json_out(gen)
        os.killpg(drv.pid, signal.SIGHUP)  # the driver, its JVM if in its group
        first = _json_out(drv)
        # a clean stop lets the lease go: the next driver need not wait for it to run out
        held = read_lease(work / "lease.sqlite", leave_no_files=True)
        assert held is not None and held.epoch == 1 and not held.held()
    finally:
        for p in (gen, drv):
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
    a = json.loads((logs / "a.json").read_text())
    assert not a["ended"] and first_gen["closed"] is False
    assert a["warm_start"]["dry_batches"] == 1, a["warm_start"]  # warmed before its first batch
    assert first["warm_start"] == a["warm_start"]  # and it says so
    assert first_gen["segments"] < 60  # the writer stopped on SIGTERM
    # a stop drains: every segment written was processed and committed, gap-free
    assert first["committed"] == list(range(len(first["committed"])))
    ranges = [
        json.loads(f.read_text())["event_range"]
        for f in sorted((work / "metrics").glob("batch-*.json"))
    ]
    assert max(hi for _, hi in ranges) >> 32 == first_gen["segments"] - 1  # the last segment
    starts = [
        json.loads(f.read_text())["info"]["started_at"]
        for f in sorted((work / "metrics").glob("batch-*.json"))
    ]
    assert np.median(np.diff(starts)) >= 0.8  # it followed the live log, one batch a second
    # end-to-end: once the driver runs, a segment waits at most for the batch running when it
    # arrived and a trigger interval, then its own batch. Segments that arrived before the
    # first batch ended also waited for the query's start, so they are left out here; the
    # driver's p50 includes them.
    files = sorted((work / "metrics").glob("batch-*.json"))
    batches = [json.loads(f.read_text()) for f in files]
    durations = [b["duration_s"] for b in batches]
    ready = batches[0]["info"]["started_at"] + durations[0]
    steady = [
        lat
        for b in batches
        for lat in b["info"]["arrival_to_commit_s"]
        if b["info"]["started_at"] + b["duration_s"] - lat >= ready
    ]
    assert steady and min(durations) <= np.median(steady) <= 1.0 + 2 * max(durations)
    assert max(steady) <= 1.0 + 2 * max(durations) + 1.0, (steady, durations)
    assert first["arrival_to_commit_p50_s"] >= min(durations)
    assert first["arrival_to_commit_p99_s"] >= first["arrival_to_commit_p50_s"]
    assert len(first["backlog_segments"]) == len(first["committed"])

    rest = _spawn(
        [EXE, "input", "generate", *common, "--segments", "2", "--scale", "0.1", "--close"],
        logs / "rest.err",
    )
    more = _json_out(rest)
    assert more["closed"] and more["first"] == first_gen["segments"]
    second = _json_out(_spawn([*run, "--result", str(logs / "b.json")], logs / "b.err"))
    total = first_gen["segments"] + 2
    # the rest, then the flush batch that closes the windows at the end of the stream
    assert second["committed"] == list(range(len(second["committed"])))
    assert len(second["committed"]) > len(first["committed"]) and second["restored_through"] >= 1
    assert json.loads((logs / "b.json").read_text())["ended"]

    ref = InputLog(work / "ref")  # segments are deterministic: the same log, regenerated
    ref.generate(sc, total, scale=0.1)
    exp = reference_output(ref.read(), q)
    got = pd.concat(
        [pd.read_parquet(f) for f in sorted((work / "output").glob("batch=*/*.parquet"))],
        ignore_index=True,
    ).sort_values(["key", "window_start"], ignore_index=True)
    assert_matches_reference(got, exp)


def test_daemon_steers_a_live_pipeline_end_to_end(tmp_path: Path) -> None:
    """The production setup in three processes: a paced input writer, a live pipeline driver
    and the controller daemon in external mode. The daemon observes real batches and the
    running pipeline pins the daemon's plans at batch boundaries."""
    import sqlite3

    from controller.decisionlog import DecisionLog

    sc_path = SCENARIOS / "zipf-hotkey-shift.yaml"
    work = tmp_path / "pipe"
    cfg = tmp_path / "controller.yaml"
    cfg.write_text(
        json.dumps(
            {
                "control": {"interval_s": 2.0, "window_samples": 3},
                "placement": {"method": "least-loaded"},
                "shedding": {"method": "none"},
                "substrate": {
                    "kind": "spark-external",
                    "scenario": str(sc_path),
                    "workdir": str(work),
                    "partitions": 2,
                },
                "metrics": {"port": 0},
                "decision_log": str(tmp_path / "decisions.sqlite"),
                "state_dir": str(tmp_path / "state"),
            }
        )
    )  # JSON is YAML
    common = [str(sc_path), "--workdir", str(work)]
    procs = []
    jvms: list[int] = []
    try:
        daemon = _spawn([EXE, "run", "--config", str(cfg)], tmp_path / "daemon.err")
        procs.append(daemon)
        deadline = time.monotonic() + 60
        while not (work / "plans" / "current").exists():  # the daemon publishes plan 0
            assert time.monotonic() < deadline and daemon.poll() is None, _err(daemon)
            time.sleep(0.2)
        paced = ["--segments", "60", "--scale", "0.05", "--pace-s", "1"]
        gen = _spawn([EXE, "input", "generate", *common, *paced], tmp_path / "gen.err")
        procs.append(gen)
        drv = _spawn(
            [EXE, "pipeline", "run", *common, "--master", "local[2]", "--trigger-s", "1"],
            tmp_path / "drv.err",
        )
        procs.append(drv)
        deadline = time.monotonic() + 180
        pinned: list[tuple[int, int]] = []
        while not any(v >= 2 for _, v in pinned):  # plan 1 is the initial routing table
            assert time.monotonic() < deadline, f"no daemon plan pinned: {pinned}"
            assert drv.poll() is None and daemon.poll() is None, (
                f"a process died: {_err(drv)} {_err(daemon)}"
            )
            time.sleep(1.0)
            if (work / "planlog.sqlite").exists():
                with contextlib.closing(sqlite3.connect(work / "planlog.sqlite")) as db:
                    try:
                        pinned = db.execute("SELECT batch_id, plan_version FROM pins").fetchall()
                    except sqlite3.OperationalError:
                        pinned = []
        # the daemon's Prometheus endpoint reports the pipeline's own progress
        port = json.loads((tmp_path / "state" / "status.json").read_text())["metrics_port"]
        deadline = time.monotonic() + 60
        while True:  # the daemon reads the batch files at its next rounds
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
                text = resp.read().decode()
            seen = _sample(text, "trimtab_pipeline_last_batch_id")
            if seen >= 2 or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert seen >= 2, text[-2000:]
        assert _sample(text, "trimtab_pipeline_batch_duration_seconds_count") >= 3
        assert _sample(text, "trimtab_pipeline_rows_total") > 0
        # fault injection finds the live driver through its app.json
        jvms = [c.pid for c in psutil.Process(drv.pid).children(recursive=True)]
        r = subprocess.run(
            [EXE, "inject", "kill-driver", "--workdir", str(work)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        assert drv.wait(timeout=30) == -signal.SIGKILL
        for p in (gen, daemon):
            os.kill(p.pid, signal.SIGTERM)
        _json_out(gen)
        assert daemon.wait(timeout=60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for pid in jvms:  # the killed driver's JVM must not outlive it: end it by pid if it did
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
    rows = DecisionLog(tmp_path / "decisions.sqlite").last(50)
    observed = [r for r in rows if sum(r["observation"].get("node_load", {}).values()) > 0]
    assert observed, "the daemon must see the pipeline's real batches"
    # the hot keys were split on what the daemon saw of the running pipeline
    assert any(r["kind"].endswith("reroute") and "0 hot key" not in r["reason"] for r in rows)
    versions = [v for _, v in sorted(pinned)]
    assert versions == sorted(versions)  # a running pipeline only moves forward in plans


def test_a_pipeline_a_batch_run_ended_refuses_to_run_on(tmp_path: Path) -> None:
    """A batch run closes every window in a last batch of its own, outside Spark's numbering
    of the stream's batches. Segments appended after it and run again took that batch's id:
    its output (the windows it closed) was replaced, and the next batch failed on an infinite
    watermark (a Python worker's OverflowError under a screen of JVM trace). Refused now,
    before Spark starts, with the ended pipeline's output and commits as they were."""
    import shutil
    import sqlite3

    sc_path, work = SCENARIOS / "seed-groupby-window.yaml", tmp_path / "w"
    gen = [EXE, "input", "generate", str(sc_path), "--workdir", str(work), "--scale", "0.1"]
    run = [EXE, "pipeline", "run", str(sc_path), "--workdir", str(work), "--default-plan"]
    assert subprocess.run([*gen, "--segments", "2"], capture_output=True).returncode == 0
    # a warm and an active standby wait meanwhile: the primary's end leaves them nothing to
    # take over (each ran a batch after the last one: an infinite watermark's OverflowError,
    # exit 1)
    standbys = {
        role: subprocess.Popen(
            [*run[:-1], "--role", role], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for role in ("standby", "active")
    }
    said: dict[str, tuple[str, str]] = {}
    try:
        deadline = time.time() + 180
        for ready in (work / "_STANDBY_READY", work / "active-standby" / "_READY"):
            while not ready.exists() and all(p.poll() is None for p in standbys.values()):
                assert time.time() < deadline, f"no {ready.name}: a standby never got ready"
                time.sleep(0.5)
        first = subprocess.run(run, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        said = {role: p.communicate(timeout=120) for role, p in standbys.items()}
    finally:
        for p in standbys.values():
            if p.poll() is None:  # a failed check: end the standbys this test started
                p.kill()
                p.wait()
    assert json.loads(first.stdout)["committed"] == [0, 1, 2]  # 2 segments and the closing

    def ended() -> tuple[list, dict]:
        with contextlib.closing(sqlite3.connect(work / "planlog.sqlite")) as db:
            commits = db.execute("SELECT * FROM commits ORDER BY batch_id").fetchall()
        out = {f.name: f.read_bytes() for f in (work / "output" / "batch=2").glob("*.parquet")}
        return commits, out

    before = ended()
    for role, who in (("standby", "standby"), ("active", "active standby")):
        out, err = said[role]
        assert standbys[role].returncode == 0, err[-3000:]
        assert json.loads(out) == {"role": role, "took_over": False, "ended_at": 2}
        assert f"note: the pipeline ended while this {who} waited for the lease" in err
    assert [c[0] for c in before[0]] == [0, 1, 2]  # the standby ran no batch after the last
    # each let the lease go as it stopped, the standbys in turn (it was held a lease's time
    # on; the primary's connection was never closed, leaving lease.sqlite-wal and -shm behind)
    lease = read_lease(work / "lease.sqlite", leave_no_files=True)
    assert lease is not None and lease.epoch == 3 and not lease.held()
    assert not list(work.glob("lease.sqlite-*"))
    assert before[1]  # the closing batch wrote the windows it closed
    refused = (
        "error: --workdir: this pipeline has ended: batch 2 closed every window (a batch run "
        "ends the stream, as a live one does once its log is closed); nothing more runs here: "
        "start a new --workdir (a live run, --trigger-s, keeps its windows open)\n"
    )
    segs = sorted(p.name for p in (work / "input").glob("seg-*"))
    more = subprocess.run([*gen, "--segments", "1"], capture_output=True, text=True)
    assert more.returncode == 2 and more.stderr == refused  # its segments would never run
    assert sorted(p.name for p in (work / "input").glob("seg-*")) == segs
    # nor would a batch pin an operator's new parameters: no plan is published
    plans = sorted(p.name for p in (work / "plans").iterdir())
    pub = [EXE, "publish-operator", "filter_v", "--params", '{"value": 50}', "--workdir", str(work)]
    pub += ["--scenario", str(sc_path)]
    published = subprocess.run(pub, capture_output=True, text=True)
    assert published.returncode == 2 and published.stderr == refused, published.stderr
    assert sorted(p.name for p in (work / "plans").iterdir()) == plans
    # nor a controller daemon: nothing runs there for its plans to steer
    import yaml

    cfg = tmp_path / "c.yaml"
    sub = {"kind": "spark-external", "scenario": str(sc_path), "workdir": str(work)}
    doc = {"substrate": sub, "metrics": {"port": 0}, "state_dir": str(tmp_path / "st")}
    cfg.write_text(yaml.safe_dump(doc | {"decision_log": str(tmp_path / "st" / "d.sqlite")}))
    ended_line = f"the pipeline in {work} has ended: batch 2 closed every window"
    for cmd in (["run", "--config", str(cfg), "--rounds", "1"], ["validate", str(cfg)]):
        daemon = subprocess.run([EXE, *cmd], capture_output=True, text=True, timeout=60)
        assert daemon.returncode == 2 and ended_line in daemon.stderr, daemon.stderr
    assert sorted(p.name for p in (work / "plans").iterdir()) == plans
    assert sorted(p.name for p in (tmp_path / "st").rglob("*")) == []  # no log, no status
    # a segment appended by other means (a copy): the run refuses it
    other = tmp_path / "other"
    gen_other = [EXE, "input", "generate", str(sc_path), "--workdir", str(other), "--scale", "0.1"]
    assert subprocess.run([*gen_other, "--segments", "3"], capture_output=True).returncode == 0
    shutil.copyfile(other / "input" / "seg-000002.parquet", work / "input" / "seg-000002.parquet")
    again = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and again.stderr == refused, again.stderr[-3000:]
    assert ended() == before


def test_a_driver_whose_jvm_is_killed_says_so_in_one_line(tmp_path: Path) -> None:
    """Spark's JVM killed under a live driver (the kernel's out-of-memory killer, a ``kill``):
    the driver printed py4j's traces of the lost connection, then "error:
    ConnectionRefusedError: [Errno 111] Connection refused". Now one line naming the JVM and
    the signal, exit 1."""
    import re

    work = tmp_path / "w"
    gen = [EXE, "input", "generate", str(SC), "--workdir", str(work), "--segments", "2"]
    assert subprocess.run([*gen, "--scale", "0.1"], capture_output=True).returncode == 0
    run = [EXE, "pipeline", "run", str(SC), "--workdir", str(work), "--default-plan"]
    drv = _spawn([*run, "--trigger-s", "1"], tmp_path / "d.err")
    try:
        deadline = time.monotonic() + 180
        while not list((work / "metrics").glob("batch-*.json")):  # a batch has run
            assert time.monotonic() < deadline and drv.poll() is None, _err(drv)
            time.sleep(0.2)
        # the JVM this driver started (its child), not any other on the machine
        jvm = [c for c in psutil.Process(drv.pid).children() if "java" in c.name()]
        assert len(jvm) == 1, jvm
        jvm[0].kill()
        drv.communicate(timeout=120)
    finally:
        if drv.poll() is None:
            drv.kill()
            drv.wait()
    err = (tmp_path / "d.err").read_text()
    assert drv.returncode == 1, err[-3000:]
    assert "Traceback" not in err and "Py4J" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    pattern = rf"error: Spark's JVM \(pid {jvm[0].pid}\) ended under the run, killed by signal 9 .*"
    assert re.fullmatch(pattern, last), last
    # and it let the lease go as it stopped: a standby takes over at once, not a lease's time
    # later (released, expires 0, not merely run out)
    lease = read_lease(work / "lease.sqlite", leave_no_files=True)
    assert lease is not None and lease.expires == 0, lease


def test_a_lost_connection_trace_waits_for_the_jvm_to_be_seen_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A killed JVM resets py4j's connection before it is reaped: py4j's "Exception while
    sending command" trace was logged while the JVM still looked alive, and reached the
    terminal above the one-line error (one CI run). The filter waits for the JVM to end; a
    record that is not of a lost connection, or not py4j's, passes at once."""
    import logging

    from spark_adapter import session

    jvm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    monkeypatch.setattr(session, "_jvm_proc", lambda: jvm)
    try:

        def record(name: str, exc: BaseException | None) -> logging.LogRecord:
            info = (type(exc), exc, None) if exc else None
            return logging.LogRecord(name, logging.ERROR, "x.py", 1, "m", None, info)

        keep = session._AfterTheJvm()
        t0 = time.monotonic()
        assert keep.filter(record("py4j.clientserver", None))  # the JVM runs: kept, no wait
        assert keep.filter(record("trimtab", ConnectionResetError()))  # not py4j's
        assert time.monotonic() - t0 < 0.3
        # py4j's trace of the reset: held until the JVM ends (here within 0.5 s), then dropped
        assert not keep.filter(record("py4j.clientserver", ConnectionResetError(104, "reset")))
        assert jvm.poll() is not None  # it waited: a filter dropping at once leaves it running
    finally:
        jvm.kill()
        jvm.wait()
