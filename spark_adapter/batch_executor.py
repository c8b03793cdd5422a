"""The batch executor: the steps that apply a compiled ``BatchSpec`` to a micro-batch.

``shed_and_route`` (drops, filters, key group, pane and partition of the input rows; the
state of b - 1 re-routed by the same plan) -> ``fold`` (``repartitionById`` and the keyed
stage per partition, ``operators.update_partition``) -> ``collect_and_write`` (one job: each
partition writes the final values of its keys that are not split, which are final where they
are, and returns its statistics rows and the split keys' partials; the driver merges the
split keys; round-robin merges on the cluster, a second shuffle: ``collect`` then
``write_output``) -> ``batch_stats`` (the partitions' typed statistics as a ``BatchStats``). Committing,
snapshots and retention are the pipeline's (``pipeline.SparkPipeline.process``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel, TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_adapter.batch_compiler import BatchSpec
from spark_adapter.batchstats import BatchStats
from spark_adapter.operators import (
    FOLD_COLUMNS,
    FOLD_DDL,
    PANE_COLUMNS,
    charge_merge,
    merge_partials,
    update_partition,
)
from spark_adapter.query import QuerySpec

__all__ = [
    "OUTPUT_DDL",
    "batch_stats",
    "collect",
    "collect_and_write",
    "emitted",
    "fold",
    "input_files",
    "output_frame",
    "rows_span",
    "shed_and_route",
    "stream_keep",
    "write_output",
]

OUTPUT_DDL = "key LONG, window_start DOUBLE, value DOUBLE"


def input_files(df: DataFrame) -> set[str]:
    """The files a batch's frame reads (none for a frame that is not a file relation)."""
    try:
        return set(df.inputFiles())
    except Exception:  # not a file relation (a streaming micro-batch names none)
        return set()


def shed_and_route(df: DataFrame, state: DataFrame, spec: BatchSpec) -> DataFrame:
    """Input rows of the batch (kept, filtered, tagged 'I') with the state of b - 1 (tagged
    'S'), each with its partition under the batch's plan (``pid``) and before it (``prev_pid``)."""
    if spec.fork is not None:  # a split: a copy of the row per path, each its own stream
        df = df.withColumn("stream", F.explode(F.expr(spec.fork)))
    if spec.input_keep is not None:
        df = df.where(F.expr(spec.input_keep))
    rows = df.where(F.expr(spec.input_filter)).select(
        F.lit("I").alias("tag"),
        "key",
        *[F.expr(sql).alias(name) for name, sql in spec.pane_columns],
        F.lit(1.0).alias("cnt"),
        F.expr(spec.input_value).alias("sum"),
        F.expr(spec.input_value).alias("mn"),
        F.expr(spec.input_value).alias("mx"),
        "event_id",
    )
    if spec.window_keep is not None:
        rows = rows.where(F.expr(spec.window_keep))
    rows = rows.withColumn("pid", F.expr(spec.route))
    routed = rows.select(*PANE_COLUMNS, "pid", F.col("pid").alias("prev_pid"), "event_id")
    moved = state.select(
        F.lit("S").alias("tag"),
        *PANE_COLUMNS[1:],
        F.expr(spec.state_route).alias("pid"),
        F.col("pid").alias("prev_pid"),
        F.lit(None).cast("long").alias("event_id"),
    )
    return routed.unionByName(moved)


def fold(merged: DataFrame, spec: BatchSpec, q: QuerySpec) -> DataFrame:
    """Each partition folds its rows into state and emits partials and its statistics."""
    wm_prev, wm, costs = spec.wm_prev, spec.wm, dict(spec.costs_by_side)
    tentative = spec.tentative

    def fold_partition(it: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = list(it)
        pid = TaskContext.get().partitionId()  # type: ignore[union-attr]
        rows = (
            pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=FOLD_COLUMNS)
        )
        yield update_partition(rows, q, pid, wm_prev, wm, costs, tentative)

    return (
        merged.repartitionById(spec.partitions, "pid")
        .mapInPandas(fold_partition, FOLD_DDL)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


def emitted(spec: BatchSpec, tag: str = "O") -> tuple[F.Column, F.Column]:
    """(``tag`` rows the batch emits, those of them that are split keys); 'O': final
    partials, 'P': tentative ones (DPC)."""
    out = F.col("tag") == tag
    if spec.emit is not None:
        out = out & F.expr(spec.emit)
    split = F.col("key").isin(list(spec.split_keys)) if spec.split_keys else F.lit(False)
    return out, out & split


def collect(res: DataFrame, spec: BatchSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The statistics rows and the split keys' partials ('O', and 'P' while DPC emits
    tentative windows), brought to the driver in one job."""
    _, split = emitted(spec)
    if spec.tentative is not None:
        split = split | emitted(spec, "P")[1]
    return _stats_and_partials(res.where(F.col("tag").isin("T", "K", "H") | split).toPandas())


def _stats_and_partials(got: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows brought to the driver: (statistics rows, split keys' partials)."""
    partial = got["tag"].isin(["O", "P"])
    return got[~partial], got[partial]


def collect_and_write(
    res: DataFrame, spec: BatchSpec, q: QuerySpec, outputs: dict[str, Path]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """``collect`` and ``write_output`` in one job: each partition writes the final values of
    its whole keys (tag -> directory in ``outputs``: 'O' the output, 'P' DPC's tentative
    rows) as ``part-<pid>.parquet`` and returns its statistics rows and split keys' partials;
    the driver then adds the merged split keys. Round-robin (every key split) needs a second
    shuffle and keeps the two jobs. Returns (statistics rows, split partials, rows per tag).

    A directory is emptied first, so a replayed batch overwrites its first attempt; a task
    writes a temporary file and renames it, so a retried task replaces its own file whole.
    """
    if spec.every_key_split or not outputs:
        stats, split = collect(res, spec)
        rows = {t: write_output(res, split, d, spec, q, tag=t) for t, d in outputs.items()}
        return stats, split, rows
    split_any = F.lit(False)
    flags = []
    for tag, d in outputs.items():
        out, out_split = emitted(spec, tag)
        split_any = split_any | out_split
        flags.append((f"_w{tag}", str(d), out & ~out_split))
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    flagged = res.select("*", *[c.alias(name) for name, _, c in flags])
    wanted = F.col("tag").isin("T", "K", "H") | split_any
    for name, _, _ in flags:
        wanted = wanted | F.col(name)
    dirs = [(name, d) for name, d, _ in flags]

    def write_partition(it: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = list(it)
        rows = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(columns=[*FOLD_COLUMNS, *(n for n, _ in dirs)])
        )
        ctx = TaskContext.get()
        pid, attempt = ctx.partitionId(), ctx.attemptNumber()  # type: ignore[union-attr]
        written = np.zeros(len(rows), dtype=bool)
        for name, d in dirs:
            mine = rows[name].astype(bool).to_numpy()
            written |= mine
            if mine.any():
                _write_part(merge_partials(rows[mine], q), Path(d), pid, attempt)
        yield rows.loc[~written, FOLD_COLUMNS]

    got = flagged.where(wanted).mapInPandas(write_partition, FOLD_DDL).toPandas()
    stats, split = _stats_and_partials(got)
    return stats, split, {tag: _add_split_keys(split, tag, d, q) for tag, d in outputs.items()}


def _write_part(out: pd.DataFrame, d: Path, pid: int, attempt: int) -> None:
    """One partition's final values as ``part-<pid>.parquet`` (temporary file, then rename)."""
    tmp = d / f".part-{pid:05d}.{attempt}.tmp"
    pq.write_table(_output_table(out), tmp)
    os.replace(tmp, d / f"part-{pid:05d}.parquet")


def _output_table(out: pd.DataFrame) -> pa.Table:
    cols = out[["key", "window_start", "value"]]
    return pa.Table.from_pandas(
        cols.astype({"key": "int64", "window_start": "float64", "value": "float64"}),
        preserve_index=False,
    )


def _add_split_keys(split: pd.DataFrame, tag: str, path: Path, q: QuerySpec) -> int:
    """The driver's file of the split keys' merged ``tag`` partials (if any); returns the
    directory's rows."""
    split = split[split["tag"] == tag] if len(split) else split
    if len(split):
        charge_merge(q, len(split))
        tmp = path / ".split-keys.parquet.tmp"
        pq.write_table(_output_table(merge_partials(split, q)), tmp)
        tmp.rename(path / "part-split-keys.parquet")
    return int(sum(pq.ParquetFile(p).metadata.num_rows for p in path.glob("*.parquet")))


def output_frame(partials: DataFrame, spec: BatchSpec, q: QuerySpec) -> DataFrame:
    """Final window values of the keys that are not split, from their 'O' partials.

    A key that is not split had its window computed whole in one partition, so its partial is
    final where it is: no second shuffle. Under round-robin every key is split and the
    partials are merged by a hash repartition on the key.
    """
    every_key_split = spec.every_key_split

    def merge(it: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = list(it)
        o = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=FOLD_COLUMNS)
        if every_key_split:
            charge_merge(q, len(o))
        yield merge_partials(o, q)

    if every_key_split:
        return partials.repartition(spec.partitions, "key").mapInPandas(merge, OUTPUT_DDL)
    return partials.mapInPandas(merge, OUTPUT_DDL)


def write_output(
    res: DataFrame,
    split: pd.DataFrame,
    path: Path,
    spec: BatchSpec,
    q: QuerySpec,
    tag: str = "O",
) -> int:
    """Write the batch's final values (``tag`` 'O'; 'P': its tentative ones) to ``path``
    (overwritten on replay): the cluster writes the whole keys, the driver adds the merged
    split keys as one file. Returns the rows."""
    out, out_split = emitted(spec, tag)
    output_frame(res.where(out & ~out_split), spec, q).write.mode("overwrite").parquet(str(path))
    return _add_split_keys(split, tag, path, q)


def _by(index: pd.Series, values: pd.Series, size: int, dtype: type) -> np.ndarray:
    """``values`` summed into ``size`` bins by ``index``."""
    out = np.zeros(size, dtype=dtype)
    np.add.at(out, index.astype(int).to_numpy(), values.astype(dtype).to_numpy())
    return out


def batch_stats(
    s: pd.DataFrame,
    spec: BatchSpec,
    q: QuerySpec,
    span: tuple[tuple[int, int], float],
    duration_s: float,
    state_rows: int,
    rows_out: int,
    split_partials: int,
) -> BatchStats:
    """The batch's statistics from its partitions' T (load), K (key-group) and H (key) rows.

    ``span``: the event-id range and last event time of the files the batch read;
    ``split_partials``: the split keys' partials merged on the driver.
    """
    t, k, h = (s[s["tag"] == tag] for tag in ("T", "K", "H"))
    keys = (
        h.groupby(["key", "side"], as_index=False)["rows"]
        .sum()
        .astype({"key": "int64", "side": "int64", "rows": "int64"})
    )
    inv = {v: name for name, v in q.sides.items()}
    per_stream = {inv[int(sd)]: int(r) for sd, r in keys.groupby("side")["rows"].sum().items()}
    # partials merged across partitions (round-robin: every partial its partitions emitted)
    merged = int(t["partials"].fillna(0).sum()) if spec.every_key_split else split_partials
    return BatchStats(
        batch_id=spec.batch_id,
        plan_version=spec.plan_version,
        replay=spec.replay,
        duration_s=duration_s,
        rows=_by(t["pid"], t["rows"], spec.slots, np.int64),
        busy_s=_by(t["pid"], t["busy_s"], spec.slots, float),
        kg_rows=_by(k["kg"], k["rows"], q.key_groups, np.int64),
        key_rows=keys,
        stream_rows=per_stream,
        state_rows=state_rows,
        state_moved=int(t["moved"].sum()),
        late=int(t["late"].sum()),
        rows_out=rows_out,
        event_range=span[0],
        max_ts=span[1],
        info={"partials_merged": merged, "stream_keep": stream_keep(spec)},
    )


def stream_keep(spec: BatchSpec) -> dict[str, float]:
    """The fraction of each stream's rows the batch's drops kept in expectation (streams it
    shed only): its tuple keep, or with window drops the window's (the smallest). The
    controller divides the rows it counts by it: the offered rate, not the kept one.

    >>> from types import SimpleNamespace as S
    >>> stream_keep(S(keep=(("a", 0.5), ("b", 1.0)), window_keep=None))
    {'a': 0.5}
    >>> stream_keep(S(keep=(("a", 0.5), ("b", 1.0)), window_keep="..."))
    {'a': 0.5, 'b': 0.5}
    """
    keep = dict(spec.keep)
    if spec.window_keep is not None and keep:
        low = min(keep.values())
        keep = dict.fromkeys(keep, low)
    return {s: float(k) for s, k in keep.items() if k < 1.0}


def rows_span(s: pd.DataFrame) -> tuple[int, int]:
    """The event-id range the partitions saw (when the batch's files are not known)."""
    t = s[s["tag"] == "T"]
    lo, hi = t.loc[t["ev_lo"] >= 0, "ev_lo"], t.loc[t["ev_hi"] >= 0, "ev_hi"]
    return (int(lo.min()), int(hi.max())) if len(lo) else (-1, -1)
