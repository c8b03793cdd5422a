"""Per-batch statistics emitted as data, their JSON files, and the observation built from them.

No pyspark import: the external controller (a separate process) reads the same files.
``observation_from_batches`` gives one sample per micro-batch. The statistics are exact and
replayed with their batch; a replayed batch replaces its first attempt (keyed by batch id), so
nothing is double counted. Unit loads are the partitions' busy seconds apportioned to key
groups by rows, over the batch's duration (cores).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.cluster import NodeStatus
from core.observation import Observation, PipelineBatch
from spark_adapter.source import SEGMENT_ID_BITS

__all__ = [
    "BatchStats",
    "backlog_work",
    "end_to_end",
    "observation_from_batches",
    "offered_rates",
    "partition_status",
    "plan_refused",
    "read_batch_stats",
    "ready_nodes",
    "retire_batch_stats",
    "segments_read",
    "write_batch_stats",
]


@dataclass
class BatchStats:
    """What one micro-batch reported, as data."""

    batch_id: int
    plan_version: int
    replay: bool
    duration_s: float
    rows: np.ndarray  # input rows per partition (after drops and filters)
    busy_s: np.ndarray  # per partition
    kg_rows: np.ndarray  # per key group
    key_rows: pd.DataFrame  # key, side, rows
    stream_rows: dict[str, int]
    state_rows: int
    state_moved: int
    late: int
    rows_out: int
    event_range: tuple[int, int]
    max_ts: float
    info: dict[str, Any] = field(default_factory=dict)


def write_batch_stats(st: BatchStats, directory: Path) -> Path:
    """``batch-<b>.json`` (atomically), for an external controller."""
    from spark_adapter.actuator import atomic_write

    doc = {
        "batch_id": st.batch_id,
        "plan_version": st.plan_version,
        "replay": st.replay,
        "duration_s": st.duration_s,
        "rows": st.rows.tolist(),
        "busy_s": st.busy_s.tolist(),
        "kg_rows": st.kg_rows.tolist(),
        "key_rows": st.key_rows.to_dict(orient="list"),
        "stream_rows": st.stream_rows,
        "state_rows": st.state_rows,
        "state_moved": st.state_moved,
        "late": st.late,
        "rows_out": st.rows_out,
        "event_range": list(st.event_range),
        "max_ts": st.max_ts if np.isfinite(st.max_ts) else None,
        "info": st.info,
    }
    path = directory / f"batch-{st.batch_id:08d}.json"
    atomic_write(path, json.dumps(doc).encode())
    return path


def retire_batch_stats(directory: Path, batch_id: int, keep: int) -> bool:
    """After writing batch ``batch_id``'s file, remove the one that falls out of the newest
    ``keep`` (0 keeps all), so a months-long run's metrics directory stays bounded.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> for b in range(5):
    ...     _ = (d / f"batch-{b:08d}.json").write_text("{}")
    ...     _ = retire_batch_stats(d, b, 3)
    >>> sorted(p.name for p in d.iterdir())
    ['batch-00000002.json', 'batch-00000003.json', 'batch-00000004.json']
    """
    if keep <= 0 or batch_id < keep:
        return False
    f = directory / f"batch-{batch_id - keep:08d}.json"
    existed = f.exists()
    f.unlink(missing_ok=True)
    return existed


def read_batch_stats(path: Path) -> BatchStats:
    """Parse a ``batch-<b>.json`` file; ValueError naming the file when it is not one (cut
    short, or not a trimtab pipeline's).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = Path(d) / "batch-00000003.json"
    ...     _ = f.write_text('{"batch_id": 3}')
    ...     read_batch_stats(f)
    Traceback (most recent call last):
    ...
    ValueError: .../batch-00000003.json: not a trimtab batch file (no 'plan_version')
    """
    try:
        d: dict[str, Any] = json.loads(path.read_text())
        return _batch_stats(d)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({str(e).splitlines()[0]})") from None
    except KeyError as e:
        raise ValueError(f"{path}: not a trimtab batch file (no {e.args[0]!r})") from None
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        raise ValueError(f"{path}: not a trimtab batch file ({str(e).splitlines()[0]})") from None


def _batch_stats(d: dict[str, Any]) -> BatchStats:
    return BatchStats(
        batch_id=int(d["batch_id"]),
        plan_version=int(d["plan_version"]),
        replay=bool(d["replay"]),
        duration_s=float(d["duration_s"]),
        rows=np.asarray(d["rows"], dtype=np.int64),
        busy_s=np.asarray(d["busy_s"], dtype=float),
        kg_rows=np.asarray(d["kg_rows"], dtype=np.int64),
        key_rows=pd.DataFrame(d["key_rows"]),
        stream_rows={str(k): int(v) for k, v in d["stream_rows"].items()},
        state_rows=int(d["state_rows"]),
        state_moved=int(d["state_moved"]),
        late=int(d["late"]),
        rows_out=int(d["rows_out"]),
        event_range=(int(d["event_range"][0]), int(d["event_range"][1])),
        max_ts=float("-inf") if d["max_ts"] is None else float(d["max_ts"]),
        info=dict(d.get("info", {})),
    )


def end_to_end(batches: list[BatchStats]) -> dict[str, Any]:
    """Arrival-to-commit latency over every segment the batches committed (p50, p99, max;
    seconds) and the backlog (segments waiting) after each batch. In a live run a segment
    arrives when the writer adds it; in a replay the whole log is there from the start."""
    lat = np.array([x for b in batches for x in b.info.get("arrival_to_commit_s", [])])
    backlog = [int(b.info.get("backlog_segments", 0)) for b in batches]
    if lat.size == 0:
        return {
            "arrival_to_commit_p50_s": None,
            "arrival_to_commit_p99_s": None,
            "arrival_to_commit_max_s": None,
            "backlog_segments": backlog,
        }
    return {
        "arrival_to_commit_p50_s": float(np.percentile(lat, 50)),
        "arrival_to_commit_p99_s": float(np.percentile(lat, 99)),
        "arrival_to_commit_max_s": float(lat.max()),
        "backlog_segments": backlog,
    }


def partition_status(st: BatchStats, n: int) -> tuple[NodeStatus, ...]:
    """Capacity of the partitions as the controller's nodes see it after batch ``st``.

    Spark runs the partitions on whatever executors are alive. With fewer live executors than
    the nodes the batch ran (``info["nodes"]``; one was lost for good), the surplus running
    partitions (the highest-numbered) are reported DOWN: their capacity is gone, so the
    controller re-places their key groups onto the surviving partitions and sheds any
    shortfall. They are UP again once executors return. An executor the pipeline requested
    that has not registered yet (``starting_executors``, a scale-out's join) is starting, not
    lost; partitions beyond the batch's running nodes (scaled in, or not joined yet) ran
    nothing, so nothing says they failed.

    >>> from types import SimpleNamespace as B
    >>> partition_status(B(info={"live_executors": 1, "nodes": 2}), 2)
    (<NodeStatus.UP: 'up'>, <NodeStatus.DOWN: 'down'>)
    >>> partition_status(B(info={"live_executors": 1, "nodes": 1}), 2)  # scaled to one node
    (<NodeStatus.UP: 'up'>, <NodeStatus.UP: 'up'>)
    >>> partition_status(B(info={"live_executors": 1, "nodes": 2, "starting_executors": 1}), 2)
    (<NodeStatus.UP: 'up'>, <NodeStatus.UP: 'up'>)
    """
    live = st.info.get("live_executors")
    running = min(n, int(st.info.get("nodes", n)))
    if live is None:
        return tuple([NodeStatus.UP] * n)
    have = max(int(live) + int(st.info.get("starting_executors", 0)), 1)
    return tuple(NodeStatus.DOWN if have <= i < running else NodeStatus.UP for i in range(n))


def ready_nodes(st: BatchStats) -> int | None:
    """The batch's running nodes whose executors were live at its end (None: not recorded).

    >>> from types import SimpleNamespace as B
    >>> ready_nodes(B(info={"live_executors": 1, "nodes": 2})), ready_nodes(B(info={}))
    (1, None)
    """
    live, nodes = st.info.get("live_executors"), st.info.get("nodes")
    return None if live is None or nodes is None else min(int(live), int(nodes))


def plan_refused(st: BatchStats) -> tuple[int, str] | None:
    """The plan version the pipeline refused for this batch and why (``plan_fit``), if any.

    >>> from types import SimpleNamespace as B
    >>> plan_refused(B(info={"plan_refused": {"version": 7, "problem": "p"}})), plan_refused(B(info={}))
    ((7, 'p'), None)
    """
    r = st.info.get("plan_refused")
    return None if not r else (int(r["version"]), str(r["problem"]))


def _no_batch(n: int, d: int, plan_version: int) -> Observation:
    """A steered pipeline that completed no batch since the last observation."""
    return Observation(
        0.0,
        np.zeros((0, 0)),
        np.zeros((n, 0)),
        np.zeros((d, 0)),
        tuple([NodeStatus.UP] * n),
        np.zeros(n),
        0.0,
        plan_version,
        counters={"batches": 0.0},
    )


def segments_read(st: BatchStats) -> int:
    """Input segments (ticks of input) a batch read: one in a replay, more when a live batch
    catches up a backlog (event ids of segment t start at t x 2^32).

    >>> from types import SimpleNamespace as B
    >>> segments_read(B(event_range=(3 << 32, (5 << 32) + 7))), segments_read(B(event_range=(-1, -1)))
    (3, 1)
    """
    lo, hi = st.event_range
    return 1 if lo < 0 else (hi >> SEGMENT_ID_BITS) - (lo >> SEGMENT_ID_BITS) + 1


def backlog_work(st: BatchStats, n: int) -> np.ndarray:
    """Per partition, the busy seconds the input segments still queued after batch ``st``
    will take: its ``backlog_segments`` times its own busy seconds per segment read (an
    estimate at the batch's rates and drops).

    >>> from types import SimpleNamespace as B
    >>> b = B(info={"backlog_segments": 3}, busy_s=np.array([2.0, 1.0]), event_range=(0, 1 << 32))
    >>> backlog_work(b, 2).tolist()
    [3.0, 1.5]
    """
    queued = int(st.info.get("backlog_segments", 0) or 0)
    busy = np.asarray(st.busy_s, dtype=float)
    if queued <= 0 or busy.size != n:
        return np.zeros(n)
    return busy * queued / segments_read(st)


def offered_rates(
    rows: dict[str, int], keep: dict[str, float], streams: list[str], inputs: list[str] | None
) -> np.ndarray:
    """Rows offered per stream in one batch: rows counted over their keep; a stream dropped
    whole (keep 0) takes the largest of its siblings' (``inputs``: the same input stream), or
    NaN (not seen) when it has none.

    >>> offered_rates({"s:a": 0, "s:b": 30, "t": 0}, {"s:a": 0.0, "s:b": 0.5, "t": 0.0},
    ...               ["s:a", "s:b", "t"], ["s", "s", "t"]).tolist()
    [60.0, 60.0, nan]
    """
    k = np.array([keep.get(s, 1.0) for s in streams], dtype=float)
    seen = k > 1e-6
    out = np.array([rows.get(s, 0) for s in streams], dtype=float) / np.where(seen, k, 1.0)
    groups = np.array(inputs if inputs is not None else streams)
    for i in np.flatnonzero(~seen):
        sib = (groups == groups[i]) & seen
        out[i] = out[sib].max() if sib.any() else np.nan
    return out


def _batch_rates(
    batches: list[BatchStats],
    streams: list[str],
    tick_s: float,
    inputs: list[str] | None,
    last_rates: np.ndarray | None,
) -> np.ndarray:
    """``(streams, batches)`` offered rates (rows/s); a stream not seen keeps the last rate."""
    rates = np.zeros((len(streams), len(batches)))
    held = np.zeros(len(streams)) if last_rates is None else np.asarray(last_rates, float)
    for j, b in enumerate(batches):
        kept = b.info.get("stream_keep", {})  # rows counted after drops: offered = kept / keep
        span = segments_read(b) * tick_s  # a live batch behind its input reads several ticks
        now = offered_rates(b.stream_rows, kept, streams, inputs) / span
        rates[:, j] = held = np.where(np.isnan(now), held, now)
    return rates


def observation_from_batches(
    batches: list[BatchStats],
    n: int,
    streams: list[str],
    tick_s: float,
    plan_version: int,
    inputs: list[str] | None = None,
    last_rates: np.ndarray | None = None,
) -> Observation:
    """One sample per batch: unit (key group) and partition loads in cores, rates, hot keys.

    ``inputs[i]``: the input stream of ``streams[i]``; a stream a batch dropped whole shows no
    rate: it takes its siblings' (a split's paths copy one input), else ``last_rates``'.
    """
    if not batches:
        return _no_batch(n, len(streams), plan_version)
    g = batches[0].kg_rows.size
    unit = np.zeros((g, len(batches)))
    node = np.zeros((n, len(batches)))
    for j, b in enumerate(batches):
        dur = max(b.duration_s, 1e-3)
        node[:, j] = b.busy_s / dur
        per_row = np.divide(b.busy_s, b.rows, out=np.zeros(n), where=b.rows > 0)
        # a key group's rows may sit in several partitions (split hot keys): average cost per row
        mean_cost = float((per_row * b.rows).sum() / max(b.rows.sum(), 1))
        unit[:, j] = b.kg_rows * mean_cost / dur
    rates = _batch_rates(batches, streams, tick_s, inputs, last_rates)
    last = batches[-1]
    kc = last.key_rows.groupby("key")["rows"].sum() if len(last.key_rows) else None
    key_counts = (
        np.stack([kc.index.to_numpy(), kc.to_numpy()], axis=1).astype(np.int64)
        if kc is not None
        else np.zeros((0, 2), dtype=np.int64)
    )
    return Observation(
        time_s=float(sum(b.duration_s for b in batches)),
        unit_load=unit,
        node_load=node,
        input_rates=rates,
        node_status=partition_status(last, n),
        backlog_s=backlog_work(last, n),
        latency_s=float(np.mean([b.duration_s for b in batches])),
        plan_version=plan_version,
        counters={"batches": float(len(batches))},
        key_counts=key_counts,
        batches=tuple(
            PipelineBatch(
                b.batch_id,
                b.duration_s,
                int(b.rows.sum()),
                int(b.info.get("partials_merged", 0)),
                b.info.get("started_at"),
                tuple(int(x) for x in b.rows),
                tuple(float(x) for x in b.busy_s),
                ready_nodes(b),
                plan_refused(b),
            )
            for b in batches
        ),
    )
