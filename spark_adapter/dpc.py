"""Delay, Process and Correct (DPC) on Spark: watermarks for an input stream that goes silent.

Borealis's DPC (Balazinska, Balakrishnan, Madden, Stonebraker, "Fault-tolerance in the Borealis
distributed stream processing system", SIGMOD 2005), on the micro-batch pipeline:

* **liveness**: every input segment says which streams it holds and up to which event time
  (``source.InputLog``'s segment metadata, ``covers``). A stream that is held back (a silent
  source; ``trimtab inject silence-stream``) is missing from the segments written meanwhile,
  and its backlog arrives later as a segment of its own. A segment without metadata (imported
  events) holds every stream up to its last row.
* **delay**: the *stable* watermark is the newest event time, but no later than what every
  stream has covered; windows it closes are final ('O' rows, ``output/``). A silent stream
  stops it, so its rows are not late when they come back.
* **process**: once a stream's coverage lags the newest event time by more than
  ``max_delay_s`` (event time, which a live writer paces to wall time), the *tentative*
  watermark goes on without it, up to what the other streams have covered; windows it closes
  beyond the stable watermark are emitted once as TENTATIVE ('P' rows, ``tentative/``) and keep
  their state. ``block`` mode never goes tentative: results wait for the stream.
* **correct**: when the backlog arrives, the stable watermark catches up and every window
  emitted tentatively is emitted again, final, exactly once: a correction.

The sink keeps both versions per (window, key): ``output/batch=<b>`` holds the stable rows
(equal to the reference) and ``tentative/batch=<b>`` the tentative ones; ``latest_view`` is
the newest version of each. The watermarks are pinned per batch in the plan log, so a replayed
batch emits the same rows.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

__all__ = [
    "COVERS_KEY",
    "STREAMS_KEY",
    "Coverage",
    "arrivals",
    "dpc_info",
    "dpc_summary",
    "latest_view",
    "read_view",
    "result_timeline",
    "segment_meta",
]

COVERS_KEY = b"trimtab.covers"  # segment metadata: {stream: event time covered up to}
STREAMS_KEY = b"trimtab.streams"  # segment metadata: every stream the writer writes
MODES = ("block", "tentative")


def segment_meta(path: Path) -> tuple[dict[str, float], tuple[str, ...]] | None:
    """A segment's (covers, streams) metadata; None for a segment without it."""
    meta = pq.read_schema(path).metadata or {}
    if COVERS_KEY not in meta:
        return None
    covers = {str(k): float(v) for k, v in json.loads(meta[COVERS_KEY]).items()}
    return covers, tuple(json.loads(meta.get(STREAMS_KEY, b"[]")))


@dataclass
class Coverage:
    """Per input stream, the event time up to which its rows have been read; the watermarks.

    >>> c = Coverage("tentative", 2.0)
    >>> c.add({"a": 5.0, "b": 5.0}, ("a", "b"), 4.9); c.watermarks(4.9)
    (4.9, 4.9)
    >>> c.add({"a": 9.0}, ("a", "b"), 8.9); c.watermarks(8.9)  # b silent 4 s > 2 s
    (5.0, 8.9)
    >>> c.silent(8.9)
    ['b']
    >>> Coverage("block", 2.0, dict(c.covered), set(c.streams)).watermarks(8.9)
    (5.0, 5.0)
    """

    mode: str = "tentative"
    max_delay_s: float = 2.0
    covered: dict[str, float] = field(default_factory=dict)
    streams: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ha.dpc.mode: unknown mode {self.mode!r} (one of {MODES})")
        if not self.max_delay_s >= 0:
            raise ValueError(f"ha.dpc.max_delay_s: must be at least 0, got {self.max_delay_s}")

    def add(self, covers: dict[str, float] | None, streams: Iterable[str], last_ts: float) -> None:
        """Fold one segment read: its metadata, or (None) every known stream up to last_ts."""
        if covers is None:
            covers = dict.fromkeys(self.streams, last_ts)
        self.streams |= set(streams) | set(covers)
        for s, t in covers.items():
            self.covered[s] = max(self.covered.get(s, -math.inf), t)

    def silent(self, latest: float) -> list[str]:
        """Streams whose coverage lags the newest event time by more than max_delay_s."""
        lag = {s: latest - self.covered.get(s, -math.inf) for s in self.streams}
        return sorted(s for s, g in lag.items() if g > self.max_delay_s)

    def watermarks(self, latest: float) -> tuple[float, float]:
        """(stable, tentative) for the next batch, given the newest event time read (the
        final flush's infinite watermark closes everything)."""
        if latest == math.inf:
            return latest, latest
        stable = min([latest, *(self.covered.get(s, -math.inf) for s in self.streams)])
        if self.mode == "block":
            return stable, stable
        quiet = set(self.silent(latest))
        live = [self.covered.get(s, -math.inf) for s in self.streams if s not in quiet]
        return stable, max(stable, min([latest, *live]))

    def add_segments(self, segments: Iterable[Any]) -> None:
        """Fold the input segments a batch read (``recovery.Segment``: covers, streams)."""
        for sg in segments:
            covers = None if sg.covers is None else dict(sg.covers)
            self.add(covers, sg.streams, sg.last_ts)

    def state(self) -> dict[str, Any]:
        """What a commit records, so a restored driver knows what was covered."""
        return {"covered": dict(self.covered), "streams": sorted(self.streams)}

    def restore(self, state: dict[str, Any] | None) -> None:
        """Fold a commit's recorded coverage (``state``)."""
        if state:
            self.add({k: float(v) for k, v in state["covered"].items()}, state["streams"], 0.0)


def dpc_info(spec: Any, workdir: Path, refold: bool, tentative_rows: int) -> dict[str, Any]:
    """What a batch's statistics say about DPC (``batch_compiler.BatchSpec``): its watermarks,
    the tentative rows it wrote, and its corrections: stable rows of windows that a tentative
    watermark had closed before (``spec.twm_prev``). Empty while nothing is tentative."""
    if refold or (spec.twm_prev <= spec.wm_prev and spec.twm <= spec.wm):
        return {}
    out: dict[str, Any] = {"watermarks": {"stable": spec.wm, "tentative": spec.twm}}
    if spec.tentative is not None:
        out["tentative_rows"] = tentative_rows
    if spec.twm_prev > spec.wm_prev:
        stable = read_view(workdir / "output", [spec.batch_id])
        ends = stable["window_start"].to_numpy(dtype=float) + spec.query.size_s
        out["corrections"] = int((ends <= spec.twm_prev + 1e-9).sum())
    return out


def arrivals(segments: Iterable[Any], path: Callable[[int], Path]) -> dict[str, Any]:
    """The segments a batch read that carry coverage: index, covers and arrival (file time),
    so a run's DPC timeline can be told from its statistics once the log is trimmed."""
    out = []
    for sg in segments:
        if sg.covers is None:
            continue
        with contextlib.suppress(OSError):
            at = path(sg.index).stat().st_mtime
            out.append({"index": sg.index, "covers": dict(sg.covers), "arrived": at})
    return {"segments": out} if out else {}


def dpc_summary(stats: Iterable[Any], mode: str) -> dict[str, Any]:
    """A run's DPC figures from its batches' statistics: tentative result rows, corrections,
    the tentative share of every result row emitted, and rows that came too late (dropped)."""
    stats = list(stats)
    tentative = sum(int(st.info.get("tentative_rows", 0)) for st in stats)
    stable = sum(int(st.rows_out) for st in stats)
    return {
        "mode": mode,
        "tentative_rows": tentative,
        "corrections": sum(int(st.info.get("corrections", 0)) for st in stats),
        "tentative_fraction": tentative / max(1, tentative + stable),
        "late_rows": sum(int(st.late) for st in stats),
    }


def read_view(root: Path, batches: Iterable[int]) -> pd.DataFrame:
    """(batch, key, window_start, value) of the given batches' files under ``root``."""
    frames = []
    for b in batches:
        files = sorted((root / f"batch={b}").glob("*.parquet"))
        for f in files:
            frame = pq.read_table(f, columns=["key", "window_start", "value"]).to_pandas()
            frames.append(frame.assign(batch=b))
    if not frames:
        return pd.DataFrame(columns=["batch", "key", "window_start", "value"])
    return pd.concat(frames, ignore_index=True)[["batch", "key", "window_start", "value"]]


def latest_view(workdir: Path, committed: list[int]) -> pd.DataFrame:
    """The newest version of every (window, key) result: stable or tentative, with its status
    and the batch that emitted it (a correction replaces its tentative row)."""
    stable = read_view(workdir / "output", committed).assign(status="STABLE")
    tent = read_view(workdir / "tentative", committed).assign(status="TENTATIVE")
    both = pd.concat([f for f in (tent, stable) if len(f)] or [stable], ignore_index=True)
    both = both.sort_values("batch", kind="stable")
    newest = both.drop_duplicates(["key", "window_start"], keep="last")
    return newest.sort_values(["window_start", "key"], ignore_index=True)


def result_timeline(workdir: Path, size_s: float, live: str, silent: str) -> dict[str, Any]:
    """When each (window, key) result, and each window (its first row of any key), first
    appeared, and when the corrections did, in wall time, against when it was due: the arrival of the first segment covering the window's
    end in the ``live`` stream (``metrics/batch-<b>.json``: ``committed_at`` and the
    ``segments`` each batch read, with their arrival). Windows are *affected* when they fell
    due while ``silent`` was held back, and corrections are timed from its backlog segment's
    arrival. For benches and live tests."""
    committed, segs = _batch_times(workdir)
    arrived, live_end = [], []
    silence_from = backlog_at = math.inf
    for i in sorted(segs):
        covers, at = segs[i]["covers"], float(segs[i]["arrived"])
        if live in covers:
            arrived.append(at)
            live_end.append(float(covers[live]))
        if silent not in covers:
            silence_from = min(silence_from, at)
        elif live not in covers:
            backlog_at = min(backlog_at, at)
    batches = sorted(committed)
    tent = read_view(workdir / "tentative", batches).assign(tentative=True)
    stable = read_view(workdir / "output", batches).assign(tentative=False)
    rows = pd.concat([f for f in (tent, stable) if len(f)] or [stable], ignore_index=True)
    rows["at"] = rows["batch"].map(committed)
    ends = rows["window_start"].to_numpy(dtype=float) + size_s
    order = np.argsort(live_end)
    pos = np.searchsorted(np.asarray(live_end)[order], ends - 1e-9)
    due_sorted = np.minimum.accumulate(np.asarray(arrived)[order][::-1])[::-1]
    rows["due"] = np.where(pos < len(order), due_sorted[np.minimum(pos, len(order) - 1)], np.nan)
    first = rows.sort_values("at").drop_duplicates(["key", "window_start"])
    final = rows[~rows["tentative"]]
    lat = (first["at"] - first["due"]).to_numpy()
    affected = ((first["due"] >= silence_from) & (first["due"] < backlog_at)).to_numpy()
    # usual: due after the driver's first commit (not its start-up backlog) and outside the
    # silence and the recovery after it (4 batch intervals)
    times = np.sort(np.fromiter(committed.values(), float))
    settle = 4 * float(np.median(np.diff(times))) if len(times) > 2 else 0.0
    due = first["due"].to_numpy()
    before = (due >= times[0]) & ((due < silence_from) | (due >= backlog_at + settle))
    fixed = final.merge(tent[["key", "window_start"]], on=["key", "window_start"])
    # per window: when its first row (of any key) appeared, against when it was due
    win = rows.groupby("window_start").agg(at=("at", "min"), due=("due", "first"))
    win_lat = (win["at"] - win["due"]).to_numpy()
    win_at = win["at"].to_numpy(dtype=float)
    win_affected = ((win["due"] >= silence_from) & (win["due"] < backlog_at)).to_numpy()
    return {
        "usual_latency_p50_s": _q(lat[before], 0.5),
        "usual_latency_p99_s": _q(lat[before], 0.99),
        "usual_windows": int(first.loc[before, "window_start"].nunique()),
        "affected_first_latency_p99_s": _q(lat[affected], 0.99),
        "affected_windows": int(win_affected.sum()),
        "affected_window_first_max_s": _q(win_lat[win_affected], 1.0),
        "affected_window_first_after_backlog_min_s": _q(win_at[win_affected] - backlog_at, 0.0),
        "tentative_rows": len(tent),
        "corrected_rows": len(fixed),
        "corrections_done_after_backlog_s": (
            float(fixed["at"].max() - backlog_at) if len(fixed) else None
        ),
        "silence_s": float(backlog_at - silence_from) if math.isfinite(backlog_at) else None,
    }


def _batch_times(workdir: Path) -> tuple[dict[int, float], dict[int, dict[str, Any]]]:
    """Per committed batch its commit time, and per segment read its coverage and arrival."""
    committed, segs = {}, {}
    for f in (workdir / "metrics").glob("batch-*.json"):
        doc = json.loads(f.read_text())
        info = doc.get("info", {})
        if "committed_at" in info:
            committed[int(doc["batch_id"])] = float(info["committed_at"])
        for sg in info.get("segments", []):
            segs[int(sg["index"])] = sg
    return committed, segs


def _q(values: np.ndarray, q: float) -> float | None:
    v = values[np.isfinite(values)]
    return float(np.quantile(v, q)) if len(v) else None
