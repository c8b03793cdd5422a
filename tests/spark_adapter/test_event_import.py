"""A user's own events: imported into the input log, checked row by row, replayed on Spark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from controller.scenario import load_scenario
from controller.spark_replay import replay_spark
from spark_adapter.event_import import EventImportError, import_events
from spark_adapter.source import InputLog, first_event_id

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "events-sample.csv"


def test_segments_follow_event_time_and_speedup(tmp_path: Path) -> None:
    ev = tmp_path / "ev.jsonl"
    pd.DataFrame(
        {"t": [100.0, 100.5, 103.9, 101.2, 107.0], "k": [3, 4, 3, 5, 6], "x": [1, 2, 3, 4, 5]}
    ).to_json(ev, orient="records", lines=True)
    log = InputLog(tmp_path / "input")
    rep = import_events([ev], log, "s", 1.0, ts_col="t", key_col="k", value_col="x", speedup=2.0)
    assert rep.rows_written == 5 and rep.bad_rows == 0 and not rep.string_keys
    # times 0, 0.25, 0.6, 1.95, 3.5 (shifted, halved): segments 0, 1, 3
    assert log.segments() == [0, 1, 3]
    seg0 = log.read([0])
    assert seg0["key"].tolist() == [3, 4, 5] and seg0["v"].tolist() == [1.0, 2.0, 4.0]
    assert seg0["event_id"].tolist() == [0, 1, 2]
    assert log.read([3])["event_id"].tolist() == [first_event_id(3)]
    assert rep.segments == 3 and rep.span_s == pytest.approx(3.5)


def test_string_keys_hash_alike_in_every_process(tmp_path: Path) -> None:
    ev = tmp_path / "ev.csv"
    ev.write_text("ts,user\n0,alice\n0.1,bob\n0.2,alice\n")
    log = InputLog(tmp_path / "input")
    rep = import_events([ev], log, "s", 1.0, key_col="user")
    keys = log.read()["key"].tolist()
    assert rep.string_keys and keys[0] == keys[2] != keys[1]
    assert all(0 <= k < 2**53 for k in keys)
    code = (
        "import pandas as pd, numpy as np;"
        "print(int(pd.util.hash_array(np.array(['alice'], dtype=object))[0] & (2**53 - 1)))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == keys[0]


def test_bad_rows_are_counted_never_dropped_silently(tmp_path: Path) -> None:
    ev = tmp_path / "ev.csv"
    ev.write_text("ts,key,v\n0,1,2\nnan,2,2\n1,-3,2\n2,4,inf\n3,5,1\n")
    with pytest.raises(EventImportError, match=r"3 of 5 rows are bad.*ev.csv:3: ts"):
        import_events([ev], InputLog(tmp_path / "a"), "s", 1.0, value_col="v")
    assert InputLog(tmp_path / "a").segments() == []  # nothing written
    rep = import_events(
        [ev], InputLog(tmp_path / "b"), "s", 1.0, value_col="v", max_bad_fraction=0.7
    )
    assert rep.bad_rows == 3 and rep.rows_written == 2
    with pytest.raises(EventImportError, match="already holds an input log"):
        import_events([ev], InputLog(tmp_path / "b"), "s", 1.0, max_bad_fraction=1.0)
    with pytest.raises(EventImportError, match="--ts-col: no column 'time'"):
        import_events([ev], InputLog(tmp_path / "c"), "s", 1.0, ts_col="time")


@pytest.mark.parametrize(
    ("name", "write", "place"),
    [
        ("ev.csv", lambda f: f.write_text("ts,key\n0,1\n1,2\nx,3\n"), "ev.csv:4"),
        (
            "ev.jsonl",
            lambda f: f.write_text(
                '{"ts": 0, "key": 1}\n{"ts": 1, "key": 2}\n{"ts": "x", "key": 3}\n'
            ),
            "ev.jsonl:3",
        ),
        (
            "ev.parquet",
            lambda f: pd.DataFrame({"ts": [0.0, 1.0, np.nan], "key": [1, 2, 3]}).to_parquet(f),
            "ev.parquet row 3",
        ),
    ],
)
def test_a_bad_row_is_named_where_an_editor_finds_it(tmp_path: Path, name, write, place) -> None:  # type: ignore[no-untyped-def]
    """The third event is bad: a CSV names its line (the header is line 1), a JSON-lines
    file its line, Parquet its row; `partition --trace` names the same place."""
    from controller.partition import read_key_trace

    ev = tmp_path / name
    write(ev)
    with pytest.raises(
        EventImportError,
        match=rf"first: .*{place}: ts: neither a number of seconds nor a date-time",
    ):
        import_events([ev], InputLog(tmp_path / "a"), "s", 1.0)
    with pytest.raises(
        ValueError, match=rf"--trace: .*{place}: ts: neither a number of seconds nor a date-time"
    ):
        read_key_trace(ev)


def test_imported_events_replay_on_spark_exactly(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The shipped sample (string user ids, epoch-second times) imported and replayed on
    Spark with the controller in the loop: the sink equals the reference."""
    imp = tmp_path / "imported"
    rep = import_events(
        [SAMPLE], InputLog(imp / "input"), "clicks", 3.0, key_col="user", value_col="bytes"
    )  # 3 s segments: 10 batches
    sc = load_scenario(ROOT / "examples" / "events-scenario.yaml")
    res = replay_spark(sc, spark=spark, workdir=tmp_path / "run", input_dir=imp, interval_batches=2)
    s = res.summary
    assert s["output_matches_reference"] is True
    assert s["rows_in"] == rep.rows_written == 3600
    assert s["batches"] == rep.segments
    assert s["rows_out"] > 0
    other = load_scenario(ROOT / "scenarios" / "zipf-hotkey-shift.yaml")
    with pytest.raises(ValueError, match="stream 'clicks' is not a stream"):
        replay_spark(other, spark=spark, workdir=tmp_path / "run2", input_dir=imp)


def _import_sample(work: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``trimtab input import`` of the shipped sample (user keys, bytes values) into ``work``."""
    exe = str(Path(sys.executable).with_name("trimtab"))
    cmd = [exe, "input", "import", str(SAMPLE), "--workdir", str(work), "--stream", "clicks"]
    cmd += ["--key-col", "user", "--value-col", "bytes", *more]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_import_cli_one_line_errors(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("trimtab"))
    ok = _import_sample(tmp_path / "w")
    assert ok.returncode == 0, ok.stderr
    assert '"rows_written": 3600' in ok.stdout
    for args, needle in (
        (["--key-col", "nope"], "--key-col: no column 'nope'"),
        (["--format", "xml"], "--format: 'xml'"),
        (["--speedup", "0"], "--speedup"),
    ):
        bad = subprocess.run(
            [
                exe,
                "input",
                "import",
                str(SAMPLE),
                "--workdir",
                str(tmp_path / "x"),
                "--stream",
                "clicks",
                *args,
            ],
            capture_output=True,
            text=True,
        )
        assert bad.returncode == 2 and needle in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    nosuch = subprocess.run(
        [
            exe,
            "replay",
            str(ROOT / "examples" / "events-scenario.yaml"),
            "--input",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
    )
    assert nosuch.returncode == 2 and "--input" in nosuch.stderr


def test_a_file_named_twice_or_without_the_column_is_refused(tmp_path: Path) -> None:
    """A file named twice (a glob and its name, a link) had its events imported twice; a file
    without the key column had every row counted bad, and was named only as its first bad row.
    Both are refused by name before anything is written, by import and profile alike."""
    from typer.testing import CliRunner

    from controller.cli import app

    other = tmp_path / "other.csv"
    other.write_text("ts,uid,bytes\n1,a,5\n")
    (tmp_path / "link.csv").symlink_to(SAMPLE)
    flags = ["--key-col", "user", "--value-col", "bytes"]
    imp = ["input", "import", "--workdir", str(tmp_path / "w"), "--stream", "clicks", *flags]
    cases = (
        (
            [str(SAMPLE), str(SAMPLE)],
            f"error: {SAMPLE}: named twice: its events would be read twice",
        ),
        ([str(SAMPLE), str(tmp_path / "link.csv")], f"the same file as {SAMPLE}"),
        (
            [str(SAMPLE), str(other)],
            f"error: --key-col: no column 'user' in {other} (columns: ts, uid, bytes)",
        ),
    )
    for files, needle in cases:
        for argv in ([*imp, *files], ["input", "profile", *files, *flags[:2]]):
            r = CliRunner().invoke(app, argv)
            assert r.exit_code == 2 and needle in r.stderr, (argv, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()


def test_profile_tells_skew_rate_and_churn(tmp_path: Path) -> None:
    from controller.event_profile import profile_events

    before = sorted(p.name for p in SAMPLE.parent.iterdir())
    prof = profile_events([SAMPLE], key_col="user", plot=tmp_path / "p.png")
    assert prof["events"] == 3600 and prof["bad_rows"] == 0
    # the sample's burst user: 600 burst events plus its own
    assert prof["top_keys"][0]["key"] == "u0999" and prof["top_keys"][0]["share"] > 0.16
    assert 0.8 < prof["zipf_s"] < 1.4  # generated with Zipf 1.1 over 1,000 users
    assert prof["rate_per_s"]["max"] > 2 * prof["rate_per_s"]["p50"]  # the burst
    assert 0.0 < prof["hot_set_churn"] < 1.0
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert sorted(p.name for p in SAMPLE.parent.iterdir()) == before  # read-only


def test_profile_does_not_fit_a_zipf_exponent_to_two_keys(tmp_path: Path) -> None:
    """Two points fit any exponent: a stream of two keys, one with 3 of 4 events, was profiled
    as "Zipf s = 0.0", which reads as uniform. No exponent is reported; the text says why."""
    from controller.event_profile import profile_events

    events = tmp_path / "e.csv"
    events.write_text("ts,key\n0,a\n0.5,a\n1.2,a\n2,b\n")
    prof = profile_events([events])
    assert prof["distinct_keys"] == 2 and prof["zipf_s"] is None
    exe = str(Path(sys.executable).with_name("trimtab"))
    r = subprocess.run([exe, "input", "profile", str(events)], capture_output=True, text=True)
    assert r.returncode == 0 and "Zipf s not fitted (fewer than 3 distinct keys)" in r.stdout
    events.write_text("ts,key\n0,a\n0.5,a\n1.2,a\n1.5,a\n2,b\n2.1,b\n2.2,c\n")
    assert profile_events([events])["zipf_s"] > 0.5  # three keys are fitted


def test_profile_measures_rates_in_whole_windows_only(tmp_path: Path) -> None:
    """A window longer than the events gave a rate over time they lack (1e12 s windows: 3.6e-09
    events/s) and a churn of 0 from one window; a window near their span halved the rate (the
    last window ends with the events, part of the way in). Such a window is refused by name,
    and rates are of whole windows."""
    from controller.event_profile import profile_events
    from spark_adapter.event_import import EventImportError

    events = tmp_path / "e.csv"
    events.write_text("ts,key\n" + "".join(f"{i / 100},{i % 7}\n" for i in range(1000)))
    for w in (1.0, 3.0, 9.0):  # 100 events a second, 9.99 s; the last window is partial
        r = profile_events([events], window_s=w)["rate_per_s"]
        assert r["mean"] == r["p50"] == r["max"] == 100.0, (w, r)
    with pytest.raises(EventImportError, match=r"--window-s: 12 s is longer than the events' "):
        profile_events([events], window_s=12.0)
    # events all at one time: no --window-s fits (it said "give at most 0 s")
    instant = tmp_path / "instant.csv"
    instant.write_text("ts,key\n5,a\n5,b\n5.0004,a\n")
    with pytest.raises(EventImportError) as e:
        profile_events([instant], window_s=0.001)
    assert str(e.value) == (
        "ts: the events span 0.0004 s: a rate over time needs them to span at least one "
        "window, and the shortest --window-s is 0.001 s"
    )


def test_profile_cli(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("trimtab"))
    r = subprocess.run(
        [exe, "input", "profile", str(SAMPLE), "--key-col", "user", "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and '"zipf_s"' in r.stdout
    bad = subprocess.run(
        [exe, "input", "profile", str(SAMPLE)], capture_output=True, text=True
    )  # the sample's key column is 'user'
    assert bad.returncode == 2 and "--key-col: no column 'key'" in bad.stderr


def test_imported_events_run_through_the_pipeline_driver(tmp_path: Path) -> None:
    """`trimtab pipeline run --workdir W` on imported events: every window closed, the sink
    equal to the reference computed from the same log, and the log kept whole (it is closed:
    retention has nothing to bound), so `pipeline verify` checks the run with no `--input`."""
    import json

    from controller.testing import assert_matches_reference
    from spark_adapter.operators import reference_output
    from spark_adapter.query import compile_query

    exe = str(Path(sys.executable).with_name("trimtab"))
    work = tmp_path / "w"
    imp = _import_sample(work, "--tick-s", "3")  # 10 segments, not 30: a third of the batches
    assert imp.returncode == 0, imp.stderr
    scenario = ROOT / "examples" / "events-scenario.yaml"
    q = compile_query(load_scenario(scenario))
    exp = reference_output(InputLog(work / "input").read(), q)
    segments = InputLog(work / "input").segments()
    run = subprocess.run(
        [exe, "pipeline", "run", str(scenario), "--workdir", str(work), "--default-plan"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    no_plan = subprocess.run(
        [exe, "pipeline", "run", str(scenario), "--workdir", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert no_plan.returncode == 2 and "--default-plan" in no_plan.stderr
    assert not (tmp_path / "empty").exists()  # refused: nothing made
    assert json.loads(run.stdout)["committed"]
    got = pd.concat(
        [pd.read_parquet(f) for f in sorted((work / "output").glob("batch=*/*.parquet"))],
        ignore_index=True,
    ).sort_values(["key", "window_start"], ignore_index=True)
    assert len(exp) > 0
    assert_matches_reference(got, exp)
    assert InputLog(work / "input").segments() == segments  # snapshots were taken, none trimmed
    assert list((work / "state").glob("batch=*"))
    verify = subprocess.run(
        [exe, "pipeline", "verify", str(scenario), "--workdir", str(work), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["output_matches_reference"]


def test_a_plot_named_without_a_suffix_is_the_png_it_says(tmp_path: Path) -> None:
    """matplotlib adds ``.png`` to a name without a suffix: the profile named the file it
    asked for, not the one written."""
    from typer.testing import CliRunner

    from controller.cli import app

    argv = ["input", "profile", str(SAMPLE), "--key-col", "user", "--json"]
    r = CliRunner().invoke(app, [*argv, "--plot", str(tmp_path / "rate")])
    assert r.exit_code == 0, r.output
    written = [p.name for p in tmp_path.iterdir()]
    assert written == ["rate.png"] and json.loads(r.stdout)["plot"] == str(tmp_path / "rate.png")


def test_compressed_csv_and_json_lines_import_as_their_plain_files(tmp_path: Path) -> None:
    """``events.csv.gz`` was refused ("cannot tell the format from the name"), though pandas
    reads it; a compressed Parquet file, or a zstd one (a package not installed), is named.
    JSON lines saved with a byte-order mark (as Windows tools write UTF-8) were "not readable
    as jsonl"; a CSV's mark pandas strips itself. UTF-16 with its mark (Windows PowerShell's
    ``>``) was "not readable as csv ('utf-8' codec can't decode byte 0xff ...)"."""
    import bz2
    import gzip

    plain = pd.read_csv(SAMPLE)
    jsonl = tmp_path / "ev.jsonl"
    plain.to_json(jsonl, orient="records", lines=True)
    files = {
        "ev.csv.gz": gzip.compress(SAMPLE.read_bytes()),
        "ev.JSONL.bz2": bz2.compress(jsonl.read_bytes()),
        "bom.jsonl": b"\xef\xbb\xbf" + jsonl.read_bytes(),
        "bom.csv": b"\xef\xbb\xbf" + SAMPLE.read_bytes(),
        "u16.csv": SAMPLE.read_text().encode("utf-16"),
        "u16be.jsonl": b"\xfe\xff" + jsonl.read_text().encode("utf-16-be"),
    }
    want = InputLog(tmp_path / "want")
    import_events([SAMPLE], want, "s", 1.0, key_col="user", value_col="bytes")
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        log = InputLog(tmp_path / name.replace(".", "-"))
        rep = import_events([tmp_path / name], log, "s", 1.0, key_col="user", value_col="bytes")
        assert rep.rows_written == len(plain) and rep.bad_rows == 0, name
        pd.testing.assert_frame_equal(log.read(), want.read())
    for name, says in (
        ("ev.parquet.gz", "a compressed Parquet file; decompress it first"),
        ("ev.csv.zst", "zstd-compressed; decompress it first"),
    ):
        (tmp_path / name).write_bytes(b"x")
        with pytest.raises(EventImportError, match=says):
            import_events([tmp_path / name], InputLog(tmp_path / "no"), "s", 1.0, key_col="user")
    assert not InputLog(tmp_path / "no").segments()


def test_date_time_columns_import_as_their_seconds(tmp_path: Path) -> None:
    """Events stamped with ISO 8601 text (``2025-11-22T08:26:40.018Z``) had every row bad
    ("not a finite number"), and a Parquet timestamp column was read in nanoseconds (refused
    as spanning 3e10 ticks, with advice to read milliseconds). Both import as the same events
    in seconds; `partition --trace` reads them alike."""
    from controller.partition import read_key_trace

    plain = pd.read_csv(SAMPLE)
    when = pd.to_datetime(plain["ts"], unit="s", utc=True)
    iso = tmp_path / "iso.csv"
    plain.assign(ts=when.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")).to_csv(iso, index=False)
    stamped = tmp_path / "stamped.parquet"
    plain.assign(ts=when).to_parquet(stamped)
    want = InputLog(tmp_path / "want")
    import_events([SAMPLE], want, "s", 1.0, key_col="user", value_col="bytes")
    ref = want.read()
    for f in (iso, stamped):
        log = InputLog(tmp_path / f.stem)
        rep = import_events([f], log, "s", 1.0, key_col="user", value_col="bytes")
        assert rep.bad_rows == 0 and log.segments() == want.segments(), f.name
        got = log.read()
        assert np.abs(got["ts"] - ref["ts"]).max() < 1e-5  # the text's microseconds
        pd.testing.assert_frame_equal(got.drop(columns="ts"), ref.drop(columns="ts"))
        windows = read_key_trace(f, key_col="user")
        assert [w.size for w in windows] == [w.size for w in read_key_trace(SAMPLE, key_col="user")]


def test_an_import_without_a_value_column_says_what_it_left_out(tmp_path: Path) -> None:
    """Without --value-col every event's value is 1: imported so, a query filtering on v
    (``v > 10``) dropped every row, and nothing said a column had been left out."""
    exe = str(Path(sys.executable).parent / "trimtab")
    cmd = [exe, "input", "import", str(SAMPLE), "--stream", "clicks", "--key-col", "user"]
    r = subprocess.run([*cmd, "--workdir", str(tmp_path / "a")], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["unused_columns"] == ["bytes"], r.stderr
    assert "note: no --value-col: every event's value is 1 (columns left out: bytes;" in r.stderr
    assert InputLog(tmp_path / "a" / "input").read()["v"].eq(1.0).all()
    cmd += ["--workdir", str(tmp_path / "b"), "--value-col", "bytes"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["unused_columns"] == [], r.stderr
    assert "note:" not in r.stderr


def test_a_directory_of_event_files_is_refused_naming_a_file_in_it(tmp_path: Path) -> None:
    """A dataset written as a directory of part files: "a directory, not a file" said
    nothing of what to give instead."""
    parts = tmp_path / "events"
    parts.mkdir()
    (parts / "part-0001.csv").write_bytes(SAMPLE.read_bytes())
    with pytest.raises(
        EventImportError,
        match=r"events: a directory, not a file: give the event files in it \(.*part-0001.csv",
    ):
        import_events([parts], InputLog(tmp_path / "no"), "s", 1.0, key_col="user")
    assert not InputLog(tmp_path / "no").segments()
