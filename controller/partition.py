"""Side-by-side partitioner replay: the scenario's key stream through each partitioner, without Spark.

Keys are drawn from the scenario's first keyed stream (its rate, key distribution and hot-key
shifts), or read from a trace (CSV, Parquet or JSON lines; a key column, integers or strings
hashed as ``input import`` hashes them, windowed by a time column or by a row count; keys from
2^20 on folded into [2^20, 2^21) as the Spark pipeline's partitioners fold them). Every window (``window_s`` seconds of
tuples) each partitioner routes the same keys and gets feedback (window loads, capacities,
probe latencies); the window's imbalance, fragmentation and aggregation cost are recorded.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from controller.scenario import ScenarioFile
from core.files import file_problem
from core.footprint import (
    BYTES_PER_WINDOW_ROUTED,
    key_space_problem,
    machine_memory,
    memory_problem,
    routed_problem,
    tables_problem,
    windows_problem,
)
from core.keyspace import KeySpec
from core.workload import key_epochs, rates, sample_keys
from partitioners.base import window_metrics
from partitioners.capa import ProbeLatency
from partitioners.registry import make

__all__ = ["key_stream", "partition_replay", "read_key_trace"]


def key_stream(
    scenario: ScenarioFile,
    seconds: float | None = None,
    zipf: float | None = None,
    keys: int | None = None,
    trace: Path | None = None,
    seed: int | None = None,
    window_s: float = 1.0,
    window_rows: int | None = None,
    key_col: str = "key",
    ts_col: str = "ts",
) -> tuple[list[np.ndarray], float]:
    """Per-tick key batches of the scenario's keyed stream and the tick length, or a trace's
    windows (``read_key_trace``) and ``window_s``."""
    if trace is not None:
        for flag, v in (("--zipf", zipf), ("--keys", keys)):
            if v is not None:
                raise ValueError(f"{flag}: shapes the scenario's key stream, not a --trace")
        if seconds is not None and window_rows is not None:
            raise ValueError("--seconds: a trace cut by --window-rows has no seconds")
        windows = read_key_trace(trace, window_s, window_rows, key_col, ts_col)
        if seconds is not None:  # the first S seconds of the trace's own time
            windows = windows[: max(1, math.ceil(seconds / window_s - 1e-9))]
        return windows, window_s
    for flag, given in (
        ("--window-rows", window_rows is not None),
        ("--key-col", key_col != "key"),
        ("--ts-col", ts_col != "ts"),
    ):
        if given:
            raise ValueError(f"{flag}: reads a --trace (none given: the scenario's keys are used)")
    stream = next((s for s in scenario.streams if s.keys.space > 1), scenario.streams[0])
    spec: KeySpec = stream.keys
    update: dict[str, Any] = {}
    if zipf is not None:
        update |= {"distribution": "zipf", "s": zipf}
    if keys is not None:
        if problem := key_space_problem(keys, "--keys", machine_memory()):
            raise ValueError(problem)
        update["space"] = keys
    spec = spec.model_copy(update=update)
    # salted so key draws never replay the rate process's uniforms
    rng = np.random.default_rng([scenario.seed if seed is None else seed, 0x4B45])
    idx = scenario.streams.index(stream)
    per_tick = rates(scenario)[:, idx]
    ticks = per_tick.size if seconds is None else min(per_tick.size, int(seconds / scenario.tick_s))
    where = f"streams.{idx}.rate" if seconds is None else "--seconds"
    if problem := routed_problem(float(per_tick[:ticks].sum()), where, machine_memory()):
        raise ValueError(problem)
    ep = key_epochs(spec)
    out = []
    for t in range(ticks):
        out.append(sample_keys(ep.probs_at(t * scenario.tick_s), round(per_tick[t]), rng))
    return out, scenario.tick_s


def _read_trace(path: Path, key_col: str) -> pd.DataFrame:
    """The trace's rows, read as ``input import`` reads events (a name without a known
    suffix as CSV), with its key column and at least one row."""
    from spark_adapter.event_import import READER_COLUMNS, event_format, read_events

    if (problem := file_problem(path)) is not None:
        raise ValueError(f"--trace: {problem}")
    try:
        df = read_events([path], event_format(path, None, default="csv"))
    except ValueError as e:
        raise ValueError(f"--trace: {e}") from e
    if key_col not in df.columns:
        cols = ", ".join(str(c) for c in df.columns if c not in READER_COLUMNS)
        raise ValueError(f"--key-col: {path} has no {key_col!r} column (columns: {cols})")
    if df.empty:
        raise ValueError(f"--trace: {path} has no rows")
    return df


def read_key_trace(
    path: Path,
    window_s: float = 1.0,
    window_rows: int | None = None,
    key_col: str = "key",
    ts_col: str = "ts",
) -> list[np.ndarray]:
    """A trace's keys in windows: by its time column ``ts_col`` (seconds; rows in time order,
    ``window_s`` per window, empty windows kept), or, without one, by ``window_rows`` rows.

    Keys are non-negative integers, or strings hashed as ``input import`` hashes them; keys
    from 2^20 on are folded into [2^20, 2^21), as the Spark pipeline's partitioners fold them
    (their per-key state stays small). A trace without a time column needs ``window_rows``.
    """
    from partitioners.micro_batch import fold_key
    from spark_adapter.event_import import TS_BAD, event_seconds, row_place, stable_keys

    df = _read_trace(path, key_col)
    raw, bad_key, _ = stable_keys(df[key_col])
    if bad_key.any():
        where = row_place(df, int(np.flatnonzero(bad_key)[0]))
        raise ValueError(
            f"--trace: {where}: {key_col}: missing, negative, fractional or >= 2^53 "
            "(keys are non-negative integers or strings)"
        )
    keys = fold_key(raw)
    if ts_col not in df.columns:
        if window_rows is None:
            raise ValueError(
                f"--ts-col: {path} has no {ts_col!r} column (seconds); give --window-rows N to "
                "cut it into windows of N rows"
            )
        return [keys[i : i + window_rows] for i in range(0, keys.size, window_rows)]
    if window_rows is not None:
        raise ValueError(
            f"--window-rows: {path} has a time column {ts_col!r}: its windows are --window-s "
            "seconds (--window-rows cuts a trace without one)"
        )
    ts = event_seconds(df[ts_col])
    bad = np.flatnonzero(~np.isfinite(ts))
    if bad.size:
        raise ValueError(f"--trace: {row_place(df, int(bad[0]))}: {ts_col}: {TS_BAD}")
    if window_s <= 0:
        raise ValueError(f"--window-s: must be > 0 (got {window_s})")
    span, per = float(ts.max() - ts.min()), BYTES_PER_WINDOW_ROUTED
    if problem := windows_problem(span, window_s, per, f"--trace: {ts_col}", machine_memory()):
        raise ValueError(problem)
    order = np.argsort(ts, kind="stable")
    w = np.floor((ts[order] - ts[order[0]]) / window_s).astype(np.int64)
    cuts = np.searchsorted(w, np.arange(1, int(w[-1]) + 1))
    return np.split(keys[order], cuts)


def partition_replay(
    scenario: ScenarioFile,
    names: list[str],
    workers: int | None = None,
    window_s: float = 1.0,
    sources: int = 1,
    **stream_kw: Any,
) -> list[dict[str, Any]]:
    """Route the same key stream through each partitioner; per-window metrics and a summary."""
    batches, tick_s = key_stream(scenario, window_s=window_s, **stream_kw)
    cl = scenario.cluster_model()
    n = workers or cl.n
    same = n == cl.n
    cap = cl.capacities() if same else np.ones(n)
    lat_ms = cl.latencies_ms() if same else np.ones(n)
    per_window = max(1, round(window_s / tick_s))
    windows = [
        np.concatenate(batches[i : i + per_window]) for i in range(0, len(batches), per_window)
    ]
    key_space = int(max((w.max() for w in windows if w.size), default=0)) + 1
    jitter = np.random.default_rng(0)
    probe = ProbeLatency(lambda w: float(lat_ms[w]) * (1 + 0.02 * jitter.random()))
    lat = probe.measure(range(n))
    window = int(np.mean([w.size for w in windows]) or 1)
    if problem := tables_problem(names, n, sources, key_space, window, machine_memory()):
        raise ValueError(problem)
    routed = f"--partitioners: {len(names)} over {len(windows):,} windows"
    per = BYTES_PER_WINDOW_ROUTED * len(names)
    if problem := memory_problem(len(windows) * per, routed, machine_memory()):
        raise ValueError(problem)
    rows = []
    for name in names:
        args = (name, n, scenario.seed, sources, cap, lat)
        _warm_up(make(*args, window=window, key_space=key_space), windows, n, cap, lat)
        p = make(*args, window=window, key_space=key_space)
        series, spent = _route_windows(name, p, windows, n, cap, lat)
        rows.append({"partitioner": name, "workers": n, **_window_summary(series, spent)})
    return rows


def _warm_up(p: Any, windows: list[np.ndarray], n: int, cap: np.ndarray, lat: np.ndarray) -> None:
    """Route a few keys through a throwaway instance, fed back once, so that loading (or
    compiling) its numba kernels is not timed as routing: on a 200,000-row trace that load was
    98% of PKG's measured time (3.5 us a key instead of 0.06)."""
    sample = next((w[:256] for w in windows if w.size), np.zeros(1, dtype=np.int64))
    for _ in range(2):
        w = p.route(sample)
        p.feedback(np.bincount(w, minlength=n).astype(float), cap, lat)


def _route_windows(
    name: str, p: Any, windows: list[np.ndarray], n: int, cap: np.ndarray, lat: np.ndarray
) -> tuple[list[Any], float]:
    """Each window's metrics under partitioner ``p`` (fed back its loads), and the routing time."""
    series = []
    spent = 0.0
    for i, keys in enumerate(windows):
        t0 = time.perf_counter()
        w = p.route(keys)
        spent += time.perf_counter() - t0
        series.append(window_metrics(keys, w, n, cap))
        p.feedback(np.bincount(w, minlength=n).astype(float), cap, lat)
        if w.size and (w.min() < 0 or w.max() >= n):
            raise RuntimeError(f"{name}: routed outside [0, {n}) in window {i}")
    return series, spent


def _window_summary(series: list[Any], spent: float) -> dict[str, Any]:
    """Imbalance, fragmentation and aggregation cost over the windows."""
    imb = np.array([s.imbalance for s in series])
    frag = np.array([s.fragmentation_mean for s in series])
    total = sum(s.tuples for s in series)

    def mean(xs: list[float]) -> float:
        return float(np.mean(xs)) if xs else 0.0

    return {
        "windows": len(series),
        "tuples": total,
        "imbalance_mean": float(imb.mean()) if imb.size else 0.0,
        "imbalance_p95": float(np.quantile(imb, 0.95)) if imb.size else 0.0,
        "lambda_max_mean": mean([s.lambda_max for s in series]),
        "fragmentation_mean": float(frag.mean()) if frag.size else 0.0,
        "fragmentation_p95": float(np.quantile(frag, 0.95)) if frag.size else 0.0,
        "fragmentation_max": int(max((s.fragmentation_max for s in series), default=0)),
        "aggregation_cost_mean": mean([s.aggregation_cost for s in series]),
        "routing_us_per_key": spent / max(total, 1) * 1e6,
        "imbalance_series": imb.round(6).tolist(),
    }
