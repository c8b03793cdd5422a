"""Verification of the Spark pipeline: the output it must have written, computed without Spark.

The reference is ``operators.reference_output`` over the input rows each batch kept under its
pinned plan: the numpy mirror of the batch compiler's drops (``shedding.drops.keep_mask`` for
tuple drops, ``shedding.window_drops.floor_keep_mask`` with the same ``drop_floors`` for whole
windows), and, with window drops, only the windows the pinned batches emitted. No routing: if
the pipeline's output equals the reference, routing, state moves, merges and replays lost or
duplicated nothing. No pyspark import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from shedding.drops import keep_mask
from shedding.window_drops import block_size, floor_keep_mask, window_floor, window_uniform
from spark_adapter.actuator import PinRow, PlanLog, PlanStore
from spark_adapter.batch_compiler import drop_floors, window_keep
from spark_adapter.batchstats import read_batch_stats
from spark_adapter.operators import forked, reference_output, stateless
from spark_adapter.query import QuerySpec, with_operator_params
from spark_adapter.source import SEGMENT_ID_BITS, InputLog

__all__ = [
    "VALUE_ATOL",
    "VALUE_RTOL",
    "PinnedRun",
    "closing_pin",
    "committed_output",
    "output_mismatch",
    "pinned_aggregates",
    "pinned_filters",
    "pinned_keep",
    "reference",
    "verify_workdir",
    "windows_emitted",
]

OUTPUT_COLUMNS = {"key": "int64", "window_start": "float64", "value": "float64"}
VALUE_RTOL = 1e-9
VALUE_ATOL = 1e-9
"""The one tolerance rule: keys and windows equal exactly, values within ``VALUE_RTOL``
relative (or ``VALUE_ATOL`` absolute, for values that cancel to about 0) of the reference:
the pipeline and the reference add the same floats in different orders."""


def output_mismatch(got: pd.DataFrame, exp: pd.DataFrame) -> str | None:
    """Why ``got`` differs from the reference ``exp`` (both sorted by key and window), or None.

    >>> a = pd.DataFrame({"key": [1, 2], "window_start": [0.0, 0.0], "value": [3.0, 1.0]})
    >>> output_mismatch(a, a) is None
    True
    >>> output_mismatch(a, a.assign(value=[3.0, 1.5]))
    'value of key 2, window 0.0: 1.0 against the reference 1.5'
    >>> output_mismatch(a.iloc[:1], a)
    '1 rows against the reference 2'
    """
    if len(got) != len(exp):
        return f"{len(got)} rows against the reference {len(exp)}"
    kw = ["key", "window_start"]
    g, e = got.reset_index(drop=True), exp.reset_index(drop=True)
    diff = (g[kw].to_numpy() != e[kw].to_numpy()).any(axis=1)
    if diff.any():
        i = int(np.argmax(diff))
        return f"row {i}: (key, window) {tuple(g.loc[i, kw])} against {tuple(e.loc[i, kw])}"
    gv, ev = g["value"].to_numpy(float), e["value"].to_numpy(float)
    bad = ~np.isclose(gv, ev, rtol=VALUE_RTOL, atol=VALUE_ATOL)
    if bad.any():
        i = int(np.argmax(bad))
        return (
            f"value of key {g.loc[i, 'key']}, window {g.loc[i, 'window_start']}: "
            f"{gv[i]} against the reference {ev[i]}"
        )
    return None


@dataclass(frozen=True)
class PinnedRun:
    """What a run pinned: the query, the plan log's pins, the plan store, each processed
    batch's event-id range, and whether it shed whole windows."""

    q: QuerySpec
    pins: Sequence[PinRow]
    plans: PlanStore
    ranges: Mapping[int, tuple[int, int]]
    window_drops: bool

    def version_keep(self, version: int) -> float:
        """The window keep of a pinned plan version."""
        return window_keep(self.plans.load(version), self.q)


def pinned_keep(events: pd.DataFrame, run: PinnedRun) -> tuple[np.ndarray, np.ndarray]:
    """Per input row: kept by its batch's pinned drops (True outside every batch), and covered
    by a processed batch. Drops only: the filters are ``pinned_filters``."""
    q, pins, plans = run.q, run.pins, run.plans
    keep = np.ones(len(events), dtype=bool)
    covered = np.zeros(len(events), dtype=bool)
    ids = events["event_id"].to_numpy()
    panes = np.floor(events["ts"].to_numpy() / q.slide_s).astype(np.int64)
    w = q.panes_per_window
    by_batch = {p.batch_id: p for p in pins}
    for b, (lo, hi) in run.ranges.items():
        if lo < 0:
            continue
        pin = by_batch[b]
        plan = plans.load(pin.plan_version)
        sel = (ids >= lo) & (ids <= hi)
        covered |= sel
        if run.window_drops:
            f = drop_floors(b, pin.wm_prev, window_keep(plan, q), pins, run.version_keep, q)
            th, val = [t for t, _ in f.steps], [v for _, v in f.steps]
            keep[sel] = floor_keep_mask(panes[sel], w, q.slide_s, block_size(w), th, val, f.default)
            continue
        for stream in q.sides:
            k = q.keep_of(plan.shed, stream)
            if k < 1.0:
                rows = sel & (events["stream"] == stream).to_numpy()
                keep[rows] = keep_mask(ids[rows], b, k)
    return keep, covered


def pinned_stateless(events: pd.DataFrame, run: PinnedRun) -> tuple[np.ndarray, np.ndarray]:
    """Per input row: passes the filters of its batch's pinned plan (``Plan.operators``), or
    the query's own outside every batch, and its value after that plan's maps."""
    ok, v = stateless(events, run.q)
    ids = events["event_id"].to_numpy()
    by_batch = {p.batch_id: p for p in run.pins}
    for b, (lo, hi) in run.ranges.items():
        ops = run.plans.load(by_batch[b].plan_version).operators if lo >= 0 else {}
        if ops:
            sel = (ids >= lo) & (ids <= hi)
            ok[sel], v[sel] = stateless(events[sel], with_operator_params(run.q, ops))
    return ok, v


def pinned_filters(events: pd.DataFrame, run: PinnedRun) -> np.ndarray:
    """Per input row: passes the stateless operators of its batch's pinned plan."""
    return pinned_stateless(events, run)[0]


def closing_pin(starts: np.ndarray, q: QuerySpec, pins: Sequence[PinRow]) -> np.ndarray:
    """Per window (by start): the position in ``pins`` of the batch whose pinned watermark
    closed (emitted) it, ``len(pins)`` when none did."""
    wm = np.array([p.wm for p in pins])
    j = np.round(starts / q.slide_s).astype(np.int64)
    with np.errstate(invalid="ignore"):
        j_hi = np.where(
            np.isinf(wm) & (wm > 0),
            np.iinfo(np.int64).max,
            np.floor((np.where(np.isfinite(wm), wm, -1e300) - q.size_s) / q.slide_s + 1e-9),
        )
    return np.searchsorted(np.maximum.accumulate(j_hi), j, side="left")  # first e: j <= j_hi


def pinned_aggregates(
    out: pd.DataFrame, rows: Callable[[str], pd.DataFrame], run: PinnedRun
) -> pd.DataFrame:
    """``out`` (every window under the query's own aggregate) with each window's value from the
    aggregate of the batch that emitted it (``Plan.operators``); ``rows(agg)`` is the reference
    under another aggregate (the same windows: a pane's partials give every aggregate)."""
    aggs = [
        with_operator_params(run.q, run.plans.load(p.plan_version).operators).agg for p in run.pins
    ]
    if not aggs or set(aggs) == {run.q.agg}:
        return out
    e = closing_pin(out["window_start"].to_numpy(), run.q, run.pins)
    agg_of = np.array([aggs[i] if i < len(aggs) else run.q.agg for i in e], dtype=object)
    values = out["value"].to_numpy().copy()
    for agg in set(agg_of.tolist()) - {run.q.agg}:
        alt = rows(agg)
        if len(alt) != len(out):
            raise AssertionError("the reference's windows differ between aggregates")
        sel = agg_of == agg
        values[sel] = alt["value"].to_numpy()[sel]
    return out.assign(value=values)


def windows_emitted(
    starts: np.ndarray, q: QuerySpec, pins: Sequence[PinRow], version_keep: Callable[[int], float]
) -> np.ndarray:
    """Window drops: which windows (by start) the pinned batches emitted."""
    wm = np.array([p.wm for p in pins])
    keeps = np.array([version_keep(p.plan_version) for p in pins])
    j = np.round(starts / q.slide_s).astype(np.int64)
    closes = closing_pin(starts, q, pins)
    ok = np.zeros(starts.size, dtype=bool)
    for e in np.unique(closes):
        sel = closes == e
        if e >= len(pins):
            continue  # never closed: never emitted
        floor = window_floor(starts[sel], wm[1 : e + 1], keeps[:e], float(keeps[e]))
        ok[sel] = window_uniform(j[sel], block_size(q.panes_per_window)) < floor
    return ok


def reference(events: pd.DataFrame, run: PinnedRun) -> tuple[pd.DataFrame, int]:
    """Expected output from ``events`` with each batch's pinned drops, and the drop count (of
    rows per path: a split stream's row counts once per path stream it was dropped from)."""
    events = forked(events, run.q)  # a split stream's row once per path
    keep, _ = pinned_keep(events, run)
    passed, values = pinned_stateless(events, run)
    events = events.assign(v=values)  # the maps are in ``values``, the filters in ``passed``
    unfiltered = replace(run.q, predicates={}, steps={s: () for s in run.q.sides})
    kept = pd.Series(keep & passed)
    out = reference_output(events, unfiltered, kept)
    out = pinned_aggregates(
        out, lambda agg: reference_output(events, replace(unfiltered, agg=agg), kept), run
    )
    if run.window_drops:
        starts = out["window_start"].to_numpy()
        out = out[windows_emitted(starts, run.q, run.pins, run.version_keep)]
        out = out.reset_index(drop=True)
    return out, int((~keep).sum())


def committed_output(output_dir: Path, committed: Sequence[int]) -> pd.DataFrame:
    """All committed output, one frame (key, window_start, value), sorted."""
    frames = []
    for b in committed:
        p = output_dir / f"batch={b}"
        if p.exists():
            frames += [pd.read_parquet(f) for f in sorted(p.glob("*.parquet"))]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in OUTPUT_COLUMNS.items()})
    return pd.concat(frames, ignore_index=True).sort_values(
        ["key", "window_start"], ignore_index=True
    )


def _read_log(work: Path) -> tuple[list[PinRow], list[int]]:
    """The plan log's pins and committed batches, read without writing (SQLite read-only)."""
    path = work / "planlog.sqlite"
    if not path.is_file():
        raise ValueError(f"{work}: no plan log (planlog.sqlite): no batch ran here")
    log = PlanLog(path, read_only=True)
    try:
        return log.pin_rows(), log.committed()
    finally:
        log.close()


def _committed_input(log: InputLog, ranges: Mapping[int, tuple[int, int]]) -> pd.DataFrame:
    """The input segments the committed batches read, all present in ``log`` (else a
    ``ValueError`` naming the first one missing)."""
    need = sorted(
        {
            t
            for lo, hi in ranges.values()
            if lo >= 0
            for t in range(lo >> SEGMENT_ID_BITS, (hi >> SEGMENT_ID_BITS) + 1)
        }
    )
    have = set(log.segments())
    lost = [t for t in need if t not in have]
    if lost:
        why = " (trimmed by retention)" if lost[0] < log.trimmed_below() else ""
        raise ValueError(
            f"input: segment {lost[0]} a committed batch read is not in {log.root}{why}; "
            "give the whole input (--input, e.g. regenerated by `trimtab input generate`)"
        )
    return log.read(need)


def verify_workdir(
    work: Path, q: QuerySpec, window_drops: bool = False, input_dir: Path | None = None
) -> dict[str, object]:
    """Does a pipeline's committed output equal the reference? Read from its working
    directory alone (a driver's, after its run closed every window; nothing is written): the input
    log, the pins and commits, the plan versions they name and each batch's event range (its
    statistics file). Exactly-once over the committed batches: the reference counts the rows
    those batches covered, with their pinned drops. A committed batch whose statistics or plan
    version was retired, or whose input segments are gone from the input log (``input_dir``:
    another copy of it), cannot be checked: a ``ValueError`` names it."""
    pins, done = _read_log(work)
    if not done:
        raise ValueError(f"{work}: no committed batch to verify")
    ranges: dict[int, tuple[int, int]] = {}  # (-1, -1): a batch that read no input
    for f in sorted((work / "metrics").glob("batch-*.json")):
        st = read_batch_stats(f)
        ranges.setdefault(st.batch_id, st.event_range)
    missing = [b for b in done if b not in ranges]
    if missing:
        raise ValueError(
            f"{work}: committed batch {missing[0]} has no statistics file (metrics/batch-"
            f"{missing[0]}.json, retired or lost): its input rows cannot be told apart"
        )
    plans = PlanStore(work / "plans", read_only=True)
    pinned = [p for p in pins if p.batch_id <= done[-1]]
    gone = [p.plan_version for p in pinned if not plans.has(p.plan_version)]
    if gone:
        raise ValueError(f"{work}: plan version {gone[0]} a batch pinned was retired")
    committed = set(done)
    ranges = {b: r for b, r in ranges.items() if b in committed}
    if input_dir is not None and not input_dir.is_dir():
        raise ValueError(f"input: {input_dir} is not a directory")
    events = _committed_input(InputLog(input_dir or work / "input"), ranges)
    run = PinnedRun(q, pinned, plans, ranges, window_drops)
    events = events[pinned_keep(events, run)[1]].reset_index(drop=True)  # the committed rows
    exp, dropped = reference(events, run)
    got = committed_output(work / "output", done)
    why = output_mismatch(got, exp)
    return {
        "output_matches_reference": why is None,
        "mismatch": why,
        "batches_committed": len(done),
        "rows_in": len(events),
        "rows_dropped": dropped,
        "rows_out": len(got),
    }
