"""Recovery of the Spark pipeline: which input a batch read, what the input log must retain,
state snapshots, and bringing a new driver's state up to the last commit.

* ``SegmentIndex``: each input segment's event-id range and last event time, so a batch's
  event range and watermark come from the files it read (even when every row was shed), and
  an event range maps back to segments;
* ``Retention``: upstream backup (``ha.upstream_backup``), the input log is trimmed only below
  what a recovery could need (the last durable state: a reliable checkpoint under
  ``upstream``, a snapshot under ``passive``);
* ``snapshot_state`` / ``restore``: passive standby. A snapshot is the state after a batch as
  Parquet; ``restore`` loads the newest one and refolds the committed batches after it with
  their pinned plans (the same batch specs as their first attempt), writing nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol
from urllib.parse import urlparse

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from ha.upstream_backup import UpstreamBackup
from spark_adapter.actuator import PlanLog
from spark_adapter.batchstats import BatchStats
from spark_adapter.dpc import Coverage, segment_meta
from spark_adapter.operators import ROW_COLUMNS, ROW_DDL
from spark_adapter.source import INPUT_SCHEMA_DDL, InputLog

__all__ = [
    "Refolding",
    "Retention",
    "Segment",
    "SegmentIndex",
    "restore",
    "snapshot_state",
    "source_log_files",
]

EventRange = tuple[int, int]


class Segment(NamedTuple):
    """One input segment as the index knows it."""

    first_id: int
    last_id: int
    last_ts: float
    index: int
    covers: tuple[tuple[str, float], ...] | None = None  # DPC: streams held, up to when
    streams: tuple[str, ...] = ()  # every stream the writer writes (with covers)


class SegmentIndex:
    """The input log's segments by event id (kept after a segment is trimmed from disk)."""

    def __init__(self, log: InputLog, source_log: Path) -> None:
        self.log = log
        self.source_log = source_log  # the file source's log: checkpoint/sources/0
        self.segs: list[Segment] = []

    def refresh(self) -> None:
        """Index the segments written since the last call."""
        known = {sg.index for sg in self.segs}
        new = list(self.segs)
        for i in self.log.segments():
            if i in known:
                continue
            span = self.log.span(i)
            if span is not None:
                meta = segment_meta(self.log.path(i))
                new.append(
                    Segment(
                        *span,
                        i,
                        None if meta is None else tuple(sorted(meta[0].items())),
                        () if meta is None else meta[1],
                    )
                )
        self.segs = sorted(new)

    def segments_of(self, event_range: EventRange) -> list[int]:
        """Input segments holding the event-id range of a batch."""
        if event_range[0] < 0:
            return []
        if not self.segs:
            self.refresh()
        lo, hi = event_range
        return [sg.index for sg in self.segs if sg.last_id >= lo and sg.first_id <= hi]

    def covering(self, event_range: EventRange) -> list[Segment]:
        """The indexed segments of a batch's event range (their DPC coverage)."""
        lo, hi = event_range
        return [sg for sg in self.segs if lo >= 0 and sg.last_id >= lo and sg.first_id <= hi]

    def span(self, lo: int, hi: int) -> tuple[EventRange, float]:
        """The exact event-id range and last event time of the segments holding ids lo..hi."""
        if lo < 0 or not self.segs or hi < self.segs[0].first_id:
            return (-1, -1), -math.inf
        firsts = np.array([s.first_id for s in self.segs])
        a = max(0, int(np.searchsorted(firsts, lo, side="right") - 1))
        b = int(np.searchsorted(firsts, hi, side="right") - 1)
        return (self.segs[a].first_id, self.segs[b].last_id), max(
            s.last_ts for s in self.segs[a : b + 1]
        )

    def files_span(self, files: set[str], batch_id: int) -> tuple[EventRange, float] | None:
        """Event-id range and last event time of the files a batch read.

        A static DataFrame names its files; a streaming micro-batch does not, so its files
        come from the file source's own log (written before the batch runs, and the same when
        the batch is replayed). None when neither knows.
        """
        names = {Path(urlparse(f).path).name for f in files or self.source_log_files(batch_id)}
        if not names:
            return None
        segs = [sg for sg in self.segs if self.log.path(sg.index).name in names]
        if len(segs) < len(names):
            self.refresh()
            segs = [sg for sg in self.segs if self.log.path(sg.index).name in names]
        if not segs:
            return None
        return (min(s.first_id for s in segs), max(s.last_id for s in segs)), max(
            s.last_ts for s in segs
        )

    def source_log_files(self, batch_id: int) -> set[str]:
        """The files of ``batch_id`` in the file source's log (``source_log_files``)."""
        return source_log_files(self.source_log, batch_id)


def source_log_files(source_log: Path, batch_id: int) -> set[str]:
    """The files of ``batch_id`` in a file source's log: one JSON line per file after a
    version line, in the batch's own file or, after compaction, in the first ``N.compact``
    file with N >= the batch."""
    path = source_log / str(batch_id)
    if not path.exists():
        compact = sorted(
            (int(f.name.split(".")[0]), f)
            for f in source_log.glob("*.compact")
            if int(f.name.split(".")[0]) >= batch_id
        )
        if not compact:
            return set()
        path = compact[0][1]
    out = set()
    for line in path.read_text().splitlines()[1:]:
        entry = json.loads(line)
        if entry.get("batchId") == batch_id:
            out.add(str(entry["path"]))
    return out


class Retention:
    """Upstream backup of the input log: trim only below what a recovery could need.

    ``mode``: ``none`` keeps everything; ``upstream`` trims below the last reliable checkpoint
    of the state; ``passive`` below the last snapshot. A closed log (an import, or a stream
    that has ended) is finite: retention has nothing to bound there, and it is kept whole, so
    the run can be verified against it.
    """

    def __init__(self, mode: str, log: InputLog, index: SegmentIndex) -> None:
        if mode not in ("none", "upstream", "passive"):
            raise ValueError(f"retention: unknown mode {mode!r} (none, upstream, passive)")
        self.mode, self.log, self.index = mode, log, index
        self.backup = UpstreamBackup()
        self.trim_log: list[tuple[int, int, int]] = []  # (batch, trimmed below, replay from)
        # an active standby still reading the log: never trim at or past this segment
        self.floor: Callable[[], int | None] = lambda: None

    def batch_done(self, batch_id: int, event_range: EventRange, checkpointed: bool) -> None:
        """Record a committed batch's segments; trim what no recovery needs any more."""
        segs = self.index.segments_of(event_range)
        if not segs:
            return
        b = self.backup
        for sg in segs:
            if not b.retained or sg > b.retained[-1]:
                b.append(sg)
        # the live state's lineage reaches back to the last durable state checkpoint
        if checkpointed and self.mode == "upstream":
            b.checkpoint(segs[-1], segs[-1] + 1)
        b.ack(segs[-1], b.ckpt_depends_from if b.checkpointed >= 0 else b.trimmed_below)
        if self.mode != "none" and not self.log.closed:
            tp, floor = b.trim_point(), self.floor()
            if floor is not None and floor < tp:
                return  # retained for an active standby that has not read it yet
            if b.trim():
                self.log.trim(tp)
            self.trim_log.append((batch_id, b.trimmed_below, b.replay_from()))

    def snapshot_taken(self, event_range: EventRange) -> None:
        """A snapshot of the state after a batch with ``event_range`` is durable."""
        segs = self.index.segments_of(event_range)
        if self.mode == "passive" and segs:
            self.backup.checkpoint(segs[-1], segs[-1] + 1)


def snapshot_state(state: DataFrame, root: Path, batch_id: int, log: PlanLog) -> str:
    """Passive standby: write the state after ``batch_id`` as Parquet and record it."""
    path = root / "state" / f"batch={batch_id}"
    state.select(*ROW_COLUMNS).write.mode("overwrite").parquet(str(path))
    log.record_snapshot(batch_id, str(path))
    return str(path)


class Refolding(Protocol):
    """What ``restore`` needs of a pipeline (``pipeline.SparkPipeline``)."""

    spark: SparkSession
    index: SegmentIndex
    log: PlanLog
    input: InputLog
    states: dict[int, DataFrame]
    max_ts: float
    dpc: Coverage

    def process(self, df: DataFrame, batch_id: int, refold: bool = False) -> BatchStats:
        """Run (here: refold) one batch."""
        ...


def restore(pipe: Refolding) -> int:
    """Bring ``pipe``'s state up to the last committed batch: load the newest snapshot (when it
    is newer than what this driver has) and refold the committed batches after it.

    Incremental: a warm standby calls it repeatedly while it waits, so at takeover only the
    batches committed since its last call are refolded. Returns the last committed batch.
    """
    pipe.index.refresh()
    committed = pipe.log.committed()
    if not committed:
        return -1
    last = committed[-1]
    have = max(pipe.states) if pipe.states else -1
    snap = pipe.log.latest_snapshot(at_most=last)
    if snap is not None and snap[0] > have:
        for df in pipe.states.values():
            df.unpersist()
        state = pipe.spark.read.schema(ROW_DDL).parquet(snap[1])
        pipe.states = {snap[0]: state.persist(StorageLevel.MEMORY_AND_DISK)}
        have = snap[0]
    infos = pipe.log.commit_infos()
    ranges = {b: tuple(infos.get(b, {}).get("event_range", (-1, -1))) for b in range(last + 1)}
    pipe.max_ts = -math.inf
    for b in range(have + 1):
        if "max_ts" in infos.get(b, {}):
            pipe.max_ts = max(pipe.max_ts, float(infos[b]["max_ts"]))
        elif ranges[b][0] >= 0:  # a plan log from before commits recorded max_ts
            _, mx = pipe.index.span(int(ranges[b][0]), int(ranges[b][1]))
            pipe.max_ts = max(pipe.max_ts, mx)
        pipe.dpc.restore(infos.get(b, {}).get("dpc"))  # each commit's coverage (cumulative)
    for b in range(have + 1, last + 1):
        segs = pipe.index.segments_of((int(ranges[b][0]), int(ranges[b][1])))
        df = (
            pipe.spark.read.schema(INPUT_SCHEMA_DDL).parquet(
                *[str(pipe.input.path(i)) for i in segs]
            )
            if segs
            else pipe.spark.createDataFrame([], INPUT_SCHEMA_DDL)
        )
        st = pipe.process(df, b, refold=True)
        pipe.max_ts = max(pipe.max_ts, st.max_ts)
    return last
