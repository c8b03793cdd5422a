"""The input log on its own: deterministic segments, pieces equal a whole, live pace, close."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from controller.scenario import load_scenario
from spark_adapter.source import InputLog
from tests.conftest import SCENARIOS


def test_a_log_written_in_pieces_equals_one_written_at_once(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    whole, pieces = InputLog(tmp_path / "a"), InputLog(tmp_path / "b")
    n = whole.generate(sc, 5, scale=0.05)
    m = pieces.generate(sc, 2, scale=0.05) + pieces.generate(sc, 3, scale=0.05, start=2)
    assert n == m > 0
    pd.testing.assert_frame_equal(whole.read(), pieces.read())
    assert whole.read()["event_id"].is_monotonic_increasing


def test_live_writing_keeps_its_pace_and_stops_on_request(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    log = InputLog(tmp_path)
    t0 = time.monotonic()
    log.generate(sc, 3, scale=0.01, pace_s=0.3)
    assert time.monotonic() - t0 >= 0.6  # first segment at once, then one every 0.3 s
    stop = threading.Event()
    seen: list[int | None] = []  # the writer, as a hold sees it while the log is written live
    threading.Timer(0.2, lambda: seen.append(log.live_writer())).start()
    threading.Timer(0.4, stop.set).start()
    log.generate(sc, 100, scale=0.01, start=3, pace_s=0.3, stop=stop)
    assert 4 <= len(log.segments()) <= 6  # stopped long before 100
    assert seen == [os.getpid()] and log.live_writer() is None  # and no longer once it stopped
    assert not log.closed
    log.close()
    assert log.closed and len(log.segments()) == len(list(tmp_path.glob("seg-*")))


def test_a_lead_lands_each_segment_that_long_before_a_multiple_of_the_pace(
    tmp_path: Path,
) -> None:
    """Where an epoch-aligned trigger of the pace's interval fires: each segment's write time,
    modulo the pace, is the pace minus the lead (without a lead it is wherever the call began)."""
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    pace = 0.4
    for lead in (0.1, 0.3):  # two leads: a call that ignored its lead matches both by chance
        log = InputLog(tmp_path / str(lead))
        log.generate(sc, 3, scale=0.01, pace_s=pace, lead_s=lead)
        done = [log.path(i).stat().st_mtime for i in log.segments()]
        assert len(done) == 3
        # how long before the next multiple of the pace each landed (a write takes ~ms)
        before = [(-t) % pace for t in done]
        assert all(lead - 0.04 <= b <= lead + 1e-3 for b in before), (lead, before)
        assert 0.6 <= done[-1] - done[0] <= 1.2, done  # paced: two intervals


@pytest.mark.parametrize(
    ("field", "kw"),
    [
        ("scale", {"scale": 0}),
        ("pace_s", {"pace_s": -1}),
        ("lead_s", {"lead_s": 0.1}),  # a lead needs a pace
        ("lead_s", {"pace_s": 0.5, "lead_s": 0.5}),  # and is below it
    ],
)
def test_bad_generator_arguments_are_named(tmp_path: Path, field: str, kw: dict) -> None:
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    with pytest.raises(ValueError, match=field):
        InputLog(tmp_path).generate(sc, 1, **kw)
    assert InputLog(tmp_path).segments() == []


def test_a_trimmed_log_goes_on_after_its_last_segment(tmp_path: Path) -> None:
    """Retention may trim every segment; the next one must not reuse an index (and ids)."""
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    log = InputLog(tmp_path)
    log.generate(sc, 3, scale=0.02)
    assert log.next_index() == 3
    assert log.trim(3) == 3 and log.segments() == []
    assert log.trimmed_below() == 3 and log.next_index() == 3
    log.trim(1)  # an older trim point never moves the mark back
    assert log.next_index() == 3
    log.generate(sc, 1, scale=0.02, start=log.next_index())
    assert log.segments() == [3]


def test_a_stream_can_be_silenced_after_the_driver_trimmed_every_segment(tmp_path: Path) -> None:
    """A live driver trims the segments its snapshot covers; between two writes none may be
    left. ``inject silence-stream`` then still finds the log and its streams (it exited 2,
    "no input log", which failed a DPC cluster test on CI)."""
    from spark_adapter.source import silence_stream

    log = InputLog(tmp_path / "input")
    row = {"event_id": [0], "stream": ["S"], "ts": [0.0], "key": [1], "v": [1.0], "c": [1.0]}
    log.write(0, pd.DataFrame(row), covers={"S": 1.0, "T": 1.0}, streams=("S", "T"))
    log.trim(1)
    assert log.segments() == [] and log.streams() == ("S", "T")
    with log.writing():
        held = silence_stream(log.root, "S", 5.0)
        assert held["silenced"] == "S" and Path(held["hold"]).exists()
        with pytest.raises(ValueError, match=r"'X' is not one of the log's streams \(S, T\)"):
            silence_stream(log.root, "X", 5.0)
        with pytest.raises(
            ValueError, match=r"^silence-stream: name the stream to hold back \(S, T\)$"
        ):
            silence_stream(log.root, None, 5.0)  # said "stream: None is not one of ..."
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no input log"):
        silence_stream(tmp_path / "empty", "S", 5.0)


def test_a_hold_needs_a_live_writer(tmp_path: Path) -> None:
    """A hold is read only by a live writer: on a log written at once (a replay's), or after
    the writer ended or was killed, ``inject silence-stream`` is refused instead of reporting
    a silence that nothing would carry out. A dead writer's record (kill -9) names no writer."""
    import json

    from spark_adapter.source import WRITER, silence_stream

    log = InputLog(tmp_path / "input")
    log.generate(load_scenario(SCENARIOS / "seed-groupby-window.yaml"), 2, scale=0.02)
    assert log.live_writer() is None
    with pytest.raises(ValueError, match="no live writer is writing"):
        silence_stream(log.root, "s", 5.0)
    assert not log.held(0.0)  # refused: no hold was written
    with log.writing():
        assert log.live_writer() == os.getpid()
        assert silence_stream(log.root, "s", 5.0)["silenced"] == "s"
    assert log.live_writer() is None and not (log.root / WRITER).exists()
    (log.root / WRITER).write_text(json.dumps({"pid": os.getpid(), "started": 1.0}))
    assert log.live_writer() is None  # this pid, but not the process that started then


def test_each_segment_is_stamped_after_the_one_before(tmp_path: Path) -> None:
    """Spark's file source takes files in modification-time order (ms): a segment that ties
    with, or predates, the one before it may be read first, and its rows arrive behind the
    watermark. Segment 1 is written while segment 0 carries a later stamp (a coarse kernel
    clock, or a tie): it gets the millisecond after it. A segment already later keeps its own."""
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    log = InputLog(tmp_path / "in")
    log.generate(sc, 1, scale=0.05)
    ahead = time.time_ns() + 50_000_000  # segment 0 stamped 50 ms from now
    os.utime(log.path(0), ns=(ahead, ahead))
    frame = log.read([0])
    log.write(1, frame.assign(event_id=frame["event_id"] + (1 << 32)))
    ms = [log.path(i).stat().st_mtime_ns // 1_000_000 for i in (0, 1)]
    assert ms[1] == ms[0] + 1, ms
    past = time.time_ns() - 10_000_000_000  # segment 1 stamped 10 s ago
    os.utime(log.path(1), ns=(past, past))
    before = time.time_ns()
    log.write(2, frame.assign(event_id=frame["event_id"] + (2 << 32)))
    assert log.path(2).stat().st_mtime_ns >= before - 5_000_000  # its own time (coarse clock)


def test_restamp_puts_a_copied_log_back_in_index_order(tmp_path: Path) -> None:
    """A log copied by `cp -r` carries its copy's times: ties, or any order. ``restamp`` gives
    each segment at least the millisecond after the one before; a log in order is untouched."""
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    log = InputLog(tmp_path / "in")
    log.generate(sc, 5, scale=0.02)
    base = time.time_ns() - 60_000_000_000
    for i, at in enumerate((4, 4, 2, 1, 0)):  # segments 0 and 1 tie; 2, 3, 4 older and older
        os.utime(log.path(i), ns=(base + at * 1_000_000_000,) * 2)
    assert log.restamp() == [1, 2, 3, 4]
    ns = [log.path(i).stat().st_mtime_ns for i in range(5)]
    assert [n // 1_000_000 for n in ns] == [ns[0] // 1_000_000 + i for i in range(5)]
    assert log.restamp() == [] and [log.path(i).stat().st_mtime_ns for i in range(5)] == ns
    os.utime(log.path(2), ns=(ns[4] + 5_000_000,) * 2)  # 2 after 4: 3 and 4 follow it
    assert log.restamp(start=3) == []  # a driver's unread tail: segments before 3 are read
    assert log.restamp(apply=False, start=2) == [3, 4]
    assert log.restamp() == [3, 4]
    assert log.path(4).stat().st_mtime_ns // 1_000_000 == (ns[4] + 5_000_000) // 1_000_000 + 2


def test_a_replays_input_out_of_order_is_copied_and_the_users_files_keep_their_times(
    tmp_path: Path,
) -> None:
    """`replay --input` links a user's log into the run's; one out of order in time is copied
    instead, so the run's restamp touches its own files, never the user's (a link shares them)."""
    from types import SimpleNamespace

    from controller.spark_replay import _copy_input

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    src = InputLog(tmp_path / "mine" / "input")
    src.generate(sc, 3, scale=0.02)
    in_order = SimpleNamespace(input=InputLog(tmp_path / "a"))
    _copy_input(tmp_path / "mine", in_order, {"s"})
    assert in_order.input.path(2).stat().st_ino == src.path(2).stat().st_ino  # linked
    late = time.time_ns() + 60_000_000_000
    os.utime(src.path(0), ns=(late, late))  # segment 0 stamped after 1 and 2
    times = [src.path(i).stat().st_mtime_ns for i in range(3)]
    assert src.restamp(apply=False) == [1, 2]
    assert [src.path(i).stat().st_mtime_ns for i in range(3)] == times  # only said
    run = SimpleNamespace(input=InputLog(tmp_path / "b"))
    _copy_input(tmp_path / "mine", run, {"s"})
    assert run.input.path(2).stat().st_ino != src.path(2).stat().st_ino  # copied
    run.input.restamp()  # the run's own files (copies carry the copy's times)
    assert [src.path(i).stat().st_mtime_ns for i in range(3)] == times
    assert run.input.read().equals(src.read())


def test_a_file_system_with_whole_second_times_still_gets_segments_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system that keeps whole seconds (simulated: every stamp rounded down), a
    stamp 1 ms later is rounded back to the tie; the segment gets the next second instead."""
    from spark_adapter import segment_files

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    log = InputLog(tmp_path / "in")
    log.generate(sc, 3, scale=0.02)
    real = os.utime

    def whole_seconds(path: object, ns: tuple[int, int]) -> None:
        t = ns[0] // 1_000_000_000 * 1_000_000_000
        real(path, ns=(t, t))  # type: ignore[arg-type]

    monkeypatch.setattr(segment_files.os, "utime", whole_seconds)
    t0 = (time.time_ns() // 1_000_000_000 - 100) * 1_000_000_000
    for i in range(3):
        real(log.path(i), ns=(t0, t0))  # all three tie on one second
    assert log.restamp() == [1, 2]
    assert [log.path(i).stat().st_mtime_ns - t0 for i in range(3)] == [0, 10**9, 2 * 10**9]


def test_a_segments_span_comes_from_its_footer_and_equals_its_rows(tmp_path: Path) -> None:
    """The index takes each segment's event-id range and last event time from the footer's
    statistics: equal to the rows' over several row groups, read from the rows when a file
    has no statistics, None for an empty segment."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    log = InputLog(tmp_path / "in")
    log.generate(sc, 2, scale=0.05)
    frame = log.read([1]).sample(frac=1.0, random_state=3)  # ids out of order in the file
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, log.path(2), row_group_size=20)  # many row groups
    pq.write_table(table, log.path(3), write_statistics=False)
    pq.write_table(table.slice(0, 0), log.path(4))
    assert pq.read_metadata(log.path(2)).num_row_groups > 3
    for i in (0, 1, 2, 3):
        rows = log.read_segment(i, ["event_id", "ts"])
        want = (int(rows["event_id"].min()), int(rows["event_id"].max()), float(rows["ts"].max()))
        assert log.span(i) == want, i
    assert log.span(4) is None
