"""The query as the Spark pipeline runs it, and its per-partition logic in pandas.

A scenario's query network is compiled to one *keyed stage*: per-stream stateless operators
(filters, maps, UDF costs) in front of one keyed windowed operator, an aggregate
(count/sum/avg/min/max of ``v``) or a windowed equi-join whose result is counted per key and
window. Windows are sliding (``size_s``, ``slide_s``); state is kept per (key, side, pane) where
a pane is one slide. ``update_partition`` folds a partition's routed input into its state
panes, emits partial aggregates of the windows the pinned watermark closes, prunes panes no
open window needs, and reports its own load as data (rows, busy seconds, key-group and key
counts, state rows moved). ``merge_partials`` combines partials of split keys
deterministically; ``reference_output`` computes the same answer with plain pandas.
No pyspark import here: this module is tested on its own.
"""

from __future__ import annotations

import functools
import math
import os
import re
import time
from typing import Any

import numpy as np
import pandas as pd

from spark_adapter.expressions import Expr
from spark_adapter.query import OPS, QuerySpec

__all__ = [
    "FOLD_COLUMNS",
    "FOLD_DDL",
    "PANE_COLUMNS",
    "ROW_COLUMNS",
    "ROW_DDL",
    "STAT_COLUMNS",
    "charge_merge",
    "forked",
    "merge_partials",
    "passes_filters",
    "reference_output",
    "update_partition",
]

PANE_COLUMNS = ["tag", "key", "kg", "side", "pane", "cnt", "sum", "mn", "mx"]
"""A pane row: a (key, side, pane) partial aggregate, tagged I (input), S (state) or O (output)."""
ROW_COLUMNS = [*PANE_COLUMNS, "pid", "prev_pid"]
"""A routed pane row: its partition under the batch's plan and under the previous one."""
ROW_DDL = (
    "tag STRING, key LONG, kg INT, side INT, pane LONG, cnt DOUBLE, sum DOUBLE, mn DOUBLE, "
    "mx DOUBLE, pid INT, prev_pid INT"
)
"""The state's schema (cached between batches and in snapshots)."""
STAT_COLUMNS = ["rows", "busy_s", "state_in", "moved", "late", "partials", "ev_lo", "ev_hi"]
"""What a partition reports about itself: on its T row, input rows, busy seconds, state rows in,
state rows moved here, late rows, partials emitted, and its input's event-id range; on K rows
(key group ``kg``) and H rows (``key``, ``side``) only ``rows``."""
FOLD_COLUMNS = [*ROW_COLUMNS, *STAT_COLUMNS]
FOLD_DDL = (
    ROW_DDL + ", rows LONG, busy_s DOUBLE, state_in LONG, moved LONG, late LONG, partials LONG, "
    "ev_lo LONG, ev_hi LONG"
)
"""The keyed stage's output: state (S), partials (O) and statistics (T, K, H) rows."""


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """Concatenate the non-empty frames (an empty result keeps ``columns``)."""
    full = [f for f in frames if len(f)]
    return pd.concat(full, ignore_index=True) if full else pd.DataFrame(columns=columns)


SLOWDOWN_ENV = "TRIMTAB_EXECUTOR_SLOWDOWN"


@functools.cache
def executor_slowdown() -> float:
    """This executor's factor on the operators' CPU cost: heterogeneous executors on one machine.

    ``TRIMTAB_EXECUTOR_SLOWDOWN="0:3,1:1"`` (set for the executors through
    ``spark.executorEnv``) maps executor ids to factors. A Python worker learns its executor's
    id from the log address Spark gives it (``SPARK_LOG_URL_STDERR``, ``executorId=N``); in
    ``local`` mode there is one executor and no id, so the factor is 1.
    """
    spec = os.environ.get(SLOWDOWN_ENV, "")
    m = re.search(r"executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
    if not spec or not m:
        return 1.0
    factors = dict(part.split(":", 1) for part in spec.split(",") if ":" in part)
    return float(factors.get(m.group(1), 1.0))


def _burn(seconds: float, factor: float = 1.0) -> None:
    """Spend ``seconds`` of CPU (the operators' per-tuple cost), times this executor's factor
    and ``factor`` (the partition's)."""
    end = time.perf_counter() + seconds * executor_slowdown() * factor
    while time.perf_counter() < end:
        pass


def charge_merge(q: QuerySpec, partials: int) -> None:
    """Spend the merge's CPU for ``partials`` partial results merged across partitions.

    Only partials that meet others in a merge are charged: every key's under round-robin,
    the split hot keys' under key splitting. A key computed whole in one partition is final
    where it is and costs nothing here.
    """
    _burn(q.merge_cost_us * 1e-6 * partials)


def _window_range(q: QuerySpec, wm_prev: float, wm: float, panes: np.ndarray) -> tuple[int, int]:
    """Window indices j (start = j * slide) closed by wm and not yet by wm_prev."""
    w = q.panes_per_window
    if wm == -math.inf:
        return 0, -1  # nothing has closed yet
    lo_default = int(panes.min()) - w + 1 if panes.size else 0
    hi_default = int(panes.max()) if panes.size else -1
    j_lo = (
        lo_default
        if wm_prev == -math.inf
        else math.floor((wm_prev - q.size_s) / q.slide_s + 1e-9) + 1
    )
    j_hi = hi_default if wm == math.inf else math.floor((wm - q.size_s) / q.slide_s + 1e-9)
    return j_lo, j_hi


PANE_KEYS = ["key", "kg", "side", "pane"]
_AGG = {"cnt": ("cnt", "sum"), "sum": ("sum", "sum"), "mn": ("mn", "min"), "mx": ("mx", "max")}
_FOLD_TYPES = {
    "key": "Int64",
    "kg": "Int32",
    "side": "Int32",
    "pane": "Int64",
    "cnt": "float64",
    "sum": "float64",
    "mn": "float64",
    "mx": "float64",
    "pid": "Int32",
    "prev_pid": "Int32",
    "rows": "Int64",
    "busy_s": "float64",
    **{c: "Int64" for c in ("state_in", "moved", "late", "partials", "ev_lo", "ev_hi")},
}


def update_partition(
    rows: pd.DataFrame,
    q: QuerySpec,
    pid: int,
    wm_prev: float,
    wm: float,
    costs_by_side: dict[int, float],
    tentative: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Fold one partition's input ('I') and state ('S') rows; return S, O, P, T, K and H rows.

    ``wm_prev``/``wm`` are the stable watermarks: windows they close are emitted final ('O'),
    rows of windows closed before are late, and panes are pruned by them. ``tentative`` is the
    DPC watermark pair (previous, now; ``spark_adapter.dpc``): windows it passes beyond the
    stable watermark are emitted TENTATIVE ('P') once, with what has arrived, and keep their
    panes, so the stable emission corrects them. Input rows may carry their ``event_id``; the
    T row reports the range it saw.
    """
    t0 = time.perf_counter()
    inp, st = rows[rows["tag"] == "I"], rows[rows["tag"] == "S"]
    _burn(
        sum(costs_by_side.get(int(s), 0.0) * int(c) for s, c in inp["side"].value_counts().items())
        * 1e-6,
        q.slowdown[pid] if pid < len(q.slowdown) else 1.0,
    )
    j_prev = (
        -math.inf
        if wm_prev in (-math.inf, math.inf)
        else math.floor((wm_prev - q.size_s) / q.slide_s + 1e-9)
    )
    late = inp["pane"].to_numpy() <= j_prev  # every window of these tuples was already emitted
    # an aggregate's paths fold together (their sides told the cost and statistics apart)
    folded = inp[~late] if q.kind == "join" else inp[~late].assign(side=0)
    panes = _fold_panes(folded, st)
    j_lo, j_hi = _window_range(q, wm_prev, wm, panes["pane"].to_numpy())
    partials = _emit_windows(panes, q.panes_per_window, j_lo, j_hi)
    provisional = _tentative(panes, q, wm, tentative)
    if wm == math.inf:
        state = panes.iloc[0:0]  # the final flush: every window is closed
    else:
        state = panes[panes["pane"] > j_hi] if j_hi >= j_lo or wm != -math.inf else panes
    ids = inp["event_id"] if "event_id" in inp else pd.Series([], dtype="int64")
    load = {
        "tag": ["T"],
        "rows": [len(inp)],
        "state_in": [len(st)],
        "moved": [int((st["prev_pid"] != pid).sum()) if len(st) else 0],
        "late": [int(late.sum())],
        "partials": [len(partials)],
        "ev_lo": [int(ids.min()) if len(ids) else -1],
        "ev_hi": [int(ids.max()) if len(ids) else -1],
        "busy_s": [time.perf_counter() - t0],
    }
    out = [partials.assign(tag="O"), provisional, state.assign(tag="S"), pd.DataFrame(load)]
    if len(inp):
        out += _key_counts(inp[~late], inp)
    return _typed(_concat(out, FOLD_COLUMNS), pid)


def _tentative(
    panes: pd.DataFrame, q: QuerySpec, wm: float, tentative: tuple[float, float] | None
) -> pd.DataFrame:
    """'P' rows: partials of the windows the tentative watermark closes now and the stable one
    has not (each window once: those closed by an earlier tentative watermark are skipped)."""
    if tentative is None or wm == math.inf or tentative[1] <= wm:
        return panes.iloc[0:0].assign(tag="P")
    start = max(tentative[0], wm)
    j_lo, j_hi = _window_range(q, start, tentative[1], panes["pane"].to_numpy())
    return _emit_windows(panes, q.panes_per_window, j_lo, j_hi).assign(tag="P")


def _fold_panes(inp: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """Input and state rows summed per (key, kg, side, pane), in a fixed order so float sums
    do not depend on the shuffle's fetch order (replays are identical)."""
    vals = [*PANE_KEYS, "cnt", "sum", "mn", "mx"]
    types = {c: ("int64" if c in PANE_KEYS else "float64") for c in vals}
    allp = _concat([inp[vals], st[vals]], vals).astype(types)
    allp = allp.sort_values([*PANE_KEYS, "sum", "cnt"], kind="stable", ignore_index=True)
    return allp.groupby(PANE_KEYS, sort=True, as_index=False).agg(**_AGG)


def _emit_windows(panes: pd.DataFrame, w: int, j_lo: int, j_hi: int) -> pd.DataFrame:
    """Partials of windows j_lo..j_hi (``pane`` becomes the window index j): each pane feeds
    the ``w`` windows that contain it."""
    if not len(panes) or j_hi < j_lo:
        return panes.iloc[0:0]
    pv = panes["pane"].to_numpy()
    first = np.maximum(pv - w + 1, j_lo)
    reps = np.maximum(np.minimum(pv, j_hi) - first + 1, 0)
    idx = np.repeat(np.arange(len(panes)), reps)
    offs = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    ex = panes.iloc[idx].reset_index(drop=True)
    ex["pane"] = (first[idx] + offs).astype(np.int64)
    return ex.groupby(PANE_KEYS, sort=True, as_index=False).agg(**_AGG)


def _key_counts(kept: pd.DataFrame, inp: pd.DataFrame) -> list[pd.DataFrame]:
    """K rows (input rows per key group, late rows aside) and H rows (per key and side)."""
    kgc = kept["kg"].value_counts()
    k = pd.DataFrame({"tag": "K", "kg": kgc.index.astype(np.int32), "rows": kgc.to_numpy()})
    h = inp.groupby(["key", "side"]).size().reset_index(name="rows")
    return [k, h.assign(tag="H")]


def _nullable_int(values: np.ndarray, mask: np.ndarray, dtype: str) -> pd.arrays.IntegerArray:
    """A nullable integer column built from its values and its null mask (no per-row work)."""
    np_type = np.int32 if dtype == "Int32" else np.int64
    return pd.arrays.IntegerArray(values.astype(np_type), mask)


def _typed(res: pd.DataFrame, pid: int) -> pd.DataFrame:
    """The fold's rows in ``FOLD_COLUMNS`` order and types, tagged with their partition.

    Integer columns are built from values and null masks: converting an object or float
    column with nulls to a nullable integer type goes through Python per row, and a
    partition's state rows (most rows) lack every statistics column.
    """
    n = len(res)
    out: dict[str, Any] = {}
    for c in FOLD_COLUMNS:
        dtype = _FOLD_TYPES.get(c, "object")
        if c in ("pid", "prev_pid"):
            out[c] = _nullable_int(np.full(n, pid), np.zeros(n, dtype=bool), dtype)
        elif dtype == "object":
            out[c] = res[c].to_numpy()
        elif c not in res.columns:
            miss = np.ones(n, dtype=bool)
            out[c] = (
                np.full(n, np.nan)
                if dtype == "float64"
                else _nullable_int(np.zeros(n), miss, dtype)
            )
        elif dtype == "float64":
            out[c] = res[c].to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            col = res[c]
            miss = col.isna().to_numpy()
            numpy_kind = col.dtype.kind if isinstance(col.dtype, np.dtype) else ""
            if numpy_kind in ("i", "u"):
                values = col.to_numpy()
            elif numpy_kind == "f":
                values = np.where(miss, 0.0, col.to_numpy())
            else:  # nullable integers or objects: exact, no float round trip
                values = col.to_numpy(dtype=np.int64, na_value=0)
            out[c] = _nullable_int(values, miss, dtype)
    return pd.DataFrame(out)


def merge_partials(o: pd.DataFrame, q: QuerySpec) -> pd.DataFrame:
    """Combine 'O' partials of split keys into final window values: (key, window_start, value).

    Sorting before summing makes the result independent of the order partials arrive in.
    """
    if o.empty:
        return pd.DataFrame(
            {
                "key": pd.Series(dtype="int64"),
                "window_start": pd.Series(dtype="float64"),
                "value": pd.Series(dtype="float64"),
            }
        )
    o = o.sort_values(["key", "pane", "side", "pid", "sum", "cnt"], kind="stable")
    g = (
        o.groupby(["key", "pane", "side"], sort=True)
        .agg(cnt=("cnt", "sum"), sum=("sum", "sum"), mn=("mn", "min"), mx=("mx", "max"))
        .reset_index()
    )
    if q.kind == "join":
        left = g[g["side"] == 0].set_index(["key", "pane"])["cnt"]
        right = g[g["side"] == 1].set_index(["key", "pane"])["cnt"]
        both = pd.concat([left.rename("l"), right.rename("r")], axis=1, join="inner")
        val = (both["l"] * both["r"]).reset_index()
        val.columns = ["key", "pane", "value"]
    else:
        g = g[g["side"] == 0]
        col = {
            "count": g["cnt"],
            "sum": g["sum"],
            "avg": g["sum"] / g["cnt"],
            "min": g["mn"],
            "max": g["mx"],
        }[q.agg]
        val = pd.DataFrame(
            {"key": g["key"].to_numpy(), "pane": g["pane"].to_numpy(), "value": col.to_numpy()}
        )
    val = val[val["value"] != 0] if q.kind == "join" else val
    return pd.DataFrame(
        {
            "key": val["key"].astype("int64").to_numpy(),
            "window_start": (val["pane"].astype("int64") * q.slide_s).astype("float64").to_numpy(),
            "value": val["value"].astype("float64").to_numpy(),
        }
    ).sort_values(["key", "window_start"], ignore_index=True)


def forked(events: pd.DataFrame, q: QuerySpec) -> pd.DataFrame:
    """The rows as the stage reads them: a row of a split stream once per path stream
    (``QuerySpec.forks``), named by it; other rows as they are (so forking twice is once)."""
    if not q.forks:
        return events
    by = q.fork_paths
    st = events["stream"].to_numpy()
    parts = [events[~np.isin(st, list(by))]]
    for s, names in by.items():
        rows = events[st == s]
        parts += [rows.assign(stream=name) for name in names]
    return pd.concat(parts, ignore_index=True)


def stateless(events: pd.DataFrame, q: QuerySpec) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether it passes its stream's filters, and its value ``v`` after its maps,
    each stream's chain applied in order (as the Spark stage does). A row of another stream, or
    whose mapped value is not finite, does not pass."""
    mask = events["stream"].isin(list(q.sides)).to_numpy()
    v = events["v"].to_numpy(dtype=np.float64).copy()
    c = events["c"].to_numpy(dtype=np.float64) if "c" in events else np.zeros(len(events))
    for s in q.sides:
        chain = q.chain(s)
        if not chain:
            continue
        sel = (events["stream"] == s).to_numpy()
        env = {"v": v[sel], "c": c[sel]}
        ok = np.ones(int(sel.sum()), dtype=bool)
        for _kind, step in chain:
            if isinstance(step, Expr):
                env = {**env, "v": step.evaluate(env)}
            else:
                col, op, val = step  # type: ignore[misc]
                ok &= OPS[op](env[col], val)
        if q.value_sql(s) != "`v`":  # as the SQL: a mapped value must be finite
            ok &= np.isfinite(env["v"])
        mask[sel] &= ok
        v[sel] = env["v"]
    return mask, v


def passes_filters(events: pd.DataFrame, q: QuerySpec) -> np.ndarray:
    """Rows of the query's streams that pass its stateless filters (as the Spark stage does)."""
    return stateless(events, q)[0]


def reference_output(
    events: pd.DataFrame, q: QuerySpec, keep: pd.Series | None = None
) -> pd.DataFrame:
    """The expected final output of every window, from the kept input rows, without routing."""
    ev = forked(events if keep is None else events[keep.to_numpy()], q)
    ok, v = stateless(ev, q)
    ev = ev[ok].assign(v=v[ok]) if q.maps_values else ev[ok]
    w = q.panes_per_window
    pane = np.floor(ev["ts"].to_numpy() / q.slide_s).astype(np.int64)  # as Spark: floor(ts / slide)
    reps = np.full(pane.size, w)
    idx = np.repeat(np.arange(pane.size), reps)
    j = pane[idx] - (np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps))
    x = pd.DataFrame(
        {
            "key": ev["key"].to_numpy()[idx],
            "side": ev["stream"].map(q.sides).to_numpy()[idx] if q.kind == "join" else 0,
            "pane": j,
            "v": ev["v"].to_numpy()[idx],
        }
    )
    parts = (
        x.groupby(["key", "pane", "side"])
        .agg(cnt=("v", "size"), sum=("v", "sum"), mn=("v", "min"), mx=("v", "max"))
        .reset_index()
    )
    parts["pid"] = 0
    return merge_partials(parts.astype({"cnt": "float64"}), q)
