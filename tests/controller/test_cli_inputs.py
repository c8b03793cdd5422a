"""What a user's bad input gets: one line, the right exit code, and no file touched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SCENARIOS

EXE = str(Path(sys.executable).parent / "trimtab")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_decisions_never_writes_a_file_that_is_not_its_own(tmp_path: Path) -> None:
    foreign = tmp_path / "other.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    db.close()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for f in (foreign, empty):
        before = _digest(f)
        r = _run("decisions", "--decision-log", str(f))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().count("\n") == 0 and "not a trimtab decision log" in r.stderr
        assert "Traceback" not in r.stderr
        assert _digest(f) == before  # not a byte changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "other.sqlite"]


def test_zero_ticks_is_refused() -> None:
    r = _run("replay", str(SCENARIOS / "seed-shedding-2node.yaml"), "--ticks", "0", "--json")
    assert r.returncode == 2 and "ticks" in r.stderr


def _scenario_with(tmp: Path, **changes: object) -> Path:
    import yaml

    d = yaml.safe_load((SCENARIOS / "seed-shedding-2node.yaml").read_text())
    for key, value in changes.items():
        if key == "rate":
            d["streams"][0]["rate"] = value
        else:
            d["controller"][key] = value
    f = tmp / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


BAD_SCENARIOS = [
    ("rate", {"kind": "trace", "path": "nope.csv"}, "streams.0.rate.path: trace file not found"),
    ("rate", {"kind": "trace", "path": "empty.csv"}, "needs at least two rows"),
    ("rate", {"kind": "trace", "path": "header.csv"}, "the header must be t_s,rate (got a,b)"),
    ("rate", {"kind": "constant", "rate": float("inf")}, "streams.0.rate.rate"),
    ("partitioner", "nosuch", "controller.partitioner: unknown partitioner 'nosuch'"),
    ("placement", {"method": "nosuch"}, "controller.placement.method: unknown method 'nosuch'"),
]


def test_every_scenario_input_is_checked_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("t_s,rate\n")
    (tmp_path / "header.csv").write_text("a,b\n0,1\n10,2\n")
    for key, value, message in BAD_SCENARIOS:
        f = _scenario_with(tmp_path, **{key: value})
        for cmd in (["validate", str(f)], ["replay", str(f), "--json"]):
            r = _run(*cmd)
            assert r.returncode == 2, (key, value, r.stderr)
            assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_spark_replay_progress_bar_counts_batches(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """On a terminal a Spark replay shows batches done of total, a rate and the time left."""
    import io

    from rich.console import Console

    import controller.cli.replays as rp
    from controller.scenario import load_scenario

    buf = io.StringIO()
    monkeypatch.setattr(rp, "err", Console(file=buf, force_terminal=True, width=120))
    monkeypatch.setattr(rp, "progress", lambda enabled: object())
    seen = []

    def fake_run(sc, progress=None, **kw):  # type: ignore[no-untyped-def]
        for i in range(4):
            progress(i + 1, 4)
            seen.append(i + 1)
        return "result"

    sc = load_scenario(SCENARIOS / "zipf-moderate.yaml")
    assert rp._replay_spark_cli(fake_run, True, sc) == "result"
    assert seen == [1, 2, 3, 4]
    out = buf.getvalue()
    assert "4/4" in out and "batches/s" in out


def test_pipeline_verify_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """A workdir where no batch ran, a missing workdir or --input: exit 2, one line, the
    directory as it was (verify reads only; its SQLite is opened read-only)."""
    sc = str(SCENARIOS / "spark-overload-ramp.yaml")
    empty = tmp_path / "w"
    (empty / "metrics").mkdir(parents=True)
    cases = [
        (["--workdir", str(empty)], "no plan log"),
        (["--workdir", str(tmp_path / "nope")], "--workdir"),
        (["--workdir", str(empty), "--input", str(tmp_path / "none")], "--input"),
    ]
    for args, needle in cases:
        r = _run("pipeline", "verify", sc, *args)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    db = empty / "planlog.sqlite"  # a plan log with no commit yet
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE pins (batch_id INTEGER, plan_version INTEGER, wm_prev, wm)")
    con.execute("CREATE TABLE commits (batch_id INTEGER, rows_out INTEGER, info TEXT)")
    con.commit()
    con.close()
    before = _digest(db)
    r = _run("pipeline", "verify", sc, "--workdir", str(empty))
    assert r.returncode == 2 and "no committed batch" in r.stderr, r.stderr
    assert _digest(db) == before
    assert sorted(p.name for p in empty.iterdir()) == ["metrics", "planlog.sqlite"]


def _number_options() -> list[tuple[list[str], str]]:
    """Every option of every command that takes a number with a fraction: (command path,
    flag). Found from the command tree, so a flag added later is swept too."""
    import typer.main

    from controller.cli import app

    found = []

    def walk(cmd, path: list[str]) -> None:  # type: ignore[no-untyped-def]
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])
        for p in getattr(cmd, "params", []):
            td = getattr(p, "type_descriptor", None)
            if td is not None and td.annotation is float:
                found.append((path, p.opts[0]))

    walk(typer.main.get_command(app), [])
    return found


def test_every_number_flag_refuses_inf_and_nan() -> None:
    """typer reads inf, nan and 1e999 as floats: --trigger-s inf opened the driver's lease in
    a missing workdir (OperationalError, exit 1), partition --seconds inf overflowed (exit 1),
    input generate --pace-s inf slept forever between segments. A bounded flag (--trigger-s)
    says so too, not that nan "should be less than or equal to 3600"."""
    from typer.testing import CliRunner

    from controller.cli import app

    options = _number_options()
    assert len(options) >= 17, options  # the sweep found the flags (typer's tree was read)
    failures = []
    for path, flag in options:
        for bad in ("inf", "-inf", "nan", "1e999"):
            r = CliRunner().invoke(app, [*path, flag, bad])
            err = r.stderr.strip()
            named = f"'{flag}'" in err and f"{bad}: a finite number is needed" in err
            if r.exit_code != 2 or not named or len(err.splitlines()) != 1:
                failures.append(f"{' '.join(path)} {flag} {bad}: exit {r.exit_code}: {err!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("path", "flag", "bound"),
    [
        (["input", "generate"], "--pace-s", 3600),
        (["pipeline", "run"], "--trigger-s", 3600),
        (["pipeline", "run"], "--lease-ttl-s", 600),
        (["inject", "stop-executor", "1"], "--seconds", 86400),
    ],
)
def test_a_wait_too_long_to_mean_anything_is_refused_by_name(
    tmp_path: Path, path: list[str], flag: str, bound: int
) -> None:
    """Finite but huge waits passed the checks and failed later: ``input generate --pace-s
    1e10`` overflowed its wait (OverflowError, exit 1); ``pipeline run --trigger-s 1e300``
    failed in Spark's interval parser once Spark had started and made the workdir; a lease or
    a stop past Python's longest wait (about 9.2e9 s) crashed the lease's renewal or the
    helper that resumes a stopped executor. Bounded as the config's own (control.interval_s,
    control.lease_timeout_s), a stop at a day."""
    work = tmp_path / "w"
    sc = [] if path[0] == "inject" else [str(SCENARIOS / "seed-groupby-window.yaml")]
    args = [EXE, *path, *sc, "--workdir", str(work), flag, str(bound * 1.01)]
    # before the bounds these ran on (an hour's pace, Spark started): the timeout fails them
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    err = r.stderr.strip()
    assert r.returncode == 2 and err.splitlines() == [err], err
    assert f"'{flag}'" in err and f"less than or equal to {bound}" in err, err
    assert not work.exists()


def test_a_log_of_another_scenarios_streams_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """A log holds one scenario's streams. Appending another scenario's segments, or running
    a scenario over events imported under another ``--stream``, ran: the rows no operator
    reads were dropped unsaid (an imported log's whole output was empty). Refused by name,
    before Spark starts, nothing appended."""
    seed, zipf = SCENARIOS / "seed-groupby-window.yaml", SCENARIOS / "zipf-moderate.yaml"
    work = tmp_path / "w"
    gen = [EXE, "input", "generate", "--workdir", str(work), "--segments", "1", "--scale", "0.01"]
    assert subprocess.run([*gen, str(seed)], capture_output=True).returncode == 0
    r = subprocess.run([*gen, str(zipf)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "seg-000000.parquet holds rows of stream 's', not a stream of the scenario (events)" in (
        r.stderr
    )
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in (work / "input").glob("seg-*")) == ["seg-000000.parquet"]
    events = tmp_path / "e.csv"
    events.write_text("ts,key\n0,a\n0.5,b\n1.2,a\n")
    imp = [EXE, "input", "import", str(events), "--workdir", str(tmp_path / "i")]
    assert subprocess.run([*imp, "--stream", "clicks"], capture_output=True).returncode == 0
    run = [EXE, "pipeline", "run", str(seed), "--workdir", str(tmp_path / "i"), "--default-plan"]
    replay = [EXE, "replay", str(seed), "--substrate", "spark", "--input", str(tmp_path / "i")]
    for cmd, flag in ((run, "--workdir"), (replay, "--input")):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {flag}: input log: "), r.stderr
        assert "holds rows of stream 'clicks', not a stream of the scenario (s)" in r.stderr
        assert "WARN" not in r.stderr  # refused before Spark started
    assert not (tmp_path / "i" / "planlog.sqlite").exists()


def test_a_spark_replay_into_another_runs_workdir_is_refused_before_spark(
    tmp_path: Path,
) -> None:
    """A second ``replay --substrate spark --workdir W`` into a run's W started Spark and then
    failed on ``FileExistsError: segment 0 already exists`` (exit 1): refused first, exit 2."""
    seed, work = SCENARIOS / "seed-groupby-window.yaml", tmp_path / "w"
    gen = [EXE, "input", "generate", str(seed), "--workdir", str(work), "--segments", "1"]
    assert subprocess.run(gen, capture_output=True).returncode == 0
    replay = [EXE, "replay", str(seed), "--substrate", "spark", "--batches", "1"]
    r = subprocess.run([*replay, "--workdir", str(work)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"error: --workdir: {work} holds another run (its input log or plan log): a replay "
        "writes its own; give a new or empty directory\n"
    )
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "planlog.sqlite").write_bytes(b"")
    r = subprocess.run([*replay, "--workdir", str(tmp_path / "p")], capture_output=True, text=True)
    assert r.returncode == 2 and "holds another run" in r.stderr, r.stderr


def test_a_spark_replay_into_a_workdir_another_replay_holds_is_refused(tmp_path: Path) -> None:
    """Two replays started together on one new W both passed the check above (nothing was
    written yet) and wrote one input log and plan log. A replay now holds W (``flock`` on
    ``W/.replay.lock``) for its run; a second one is refused, naming the holder's pid."""
    import fcntl
    import os

    work = tmp_path / "w"
    work.mkdir()
    fd = os.open(work / ".replay.lock", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"4242")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running replay holds it
        seed = SCENARIOS / "seed-groupby-window.yaml"
        replay = [EXE, "replay", str(seed), "--substrate", "spark", "--batches", "1"]
        r = subprocess.run([*replay, "--workdir", str(work)], capture_output=True, text=True)
    finally:
        os.close(fd)
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"error: --workdir: {work} is in use by another replay (pid 4242); give another directory\n"
    )
    assert sorted(p.name for p in work.iterdir()) == [".replay.lock"]  # nothing written


def test_pipeline_verify_with_another_pipelines_scenario_says_so(tmp_path: Path) -> None:
    """Given another pipeline's scenario, verify printed "differs: N rows against the
    reference 0" (exit 1), as if the pipeline's output were wrong. Now its input of another
    stream, or its batches of other key groups, are named (exit 2)."""
    import numpy as np
    import pandas as pd

    from controller.scenario import load_scenario
    from spark_adapter.batchstats import BatchStats, write_batch_stats
    from spark_adapter.source import InputLog

    w = tmp_path / "w"
    InputLog(w / "input").generate(load_scenario(SCENARIOS / "seed-groupby-window.yaml"), 1, 0.01)
    r = _run("pipeline", "verify", str(SCENARIOS / "zipf-moderate.yaml"), "--workdir", str(w))
    assert r.returncode == 2, r.stderr
    assert "holds rows of stream 's', not a stream of the scenario (events)" in r.stderr
    batch = BatchStats(  # a batch of the 8 key groups seed-groupby-window runs
        batch_id=0,
        plan_version=0,
        replay=False,
        duration_s=1.0,
        rows=np.array([5, 5]),
        busy_s=np.array([0.1, 0.1]),
        kg_rows=np.zeros(8, dtype=np.int64),
        key_rows=pd.DataFrame({"key": [], "side": [], "rows": []}),
        stream_rows={"s": 10},
        state_rows=0,
        state_moved=0,
        late=0,
        rows_out=0,
        event_range=(0, 9),
        max_ts=0.9,
    )
    (w / "metrics").mkdir()
    write_batch_stats(batch, w / "metrics")
    other = SCENARIOS / "spark-anticorrelated.yaml"  # stream s too, in 16 key groups
    r = _run("pipeline", "verify", str(other), "--workdir", str(w))
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"error: {other}: its keyed operator has 16 key groups, but the pipeline in {w} "
        f"({w / 'metrics' / 'batch-00000000.json'}) has 8\n"
    )


def test_sighup_stops_a_live_writer_cleanly(tmp_path: Path) -> None:
    """A live writer run in a terminal gets SIGHUP when the terminal closes: it died by the
    signal, without its summary. It stops as on SIGTERM, after a whole segment."""
    import json
    import signal
    import time

    from spark_adapter.source import InputLog

    argv = ["input", "generate", str(SCENARIOS / "seed-groupby-window.yaml")]
    argv += ["--workdir", str(tmp_path), "--scale", "0.05", "--pace-s", "0.2"]
    p = subprocess.Popen([EXE, *argv], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(InputLog(tmp_path / "input").segments()) < 2:
            assert time.monotonic() < deadline and p.poll() is None, "no segment written"
            time.sleep(0.1)
        p.send_signal(signal.SIGHUP)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0
    written = json.loads(out)["segments"]
    assert 2 <= written == len(InputLog(tmp_path / "input").segments()), out


def test_input_generate_refuses_a_query_the_spark_pipeline_cannot_run(tmp_path: Path) -> None:
    """The input log feeds the Spark pipeline only: for a simulator-only query (no keyed
    windowed operator) it wrote a whole log that every `pipeline run` then refused."""
    work = tmp_path / "w"
    sc = SCENARIOS / "chain-arrival.yaml"
    r = _run("input", "generate", str(sc), "--workdir", str(work), "--segments", "1")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"error: {sc}: operators: the Spark pipeline needs a keyed windowed aggregate or join"
    )
    assert not work.exists()
