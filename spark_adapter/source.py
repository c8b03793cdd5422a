"""The replayable input log: numbered, immutable Parquet segments written atomically.

Segment ``seg-000042.parquet`` holds one tick (``tick_s`` seconds) of every stream of a
scenario: ``event_id`` (unique, increasing; segment t's ids start at t x 2^32), ``stream``,
``ts`` (event time, s), ``key`` and the value columns ``v`` and ``c``. Segments are written to
a hidden temporary name and renamed, so Spark's file source (which skips names starting with
``.``) never sees a partial file, and each is stamped at least 1 ms after the one before:
Spark's file source takes files in modification-time order, and a tie comes in any order.
The generator follows the scenario's rates, key distributions and hot-key shifts, and is
deterministic by seed: segment t depends only on the scenario, the scale and t, so a log
written in pieces, or live, equals one written at once.
``trim`` deletes segments below an index; ``retained`` says what is left.

A live log is written at a pace (one segment every ``pace_s`` seconds) while a driver follows
it; ``close`` marks the end of the stream with a ``_CLOSED`` file, which Spark's file source
ignores (names starting with ``_`` are hidden) and a following driver takes as its cue to drain
and close the open windows.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.footprint import machine_memory, segment_problem
from core.scenario import Scenario
from core.workload import key_epochs, rates, sample_keys
from spark_adapter import segment_files
from spark_adapter.actuator import atomic_write
from spark_adapter.dpc import COVERS_KEY, STREAMS_KEY
from spark_adapter.pids import process_start, same_process

__all__ = ["CLOSED", "INPUT_SCHEMA_DDL", "InputLog", "segment_index", "silence_stream"]


CLOSED = "_CLOSED"
TRIMMED = "_TRIMMED"  # hidden from Spark's file source, like _CLOSED
SHIFT = "_SHIFT"  # backlog segments written so far: a tick's segment index is tick + shift
HOLD = "_HOLD-"  # _HOLD-<stream>: hold the stream's rows back until the time inside (epoch s)
HELD = "_HELD"  # journal of the holds delivered: one JSON line (stream, first tick, end tick)
STREAMS = "_STREAMS"  # the streams the writer writes, kept when a trim removes every segment
WRITER = "_WRITER"  # the live writer's pid and start time, while it writes (holds need one)
SEGMENT_ID_BITS = 32  # a segment holds fewer than 2^32 rows

INPUT_SCHEMA_DDL = "event_id LONG, stream STRING, ts DOUBLE, key LONG, v DOUBLE, c DOUBLE"
_ARROW = pa.schema(
    [
        ("event_id", pa.int64()),
        ("stream", pa.string()),
        ("ts", pa.float64()),
        ("key", pa.int64()),
        ("v", pa.float64()),
        ("c", pa.float64()),
    ]
)


class InputLog:
    """A directory of immutable input segments."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, index: int) -> Path:
        """The file of segment ``index``."""
        return self.root / f"seg-{index:06d}.parquet"

    def write(
        self,
        index: int,
        frame: pd.DataFrame,
        covers: Mapping[str, float] | None = None,
        streams: tuple[str, ...] = (),
    ) -> Path:
        """Write one segment atomically; an existing segment is never rewritten.

        ``covers`` (stream -> event time) says which streams the segment holds and up to when
        (``spark_adapter.dpc``); without it the segment holds every stream up to its last row.
        """
        final = self.path(index)
        if final.exists():
            raise FileExistsError(f"segment {index} already exists: segments are immutable")
        tmp = self.root / f".seg-{index:06d}.parquet.tmp"
        table = pa.Table.from_pandas(frame, schema=_ARROW, preserve_index=False)
        if covers is not None:
            meta = {COVERS_KEY: json.dumps(dict(covers)), STREAMS_KEY: json.dumps(list(streams))}
            table = table.replace_schema_metadata(meta)
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        self._after_previous(index, final)
        if streams and not (self.root / STREAMS).exists():
            atomic_write(self.root / STREAMS, json.dumps(list(streams)).encode())
        return final

    def _after_previous(self, index: int, final: Path) -> None:
        """Give segment ``index`` a modification time at least 1 ms after segment
        ``index - 1``'s. Spark's file source takes new files in modification-time order at
        millisecond resolution and breaks ties in listing order; the kernel stamps files from
        a coarse clock (1-4 ms), so segments written back to back (an import, an unpaced
        generate) can tie. A segment read after a later one holds rows behind the watermark
        the later one advanced, and they would be dropped as late (seen: 88 of 4559 output
        rows missing after segments 11 and 12 were read in swapped order)."""
        with contextlib.suppress(FileNotFoundError):  # the first segment, or trimmed
            prev_ms = self.path(index - 1).stat().st_mtime_ns // 1_000_000
            segment_files.stamp_after(final, prev_ms)

    def restamp(self, apply: bool = True, start: int = 0) -> list[int]:
        """Stamp the segments present in index order, each after the one before
        (``segment_files.restamp``); returns the indices restamped. ``apply=False`` only says
        which; ``start`` leaves the segments before it alone (a driver's unread tail starts
        at the last segment it read)."""
        idx = [i for i in self.segments() if i >= start]
        return segment_files.restamp([(i, self.path(i)) for i in idx], apply)

    def segments(self) -> list[int]:
        """Indices of the segments present, ascending."""
        return sorted(segment_index(p.name) for p in self.root.glob("seg-*.parquet"))

    def read(self, indices: list[int] | None = None) -> pd.DataFrame:
        """Segments as one DataFrame (all by default)."""
        idx = self.segments() if indices is None else indices
        if not idx:
            return _ARROW.empty_table().to_pandas()
        return pd.concat([self.read_segment(i) for i in idx], ignore_index=True)

    def check(self, streams: Collection[str] | None = None) -> int:
        """Every segment present is a readable Parquet file with the input columns (its
        footer is read, not its rows) and, given ``streams``, rows of those streams only;
        returns how many. A ``ValueError`` names the first that is not, so a command can
        refuse the log before it runs anything."""
        segs = self.segments()
        for i in segs:
            segment_files.check(self.path(i), _ARROW.names, streams)
        return len(segs)

    def span(self, index: int) -> tuple[int, int, float] | None:
        """Segment ``index``'s first and last event id and last event time, from its footer
        (``segment_files.span``); None when it is empty."""
        return segment_files.span(self.path(index))

    def read_segment(self, index: int, columns: list[str] | None = None) -> pd.DataFrame:
        """One segment's rows (``columns`` only, when given); a ``ValueError`` names a file
        that is not a readable segment."""
        return segment_files.read(self.path(index), columns)

    def trim(self, below: int) -> int:
        """Delete segments with index < ``below``; returns how many were deleted.

        The trim point is recorded first (``_TRIMMED``), so the log still knows where it
        goes on (``next_index``) when every segment is gone.
        """
        if below > self.trimmed_below():
            atomic_write(self.root / TRIMMED, str(int(below)).encode())
        gone = 0
        for i in self.segments():
            if i < below:
                self.path(i).unlink(missing_ok=True)
                gone += 1
        return gone

    def trimmed_below(self) -> int:
        """Every segment below this index was trimmed (0: nothing was)."""
        f = self.root / TRIMMED
        return int(f.read_text()) if f.exists() else 0

    def next_index(self) -> int:
        """The index the next segment gets: after the last one present or trimmed."""
        s = self.segments()
        return max(s[-1] + 1 if s else 0, self.trimmed_below())

    def shift(self) -> int:
        """Backlog segments written so far: segment ``tick + shift`` holds the next tick."""
        f = self.root / SHIFT
        return int(f.read_text()) if f.exists() else 0

    def next_tick(self) -> int:
        """The tick a writer that appends goes on with."""
        return self.next_index() - self.shift()

    def hold(self, stream: str, seconds: float) -> Path:
        """Hold ``stream``'s rows back for ``seconds`` of wall time (a silent source): a live
        writer leaves them out of its segments meanwhile, then delivers them as one backlog."""
        if not seconds > 0:
            raise ValueError(f"--seconds: must be positive, got {seconds}")
        path = self.root / f"{HOLD}{stream}"
        atomic_write(path, json.dumps({"until": time.time() + seconds}).encode())
        return path

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Mark this process as the log's live writer while the block runs: ``live_writer``
        names it, and a hold (``inject silence-stream``) is refused when none runs."""
        self.root.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "started": process_start(os.getpid())}
        path = self.root / WRITER
        atomic_write(path, json.dumps(me).encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(path.read_text())["pid"] == me["pid"]:
                    path.unlink()

    def live_writer(self) -> int | None:
        """The pid of the process writing the log live, None when none runs (a log written at
        once, or a writer that ended or was killed)."""
        try:
            rec = json.loads((self.root / WRITER).read_text())
            pid, started = int(rec["pid"]), rec["started"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return pid if same_process(pid, started) else None

    def streams(self) -> tuple[str, ...]:
        """The streams the log's writer writes (the newest segment's metadata or rows)."""
        segs = self.segments()
        if not segs:  # every segment trimmed: what the writer recorded
            f = self.root / STREAMS
            return tuple(json.loads(f.read_text())) if f.exists() else ()
        meta = pq.read_schema(self.path(segs[-1])).metadata or {}
        if STREAMS_KEY in meta:
            return tuple(json.loads(meta[STREAMS_KEY]))
        return tuple(
            sorted(
                set(pq.read_table(self.path(segs[-1]), columns=["stream"])["stream"].to_pylist())
            )
        )

    def silences(self) -> list[tuple[str, int, int]]:
        """The holds this log went through, as ``generate``'s ``silence`` (the journal)."""
        f = self.root / HELD
        if not f.exists():
            return []
        return [(str(a), int(b), int(c)) for a, b, c in map(json.loads, f.read_text().splitlines())]

    def held(self, now: float) -> set[str]:
        """Streams a live hold keeps back at wall time ``now``."""
        out = set()
        for f in self.root.glob(f"{HOLD}*"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(f.read_text())["until"] > now:
                    out.add(f.name[len(HOLD) :])
        return out

    def retained(self) -> tuple[int, int] | None:
        """(first, last) segment index still present."""
        s = self.segments()
        return (s[0], s[-1]) if s else None

    def arrival_to_commit(self, event_range: tuple[int, int], now: float) -> dict[str, Any]:
        """End-to-end latency of a batch's segments (the segment file's arrival in the log to
        ``now``, its commit; seconds) and the backlog behind it (segments present after it)."""
        lo, hi = event_range
        if lo < 0:
            return {"arrival_to_commit_s": [], "backlog_segments": 0}
        lat = []
        for seg in range(lo >> 32, (hi >> 32) + 1):
            with contextlib.suppress(OSError):  # trimmed, or a batch of shed rows only
                lat.append(round(now - self.path(seg).stat().st_mtime, 4))
        return {
            "arrival_to_commit_s": lat,
            "backlog_segments": max(0, self.next_index() - 1 - (hi >> 32)),
        }

    @property
    def closed(self) -> bool:
        """True once the writer has marked the end of the stream."""
        return (self.root / CLOSED).exists()

    def close(self) -> None:
        """Mark the end of the stream: no segment follows the last one present."""
        (self.root / CLOSED).touch()

    def generate(
        self,
        scenario: Scenario,
        segments: int,
        scale: float = 1.0,
        start: int = 0,
        pace_s: float | None = None,
        stop: threading.Event | None = None,
        silence: Sequence[tuple[str, int, int]] = (),
        lead_s: float | None = None,
    ) -> int:
        """Write ``segments`` ticks of the scenario's workload (rates x ``scale``); returns rows.

        With ``pace_s`` the segments are written live, one every ``pace_s`` seconds of wall
        time (the first at once), until done or ``stop`` is set. With ``lead_s`` as well, each
        lands ``lead_s`` before a multiple of ``pace_s`` since the epoch, where a live driver's
        trigger of the same interval fires (Spark's processing-time trigger is epoch-aligned):
        a segment then waits ``lead_s`` for its batch in every run, not whatever the writer's
        start happened to leave. A stream held back (``silence``:
        (stream, first tick, end tick) triples, e.g. ``Scenario.input_outages``; or a live
        ``hold``) is left out of the segments of those ticks
        (their metadata says so); its rows arrive as one backlog segment before the first tick
        it is no longer held, or at the end. A tick's rows do not depend on holds.
        """
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        if problem := segment_problem(scenario, scale, machine_memory()):
            raise ValueError(problem)
        if pace_s is not None and pace_s <= 0:
            raise ValueError(f"pace_s must be positive, got {pace_s}")
        if lead_s is not None and (pace_s is None or not 0 <= lead_s < pace_s):
            raise ValueError(f"lead_s must be in [0, pace_s) with pace_s given, got {lead_s}")
        t0 = time.monotonic()
        if pace_s is not None and lead_s is not None:  # the first trigger it can land before
            now = time.time()
            t0 += math.ceil((now + lead_s) / pace_s) * pace_s - lead_s - now
        stop = stop or threading.Event()
        ticks = _TickWriter(self, scenario, scale)
        ticks.tick = start
        live = self.writing() if pace_s is not None else contextlib.nullcontext()
        with live:
            for t in range(start, start + segments):
                if pace_s is not None:
                    delay = max(0.0, t0 + (t - start) * pace_s - time.monotonic())
                    if stop.wait(delay):
                        break  # stopped: ``stop`` was set
                held = self.held(time.time()) | {s for s, a, b in silence if a <= t < b}
                ticks.write(t, held)
            ticks.deliver(set())  # what is still held arrives now: nothing is lost
        return ticks.rows


class _TickWriter:
    """Writes a scenario's ticks as segments, holding streams back and delivering backlogs."""

    def __init__(self, log: InputLog, scenario: Scenario, scale: float) -> None:
        self.log, self.sc = log, scenario
        self.per_tick = rates(scenario) * scale  # (T, d)
        self.epochs = [key_epochs(s.keys) for s in scenario.streams]  # probs_at: any time
        self.streams = tuple(s.id for s in scenario.streams)
        self.backlog: dict[str, list[pd.DataFrame]] = {}
        self.until: dict[str, float] = {}
        self.held_from: dict[str, int] = {}
        self.rows = 0
        self.tick = 0  # the tick being written (after the last one: where backlogs go)

    def _frames(self, t: int) -> dict[str, pd.DataFrame]:
        sc = self.sc
        rng = np.random.default_rng([sc.seed, 0x5E6, t])
        row = self.per_tick[t % self.per_tick.shape[0]]
        out = {}
        for k, s in enumerate(sc.streams):
            n = int(rng.poisson(row[k])) if row[k] > 0 else 0
            probs = self.epochs[k].probs_at(t * sc.tick_s)
            out[s.id] = pd.DataFrame(
                {
                    "stream": s.id,
                    "ts": t * sc.tick_s + np.sort(rng.random(n)) * sc.tick_s,
                    "key": sample_keys(probs, n, rng),
                    "v": rng.random(n) * 100.0,
                    "c": rng.random(n) * 250.0,
                }
            )
        return out

    def _segment(self, frames: list[pd.DataFrame], covers: dict[str, float]) -> None:
        """Write the next segment (index: the current tick + shift)."""
        seg = pd.concat(frames or [_ARROW.empty_table().to_pandas()], ignore_index=True)
        seg = seg.drop(columns="event_id", errors="ignore")
        seg = seg.sort_values("ts", kind="stable", ignore_index=True)
        idx = self.tick + self.log.shift()
        seg.insert(0, "event_id", first_event_id(idx) + np.arange(len(seg), dtype=np.int64))
        self.log.write(idx, seg, covers, self.streams)
        self.rows += len(seg)

    def deliver(self, held: set[str]) -> None:
        """Write the backlog of every stream no longer held, one segment each."""
        for s in sorted(set(self.backlog) - held):
            frames = self.backlog.pop(s)
            self._segment(frames, {s: self.until.pop(s)})
            atomic_write(self.log.root / SHIFT, str(self.log.shift() + 1).encode())
            first = self.held_from.pop(s)
            with open(self.log.root / HELD, "a") as f:  # the log can be written again exactly
                f.write(json.dumps([s, first, first + len(frames)]) + "\n")

    def write(self, t: int, held: set[str]) -> None:
        """Tick ``t``'s segment, without the ``held`` streams (kept back for later)."""
        self.tick = t
        self.deliver(held)
        frames = self._frames(t)
        end = (t + 1) * self.sc.tick_s
        for s in held & set(frames):
            self.held_from.setdefault(s, t)
            self.backlog.setdefault(s, []).append(frames.pop(s))
            self.until[s] = end
        self._segment(list(frames.values()), dict.fromkeys(frames, end))
        self.tick = t + 1


def silence_stream(root: Path, stream: str | None, seconds: float) -> dict[str, Any]:
    """``trimtab inject silence-stream``: hold a live input log's stream back for ``seconds``
    (its writer reads the hold before each segment). ``ValueError`` names what is wrong."""
    # a driver may have trimmed every segment it snapshotted: the log goes on (_TRIMMED)
    if not root.is_dir() or InputLog(root).next_index() == 0:
        raise ValueError(f"--workdir: no input log in {root} (is a live writer running there?)")
    log = InputLog(root)
    if log.closed:
        raise ValueError(f"--workdir: {root} is closed: the stream has ended, nothing to silence")
    if log.live_writer() is None:
        raise ValueError(
            f"--workdir: no live writer is writing {root}: a hold is read only by a running "
            "`trimtab input generate --pace-s` (a replay's log is written before it runs)"
        )
    streams = log.streams()
    if stream is None:
        raise ValueError(f"silence-stream: name the stream to hold back ({', '.join(streams)})")
    if stream not in streams:
        raise ValueError(
            f"stream: {stream!r} is not one of the log's streams ({', '.join(streams)})"
        )
    path = log.hold(stream, seconds)
    return {"silenced": stream, "seconds": seconds, "hold": str(path)}


def segment_index(name: str) -> int:
    """The index in a segment's file name (``seg-000042.parquet`` -> 42).

    >>> segment_index("seg-000042.parquet")
    42
    """
    return int(name.removeprefix("seg-").removesuffix(".parquet"))


def first_event_id(segment: int) -> int:
    """Event ids of segment t start at t x 2^32: unique and increasing across the log, and
    independent of what was written or trimmed before (a live writer never reads the log)."""
    return segment << SEGMENT_ID_BITS
