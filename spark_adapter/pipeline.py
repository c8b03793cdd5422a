"""The plan-driven foreachBatch runtime.

For micro-batch b:

1. resolve the plan pinned for b in the plan log (a replay reuses the first attempt's plan and
   watermarks);
2. shed: keep a row when ``u(event_id, b) < keep[stream]`` (a stable hash, never ``rand()``);
3. apply the stateless filters, compute the key group ``pmod(xxhash64(key, 0), G)`` and the
   partition: the placement's key-group table, or, for the plan's split hot keys, a quota
   chosen by a hash of the event id; state rows of batch b - 1 get their partition from the
   same plan, so a moved key group takes its state along;
4. ``repartitionById(n, pid)`` the union of input and state, and run the keyed stage per
   partition with ``mapInPandas`` (``operators.update_partition``);
5. merge the partials of split keys (hash-partitioned by key, deterministic order); keys that
   are not split are final in their one partition and are written without a second shuffle;
6. write the batch's output to ``output/batch=<b>`` with overwrite (idempotent), record the
   commit and keep the new state cached; every ``truncate_every`` batches its lineage is cut
   with a reliable checkpoint.

Per-partition load, key-group and key counts come back as data rows of the same job.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel, TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.plans import Plan
from ha.passive_standby import CheckpointCadence
from ha.upstream_backup import UpstreamBackup
from shedding.drops import drop_seed
from shedding.window_drops import (
    WINDOW_BATCH,
    block_size,
    floor_keep_mask,
    floor_steps,
    window_floor,
    window_uniform,
)
from spark_adapter.actuator import PlanLog, PlanStore
from spark_adapter.batchstats import BatchStats, write_batch_stats
from spark_adapter.operators import (
    ROW_COLUMNS,
    ROW_DDL,
    QuerySpec,
    charge_merge,
    merge_partials,
    reference_output,
    update_partition,
)
from spark_adapter.source import INPUT_SCHEMA_DDL, InputLog

__all__ = ["SparkPipeline"]

ROUTE_SEED = 77
OUTPUT_DDL = "key LONG, window_start DOUBLE, value DOUBLE"


def _uniform(col: str, seed: int) -> Column:
    """``shiftrightunsigned(xxhash64(col, seed), 11) / 2^53``: the same uniform as ``shedding.drops``."""
    return F.shiftrightunsigned(F.xxhash64(F.col(col), F.lit(seed).cast("long")), 11).cast(
        "double"
    ) / float(1 << 53)


def live_executor_count(spark: SparkSession) -> Callable[[], int]:
    """Executors registered with the driver now (block managers other than the driver's).

    In ``local[N]`` the driver runs the tasks itself and cannot lose an executor: unbounded.
    """
    sc = spark.sparkContext

    def count() -> int:
        if sc.master.startswith("local") and not sc.master.startswith("local-cluster"):
            return 1 << 30
        return max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)

    return count


def _first_quota(quotas: tuple[tuple[int, float], ...]) -> int:
    """The partition a row with uniform 0 picks: the first quota with a positive share."""
    return next((int(p) for p, f in quotas if f > 0), int(quotas[-1][0]))


def _uniform_sql(col: str, seed: int) -> str:
    """The same uniform as ``_uniform``, as a SQL expression."""
    return (
        f"(CAST(shiftrightunsigned(xxhash64({col}, CAST({int(seed)} AS BIGINT)), 11) AS DOUBLE)"
        f" / {float(1 << 53)!r}D)"
    )


class SparkPipeline:
    """Runs a compiled keyed stage over an input log, steered by a plan store."""

    def __init__(
        self,
        spark: SparkSession,
        query: QuerySpec,
        workdir: str | Path,
        partitions: int,
        truncate_every: int = 10,
        on_batch: Callable[[BatchStats], None] | None = None,
    ) -> None:
        self.spark = spark
        self.q = query
        self.dir = Path(workdir)
        self.n = partitions
        self.input = InputLog(self.dir / "input")
        self.plans = PlanStore(self.dir / "plans")
        self.log = PlanLog(self.dir / "planlog.sqlite")
        self.output_dir = self.dir / "output"
        self.metrics_dir = self.dir / "metrics"
        self.metrics_dir.mkdir(parents=True, exist_ok=True)
        self.truncate_every = truncate_every
        self.on_batch = on_batch
        self.fault_hook: Callable[[int, str], None] | None = None
        self.fence: Callable[[], bool] | None = None  # True while this driver may commit
        self.snapshot_every = 0  # passive standby: a Parquet state snapshot every k batches
        # or, when set, k from Young/Daly on the measured snapshot cost (ha.passive_standby)
        self.cadence: CheckpointCadence | None = None
        self.retention = "none"  # input-log trimming: "none" (keep all), "upstream" or "passive"
        # active standby: every cached state block on two executors, so losing one executor
        # loses no state and nothing is recomputed from lineage
        self.replicate_state = False
        # shed whole windows (shedding.window_drops) instead of single tuples: the output is
        # then a subset of the exact answer
        self.window_drops = False
        self._keep_by_version: dict[int, float] = {}
        self._floor_memo: tuple[tuple[int, float, float], Any] | None = None
        self.backup = UpstreamBackup()
        self.trim_log: list[
            tuple[int, int, int]
        ] = []  # (batch, trimmed below segment, replay from)
        self.stats: dict[int, BatchStats] = {}
        self.states: dict[int, DataFrame] = {}  # state after batch b (cached), for replays of b + 1
        self.max_ts = -math.inf
        self._segs: list[tuple[int, int, float, int]] = []  # first id, last id, last ts, segment
        spark.sparkContext.setCheckpointDir(str(self.dir / "rdd-checkpoints"))
        self._empty = spark.createDataFrame([], ROW_DDL)
        self.live_executors = live_executor_count(spark)

    # ------------------------------------------------------------------ routing
    def _pid(self, plan: Plan, u_sql: str, state: bool = False) -> Column:
        """Partition of a row from its key group (``kg`` column) and key, under ``plan``.

        Routing ``shuffle`` spreads every row round-robin-like (a hash of the event id) and
        leaves state partials where they are: every key is split and merged downstream.
        Otherwise the key group's partition comes from the placement table, and a split hot
        key picks the quota whose cumulative share first exceeds the row's uniform ``u_sql``.
        The expression is built as one SQL string: one parse instead of a py4j call per
        literal, which matters when many keys are hot.
        """
        if self._every_key_split(plan):
            if state:
                return F.col("pid").cast("int")
            return F.expr(
                f"CAST(pmod(xxhash64(event_id, CAST({ROUTE_SEED} AS BIGINT)), {self.n}) AS INT)"
            )
        cold = f"element_at(array({', '.join(str(int(p)) for p in self.table(plan))}), kg + 1)"
        hot = plan.routing.hot
        if not hot:
            return F.expr(f"CAST({cold} AS INT)")
        keys = ", ".join(f"CAST({int(k)} AS BIGINT)" for k in sorted(hot))
        if state:  # a split key's state waits at its first quota: no per-row choice needed
            first = ", ".join(
                f"CAST({int(k)} AS BIGINT), {_first_quota(q)}" for k, q in sorted(hot.items())
            )
            return F.expr(
                f"CAST(CASE WHEN key IN ({keys}) THEN element_at(map({first}), key) ELSE {cold} END AS INT)"
            )
        entries = []
        for key, quotas in sorted(hot.items()):
            cum, arr = 0.0, []
            for i, (pid, frac) in enumerate(quotas):
                cum += frac
                hi = 2.0 if i == len(quotas) - 1 else cum  # the last quota takes the rest
                arr.append(f"named_struct('hi', CAST({float(hi)!r} AS DOUBLE), 'pid', {int(pid)})")
            entries.append(f"CAST({int(key)} AS BIGINT), array({', '.join(arr)})")
        choices = f"element_at(map({', '.join(entries)}), key)"
        pick = f"element_at(filter({choices}, x -> x.hi > {u_sql}), 1).pid"
        # the IN set (a hash set) keeps cold rows away from the map scan and the lambda
        return F.expr(f"CAST(CASE WHEN key IN ({keys}) THEN {pick} ELSE {cold} END AS INT)")

    def table(self, plan: Plan) -> list[int]:
        """Key group -> partition, from the placement of the keyed operator's units."""
        ids = plan.placement.units
        table = []
        for kg in range(self.q.key_groups):
            uid = self.q.op_id if self.q.key_groups == 1 else f"{self.q.op_id}#{kg}"
            if uid not in ids:
                raise ValueError(
                    f"placement: unit {uid!r} missing from plan version {plan.version}"
                )
            table.append(plan.placement.assignment[ids.index(uid)] % self.n)
        return table

    def window_keep(self, plan: Plan) -> float:
        """A window's keep fraction under ``plan``: the smallest of its input streams'."""
        return min(float(plan.shed.keep_of(s)) for s in self.q.sides)

    def _version_keep(self, version: int) -> float:
        """``window_keep`` of a published plan version (cached: versions are immutable)."""
        if version not in self._keep_by_version:
            self._keep_by_version[version] = self.window_keep(self.plans.load(version))
        return self._keep_by_version[version]

    def floor_steps_at(
        self,
        batch_id: int,
        wm_prev: float,
        keep_now: float,
        pins: list[tuple[int, int, float, float]] | None = None,
    ) -> tuple[list[tuple[float, float]], float]:
        """``floor_j`` in batch ``batch_id`` as steps over the window start (``floor_steps``).

        Built from the pinned watermarks and plans of the earlier batches (``pins``: the plan
        log's rows, read when not given); only steps that windows still open in this batch
        (closing now or later) can reach are kept. The same steps drive the early drops and the
        emit condition of a batch, and their Python mirror. Pins never change, so the last
        answer is reused when a batch asks twice.
        """
        key = (batch_id, wm_prev, keep_now)
        if pins is None and self._floor_memo is not None and self._floor_memo[0] == key:
            return self._floor_memo[1]
        hist = [r for r in (self.log.pin_rows() if pins is None else pins) if r[0] <= batch_id]
        lo = (
            -math.inf
            if wm_prev == -math.inf
            else (math.floor((wm_prev - self.q.size_s) / self.q.slide_s + 1e-9) + 1)
            * self.q.slide_s
        )  # the earliest start of a window still open in this batch
        # earlier batches whose next watermark stayed below lo fed no window still open
        first = next((i for i in range(len(hist) - 1) if hist[i + 1][3] >= lo), len(hist) - 1)
        next_wm = [hist[i + 1][3] for i in range(first, len(hist) - 1)]
        keeps = [self._version_keep(hist[i][1]) for i in range(first, len(hist) - 1)]
        th, val, default = floor_steps(next_wm, keeps, keep_now)
        steps = [
            (float(t), float(v))
            for i, (t, v) in enumerate(zip(th, val, strict=True))
            if math.isfinite(t) and not (i + 1 < len(val) and val[i + 1] == v)
        ]
        self._floor_memo = (key, (steps, default))
        return steps, default

    @staticmethod
    def _floor_sql(steps: list[tuple[float, float]], default: float, start: str) -> str:
        if not steps:
            return f"{default!r}D"
        cases = " ".join(f"WHEN {start} <= {t!r}D THEN {v!r}D" for t, v in steps)
        return f"CASE {cases} ELSE {default!r}D END"

    def window_tuple_condition(self, plan: Plan, batch_id: int, wm_prev: float) -> Column:
        """Window-aware drops: keep a row (by its ``pane``) iff one of its windows can still be
        emitted: ``u(j) < floor_j`` so far (``shedding.window_drops.floor_keep_mask``)."""
        steps, default = self.floor_steps_at(batch_id, wm_prev, self.window_keep(plan))
        w = self.q.panes_per_window
        blk = block_size(w)
        slide = float(self.q.slide_s)
        u = _uniform_sql("bk", drop_seed(WINDOW_BATCH))
        lo = f"CAST(floor((pane - {w - 1}) / {blk}) AS BIGINT)"
        hi = f"CAST(floor(pane / {blk}) AS BIGINT)"
        start = f"(CAST(least(pane, (bk + 1) * {blk} - 1) AS DOUBLE) * {slide!r}D)"
        floor = self._floor_sql(steps, default, start)
        return F.expr(f"exists(sequence({lo}, {hi}), bk -> {u} < {floor})")

    def window_emit_condition(self, plan: Plan, batch_id: int, wm_prev: float) -> Column:
        """Window-aware drops: emit window j only if ``u(j) < floor_j`` (``shedding.window_drops``)."""
        steps, default = self.floor_steps_at(batch_id, wm_prev, self.window_keep(plan))
        start = f"(CAST(pane AS DOUBLE) * {float(self.q.slide_s)!r}D)"
        blk = block_size(self.q.panes_per_window)
        u = _uniform_sql(f"CAST(floor(pane / {blk}) AS BIGINT)", drop_seed(WINDOW_BATCH))
        return F.expr(f"{u} < {self._floor_sql(steps, default, start)}")

    def keep_condition(self, plan: Plan, batch_id: int) -> Column:
        """Deterministic shedding: keep when the row's uniform is below its stream's keep."""
        cond = F.lit(True)
        for stream in self.q.sides:
            keep = plan.shed.keep_of(stream)
            if keep < 1.0:
                u = _uniform("event_id", drop_seed(batch_id))
                cond = cond & ((F.col("stream") != stream) | (u < F.lit(float(keep))))
        return cond

    def routed_input(
        self, df: DataFrame, plan: Plan, batch_id: int, wm_prev: float = -math.inf
    ) -> DataFrame:
        """Input rows of batch b, shed, filtered, tagged 'I', with their key group and partition."""
        side = F.create_map(*[x for s, i in self.q.sides.items() for x in (F.lit(s), F.lit(i))])
        filt = F.lit(False)
        for s in self.q.sides:
            filt = filt | ((F.col("stream") == s) & F.expr(self.q.predicate_sql(s)))
        if not self.window_drops:
            df = df.where(self.keep_condition(plan, batch_id))
        rows = df.where(filt)
        rows = rows.select(
            F.lit("I").alias("tag"),
            F.col("key"),
            F.pmod(F.xxhash64(F.col("key"), F.lit(0).cast("long")), F.lit(self.q.key_groups))
            .cast("int")
            .alias("kg"),
            F.element_at(side, F.col("stream")).cast("int").alias("side"),
            F.floor(F.col("ts") / F.lit(self.q.slide_s)).cast("long").alias("pane"),
            F.lit(1.0).alias("cnt"),
            F.col("v").alias("sum"),
            F.col("v").alias("mn"),
            F.col("v").alias("mx"),
            F.col("event_id"),
        )
        if self.window_drops and self.window_keep(plan) < 1.0:
            rows = rows.where(self.window_tuple_condition(plan, batch_id, wm_prev))
        rows = rows.withColumn("pid", self._pid(plan, _uniform_sql("event_id", ROUTE_SEED)))
        return rows.select(
            *ROW_COLUMNS[:9],
            "pid",
            F.col("pid").alias("prev_pid"),
            F.col("event_id").alias("rows"),
            F.lit(None).cast("double").alias("busy_s"),
        )

    def rerouted_state(self, state: DataFrame, plan: Plan) -> DataFrame:
        """State rows with their partition under ``plan`` (split hot keys: the first quota)."""
        return state.select(
            F.lit("S").alias("tag"),
            *ROW_COLUMNS[1:9],
            self._pid(plan, "0.0D", state=True).alias("pid"),
            F.col("pid").alias("prev_pid"),
            "rows",
            "busy_s",
        )

    # -------------------------------------------------------------------- batch
    def process(self, df: DataFrame, batch_id: int, refold: bool = False) -> BatchStats:
        """The foreachBatch function (also called directly by tests and replays).

        ``refold`` rebuilds the state of an already committed batch (after a driver restart)
        without writing output or committing again.
        """
        t0 = time.perf_counter()
        started_at = time.time()
        marks = [("start", t0)]
        plan, pin = self.log.resolve(batch_id, self.plans, self.max_ts)
        if self.fault_hook is not None and not refold:
            self.fault_hook(batch_id, "start")
        prev = self.states.get(
            batch_id - 1, self._empty if batch_id == 0 or not self.states else None
        )
        if prev is None:
            prev = self.states[max(k for k in self.states if k < batch_id)]
        q, n = self.q, self.n
        costs = {
            side: max(self.q.cost_us[s] for s in self.q.sides if self.q.sides[s] == side)
            for side in set(self.q.sides.values())
        }
        wm_prev, wm = pin.watermark_prev, pin.watermark

        def fold(it: Any) -> Any:
            frames = list(it)
            pid = TaskContext.get().partitionId()  # type: ignore[union-attr]
            rows = (
                pd.concat(frames, ignore_index=True)
                if frames
                else pd.DataFrame(columns=ROW_COLUMNS)
            )
            res = update_partition(rows, q, pid, wm_prev, wm, costs)
            # T row carries the event id range of this partition's input (key=min, pane=max)
            ins = rows.loc[rows["tag"] == "I", "rows"]
            t = res["tag"] == "T"
            res.loc[t, "key"] = int(ins.min()) if len(ins) else -1
            res.loc[t, "pane"] = int(ins.max()) if len(ins) else -1
            yield res

        merged = self.routed_input(df, plan, batch_id, wm_prev).unionByName(
            self.rerouted_state(prev, plan)
        )
        res = (
            merged.repartitionById(n, "pid")
            .mapInPandas(fold, ROW_DDL)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        level = (
            StorageLevel.MEMORY_AND_DISK_2 if self.replicate_state else StorageLevel.MEMORY_AND_DISK
        )
        state = res.where(F.col("tag") == "S").persist(level)
        marks.append(("plan", time.perf_counter()))
        state_rows = state.count()
        marks.append(("fold", time.perf_counter()))
        checkpointed = bool(self.truncate_every and (batch_id + 1) % self.truncate_every == 0)
        if checkpointed:
            state = state.checkpoint(eager=True)  # reliable: cuts lineage, survives executor loss
        marks.append(("checkpoint", time.perf_counter()))
        split_keys = self._split_keys(plan)
        is_split = F.col("key").isin(split_keys) if split_keys else F.lit(False)
        out_ok = (
            self.window_emit_condition(plan, batch_id, wm_prev)
            if self.window_drops
            else F.lit(True)
        )
        is_out = (F.col("tag") == "O") & out_ok
        wanted = F.col("tag").isin("T", "K", "H") | (is_out & is_split)
        collected = res.where(wanted).toPandas()  # statistics + the split keys' partials
        marks.append(("stats", time.perf_counter()))
        split = collected[collected["tag"] == "O"]
        stats = collected[collected["tag"] != "O"]
        if refold:
            rows_out = 0
        else:
            self._check_fence(batch_id)
            whole = res.where(is_out & ~is_split)
            rows_out = self._write_output(whole, batch_id, plan, split)
            marks.append(("output", time.perf_counter()))
            if self.fault_hook is not None:
                self.fault_hook(batch_id, "output_written")
            self._check_fence(batch_id)
        res.unpersist()
        old = self.states.pop(batch_id - 2, None)
        if old is not None:
            old.unpersist()
        self.states[batch_id] = state
        st = self._stats(
            stats,
            batch_id,
            plan.version,
            pin.replay,
            time.perf_counter() - t0,
            state_rows,
            rows_out,
            self._input_span(df, batch_id),
        )
        if not refold:
            self.log.commit(
                batch_id,
                rows_out,
                {
                    "event_range": st.event_range,
                    "plan_version": plan.version,
                    "keep": {s: plan.shed.keep_of(s) for s in q.sides},
                },
            )
            if self.cadence is not None:
                due = self.cadence.batch_done(st.duration_s)
            else:
                due = bool(self.snapshot_every and (batch_id + 1) % self.snapshot_every == 0)
            if due:
                t_snap = time.perf_counter()
                self.snapshot(batch_id, state)
                if self.cadence is not None:
                    k = self.cadence.checkpointed(time.perf_counter() - t_snap)
                    st.info["snapshot_every"] = k  # the Young/Daly interval from now on
            self._retain(batch_id, st.event_range, checkpointed)
        marks.append(("commit", time.perf_counter()))
        # partials merged across partitions (round-robin: every partial its partitions emitted)
        st.info["partials_merged"] = (
            int(stats.loc[stats["tag"] == "T", "mx"].fillna(0).sum())
            if self._every_key_split(plan)
            else len(split)
        )
        st.info["started_at"] = started_at  # wall clock: lateness against the trigger
        st.info["phases"] = {
            name: round(t - marks[i][1], 4) for i, (name, t) in enumerate(marks[1:])
        }  # seconds per phase of the batch: where a slow batch spent its time
        if st.max_ts > self.max_ts:
            self.max_ts = st.max_ts
        if refold:
            return st
        self.stats[batch_id] = st  # a replayed batch replaces its first attempt: no double counting
        write_batch_stats(st, self.metrics_dir)
        if self.on_batch is not None:
            self.on_batch(st)
        return st

    # ------------------------------------------------------------ availability
    def _check_fence(self, batch_id: int) -> None:
        """A driver that lost its lease must not write or commit (fencing)."""
        if self.fence is not None and not self.fence():
            raise RuntimeError(
                f"fenced: this driver no longer holds the lease; batch {batch_id} not committed"
            )

    def segments_of(self, event_range: tuple[int, int]) -> list[int]:
        """Input segments holding the event-id range of a batch."""
        if event_range[0] < 0:
            return []
        if not self._segs:
            self._index_ts()
        return [
            seg
            for first, last, _, seg in self._segs
            if last >= event_range[0] and first <= event_range[1]
        ]

    def _retain(self, batch_id: int, event_range: tuple[int, int], checkpointed: bool) -> None:
        """Upstream backup: trim the input log only below what a recovery could need."""
        segs = self.segments_of(event_range)
        if not segs:
            return
        for sg in segs:
            if not self.backup.retained or sg > self.backup.retained[-1]:
                self.backup.append(sg)
        # the live state's lineage reaches back to the last durable state checkpoint
        durable = checkpointed if self.retention == "upstream" else False
        if durable:
            self.backup.checkpoint(segs[-1], segs[-1] + 1)
        first_dep = (
            self.backup.ckpt_depends_from
            if self.backup.checkpointed >= 0
            else self.backup.trimmed_below
        )
        self.backup.ack(segs[-1], first_dep)
        if self.retention != "none":
            tp = self.backup.trim_point()
            gone = self.backup.trim()
            if gone:
                self.input.trim(tp)
            self.trim_log.append((batch_id, self.backup.trimmed_below, self.backup.replay_from()))

    def snapshot(self, batch_id: int, state: DataFrame) -> str:
        """Passive standby: write the state after ``batch_id`` as Parquet and record it."""
        path = self.dir / "state" / f"batch={batch_id}"
        state.write.mode("overwrite").parquet(str(path))
        self.log.record_snapshot(batch_id, str(path))
        segs = self.segments_of(self.stats[batch_id].event_range) if batch_id in self.stats else []
        if self.retention == "passive" and segs:
            self.backup.checkpoint(segs[-1], segs[-1] + 1)
        return str(path)

    def restore(self) -> int:
        """Bring the state up to the last committed batch: load the newest snapshot (when it is
        newer than what this driver has) and refold the committed batches after it.

        Incremental: a warm standby calls it repeatedly while it waits, so at takeover only the
        batches committed since its last call are refolded. Returns the last committed batch.
        """
        self._index_ts()
        committed = self.log.committed()
        if not committed:
            return -1
        last = committed[-1]
        have = max(self.states) if self.states else -1
        snap = self.log.latest_snapshot(at_most=last)
        if snap is not None and snap[0] > have:
            for df in self.states.values():
                df.unpersist()
            self.states = {
                snap[0]: self.spark.read.schema(ROW_DDL)
                .parquet(snap[1])
                .persist(StorageLevel.MEMORY_AND_DISK)
            }
            have = snap[0]
        import json as _json

        rows = {
            b: _json.loads(i or "{}")
            for b, i in self.log._db.execute("SELECT batch_id, info FROM commits")
        }
        ranges = {b: tuple(rows.get(b, {}).get("event_range", (-1, -1))) for b in range(last + 1)}
        self.max_ts = -math.inf
        for b in range(have + 1):
            if ranges[b][0] >= 0:
                _, mx = self._segment_span(int(ranges[b][0]), int(ranges[b][1]))
                self.max_ts = max(self.max_ts, mx)
        for b in range(have + 1, last + 1):
            segs = self.segments_of((int(ranges[b][0]), int(ranges[b][1])))
            df = (
                self.spark.read.schema(INPUT_SCHEMA_DDL).parquet(
                    *[str(self.input.path(i)) for i in segs]
                )
                if segs
                else self.spark.createDataFrame([], INPUT_SCHEMA_DDL)
            )
            st = self.process(df, b, refold=True)
            self.max_ts = max(self.max_ts, st.max_ts)
        return last

    @staticmethod
    def _every_key_split(plan: Plan) -> bool:
        """Round-robin (``shuffle``) routing: every key's partials sit in every partition."""
        return plan.routing.partitioner == "shuffle"

    def _split_keys(self, plan: Plan) -> list[int]:
        """Keys whose partials sit in several partitions and are merged on the driver."""
        if self._every_key_split(plan):
            return []  # every key is split: merged on the cluster instead
        return sorted(int(k) for k in plan.routing.hot)

    def output_frame(self, partials: DataFrame, plan: Plan) -> DataFrame:
        """Final window values of the keys that are not split, from their 'O' partials.

        A key that is not split had its window computed whole in the one partition holding
        it, so its partial is final where it is: no second shuffle. Under ``shuffle`` routing
        every key is split and the partials are merged by a hash repartition on the key. (Split
        hot keys of other routings are few; their partials travel to the driver with the
        batch's statistics and are merged there, see ``_write_output``.)
        """
        q = self.q

        every_key_split = self._every_key_split(plan)

        def merge(it: Any) -> Any:
            frames = list(it)
            o = (
                pd.concat(frames, ignore_index=True)
                if frames
                else pd.DataFrame(columns=ROW_COLUMNS)
            )
            if every_key_split:
                charge_merge(q, len(o))
            yield merge_partials(o, q)

        if every_key_split:
            return partials.repartition(self.n, "key").mapInPandas(merge, OUTPUT_DDL)
        return partials.mapInPandas(merge, OUTPUT_DDL)

    def _write_output(
        self, partials: DataFrame, batch_id: int, plan: Plan, split: pd.DataFrame
    ) -> int:
        """Write the batch's final values to ``output/batch=<b>`` (overwritten on replay): the
        cluster writes the whole keys, the driver adds the merged split keys as one file."""
        out = self.output_frame(partials, plan)
        path = self.output_dir / f"batch={batch_id}"
        out.write.mode("overwrite").parquet(str(path))
        if len(split):
            charge_merge(self.q, len(split))
            merged = merge_partials(split, self.q)
            table = pa.Table.from_pandas(
                merged[["key", "window_start", "value"]].astype(
                    {"key": "int64", "window_start": "float64", "value": "float64"}
                ),
                preserve_index=False,
            )
            tmp = path / ".split-keys.parquet.tmp"
            pq.write_table(table, tmp)
            tmp.rename(path / "part-split-keys.parquet")
        return int(
            sum(pq.ParquetFile(p).metadata.num_rows for p in path.glob("*.parquet"))
        )  # metadata only

    def _stats(
        self,
        s: pd.DataFrame,
        batch_id: int,
        version: int,
        replay: bool,
        dur: float,
        state_rows: int,
        rows_out: int,
        input_span: tuple[tuple[int, int], float] | None = None,
    ) -> BatchStats:
        t = s[s["tag"] == "T"]
        rows = np.zeros(self.n, dtype=np.int64)
        busy = np.zeros(self.n)
        np.add.at(rows, t["pid"].astype(int).to_numpy(), t["rows"].astype("int64").to_numpy())
        np.add.at(busy, t["pid"].astype(int).to_numpy(), t["busy_s"].astype(float).to_numpy())
        k = s[s["tag"] == "K"]
        kg = np.zeros(self.q.key_groups, dtype=np.int64)
        np.add.at(kg, k["kg"].astype(int).to_numpy(), k["rows"].astype("int64").to_numpy())
        h = s[s["tag"] == "H"]
        keys = (
            h.groupby(["key", "side"], as_index=False)["rows"]
            .sum()
            .astype({"key": "int64", "side": "int64", "rows": "int64"})
        )
        inv = {v: k for k, v in self.q.sides.items()}
        per_stream = {inv[int(sd)]: int(r) for sd, r in keys.groupby("side")["rows"].sum().items()}
        lo = t.loc[t["key"] >= 0, "key"]
        hi = t.loc[t["pane"] >= 0, "pane"]
        ev, max_ts = (
            self._segment_span(int(lo.min()), int(hi.max())) if len(lo) else ((-1, -1), -math.inf)
        )
        if input_span is not None:  # the batch's files: right even when every row was shed
            ev, max_ts = input_span
        return BatchStats(
            batch_id=batch_id,
            plan_version=version,
            replay=replay,
            duration_s=dur,
            rows=rows,
            busy_s=busy,
            kg_rows=kg,
            key_rows=keys,
            stream_rows=per_stream,
            state_rows=state_rows,
            state_moved=int(t["sum"].sum()),
            late=int(t["mn"].sum()),
            rows_out=rows_out,
            event_range=ev,
            max_ts=max_ts,
            info={"live_executors": self.live_executors()},
        )

    def _input_span(
        self, df: DataFrame, batch_id: int | None = None
    ) -> tuple[tuple[int, int], float] | None:
        """Event-id range and last event time of the segment files batch ``batch_id`` reads.

        A static DataFrame names its files (``inputFiles``); a streaming micro-batch does not,
        so its files come from the file source's own log in the query checkpoint (written
        before the batch runs, and the same when the batch is replayed). None when neither
        knows (then the rows that reached the keyed stage give the range).
        """
        try:
            files = set(df.inputFiles())
        except Exception:  # not a file relation
            files = set()
        if not files and batch_id is not None:
            files = self._source_log_files(batch_id)
        names = {Path(urlparse(f).path).name for f in files}
        if not names:
            return None
        segs = [sg for sg in self._segs if self.input.path(sg[3]).name in names]
        if len(segs) < len(names):
            self._index_ts()
            segs = [sg for sg in self._segs if self.input.path(sg[3]).name in names]
        if not segs:
            return None
        return (min(sg[0] for sg in segs), max(sg[1] for sg in segs)), max(sg[2] for sg in segs)

    def _source_log_files(self, batch_id: int) -> set[str]:
        """The files of ``batch_id`` in the file source's log (``checkpoint/sources/0``).

        One JSON line per file after a version line, in the batch's own file or, after
        compaction, in the first ``N.compact`` file with N >= the batch.
        """
        root = self.dir / "checkpoint" / "sources" / "0"
        path = root / str(batch_id)
        if not path.exists():
            compact = sorted(
                (int(f.name.split(".")[0]), f)
                for f in root.glob("*.compact")
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

    def _segment_span(self, lo: int, hi: int) -> tuple[tuple[int, int], float]:
        """The exact event-id range and last event time of the segments holding ids lo..hi."""
        if lo < 0 or not self._segs:
            return (-1, -1), -math.inf
        firsts = np.array([s[0] for s in self._segs])
        a = int(np.searchsorted(firsts, lo, side="right") - 1)
        b = int(np.searchsorted(firsts, hi, side="right") - 1)
        return (self._segs[a][0], self._segs[b][1]), max(s[2] for s in self._segs[a : b + 1])

    # ---------------------------------------------------------------- running
    def stream(self, max_files: int = 1) -> DataFrame:
        """The streaming input DataFrame over the input log."""
        return (
            self.spark.readStream.schema(INPUT_SCHEMA_DDL)
            .option("maxFilesPerTrigger", max_files)
            .parquet(str(self.input.root))
        )

    def _writer(self, max_files: int, name: str | None) -> Any:
        w = (
            self.stream(max_files)
            .writeStream.foreachBatch(lambda df, b: self.process(df, b))
            .option("checkpointLocation", str(self.dir / "checkpoint"))
        )
        return w.queryName(name) if name else w

    @staticmethod
    def _finished(query: Any) -> None:
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")

    def run_available(self, max_files: int = 1, name: str | None = None) -> int:
        """Process every segment present now (availableNow), one segment per batch."""
        self._index_ts()
        query = self._writer(max_files, name).trigger(availableNow=True).start()
        query.awaitTermination()
        self._finished(query)
        return len(self.stats)

    def run_stream(
        self,
        trigger_s: float,
        stop: threading.Event | None = None,
        max_files: int = 8,
        name: str | None = None,
    ) -> bool:
        """Follow the input log live: a micro-batch every ``trigger_s`` seconds.

        Spark's processing-time trigger starts a batch at each multiple of ``trigger_s`` when
        new segments are there, at most ``max_files`` per batch; a batch that overruns its
        interval is followed at once by the next. With one file per batch a backlog (after a
        slow start or a fault) would never drain while batches fit the interval, so the
        default lets a batch take several. Runs until the log is closed (``InputLog.close``)
        or ``stop`` is set, then processes what is in the log and stops. Returns True when the
        stream ended (the log was closed): only then may ``flush`` close the open windows.
        """
        if trigger_s <= 0:
            raise ValueError(f"trigger_s must be positive, got {trigger_s}")
        self._index_ts()
        query = self._writer(max_files, name).trigger(processingTime=f"{trigger_s} seconds")
        query = query.start()
        stop = stop or threading.Event()
        try:
            while not stop.wait(min(0.5, trigger_s / 2)):
                if self.input.closed or not query.isActive:
                    break
            if query.isActive:
                query.processAllAvailable()
        finally:
            query.stop()
        self._finished(query)
        return self.input.closed

    def _index_ts(self) -> None:
        """Each segment's (first event id, last event id, last event time, index), for spans.

        Segments already indexed keep their entry even after they are trimmed from disk.
        """
        known = {sg[3] for sg in self._segs}
        segs = list(self._segs)
        for i in self.input.segments():
            if i in known:
                continue
            tbl = pd.read_parquet(self.input.path(i), columns=["event_id", "ts"])
            if len(tbl):
                segs.append(
                    (
                        int(tbl["event_id"].min()),
                        int(tbl["event_id"].max()),
                        float(tbl["ts"].max()),
                        i,
                    )
                )
        self._segs = sorted(segs)

    def flush(self) -> BatchStats:
        """Close every remaining window: an empty batch with an infinite watermark."""
        committed = self.log.committed()
        last = max(max(self.stats, default=-1), max(committed, default=-1))
        b = last + 1  # after a restore the stats are empty: continue after the last commit
        saved = self.max_ts
        self.max_ts = math.inf
        empty = self.spark.createDataFrame([], INPUT_SCHEMA_DDL)
        try:
            return self.process(empty, b)
        finally:
            self.max_ts = saved

    # ---------------------------------------------------------------- results
    def output(self) -> pd.DataFrame:
        """All committed output, one frame (key, window_start, value), sorted."""
        frames = []
        for b in self.log.committed():
            p = self.output_dir / f"batch={b}"
            if p.exists():
                frames += [pd.read_parquet(f) for f in sorted(p.glob("*.parquet"))]
        if not frames:
            return pd.DataFrame(
                {
                    "key": pd.Series(dtype="int64"),
                    "window_start": pd.Series(dtype="float64"),
                    "value": pd.Series(dtype="float64"),
                }
            )
        return pd.concat(frames, ignore_index=True).sort_values(
            ["key", "window_start"], ignore_index=True
        )

    def pinned_keep(self, events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per input row: kept by its batch's pinned drops (True outside every batch), and
        covered by a processed batch."""
        from shedding.drops import keep_mask

        keep = np.ones(len(events), dtype=bool)
        covered = np.zeros(len(events), dtype=bool)
        ids = events["event_id"].to_numpy()
        panes = np.floor(events["ts"].to_numpy() / self.q.slide_s).astype(np.int64)
        w = self.q.panes_per_window
        pins = self.log.pin_rows()
        wm_prev = {r[0]: r[2] for r in pins}
        for b, st in self.stats.items():
            lo, hi = st.event_range
            if lo < 0:
                continue
            plan = self.plans.load(self.log.pin_of(b) or 0)
            sel = (ids >= lo) & (ids <= hi)
            covered |= sel
            if self.window_drops:
                steps, default = self.floor_steps_at(b, wm_prev[b], self.window_keep(plan), pins)
                keep[sel] = floor_keep_mask(
                    panes[sel],
                    w,
                    self.q.slide_s,
                    block_size(w),
                    [t for t, _ in steps],
                    [v for _, v in steps],
                    default,
                )
                continue
            for stream in self.q.sides:
                k = plan.shed.keep_of(stream)
                if k < 1.0:
                    rows = sel & (events["stream"] == stream).to_numpy()
                    keep[rows] = keep_mask(ids[rows], b, k)
        return keep, covered

    def reference(self, events: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int]:
        """Expected output from the input (default: the input log) with each batch's pinned
        drops, and the drop count."""
        events = self.input.read() if events is None else events
        keep, _ = self.pinned_keep(events)
        out = reference_output(events, self.q, pd.Series(keep))
        if self.window_drops:
            out = out[self._windows_emitted(out["window_start"].to_numpy())].reset_index(drop=True)
        return out, int((~keep).sum())

    def _windows_emitted(self, starts: np.ndarray) -> np.ndarray:
        """Window-aware drops: which windows (by start) the pinned batches emitted."""
        pins = self.log.pin_rows()
        wm = np.array([p[3] for p in pins])
        keeps = np.array([self._version_keep(p[1]) for p in pins])
        j = np.round(starts / self.q.slide_s).astype(np.int64)
        with np.errstate(invalid="ignore"):
            j_hi = np.where(
                np.isinf(wm) & (wm > 0),
                np.iinfo(np.int64).max,
                np.floor(
                    (np.where(np.isfinite(wm), wm, -1e300) - self.q.size_s) / self.q.slide_s + 1e-9
                ),
            )
        closes = np.searchsorted(np.maximum.accumulate(j_hi), j, side="left")  # first e: j <= j_hi
        ok = np.zeros(starts.size, dtype=bool)
        for e in np.unique(closes):
            sel = closes == e
            if e >= len(pins):
                continue  # never closed: never emitted
            floor = window_floor(starts[sel], wm[1 : e + 1], keeps[:e], float(keeps[e]))
            ok[sel] = window_uniform(j[sel], block_size(self.q.panes_per_window)) < floor
        return ok

    def cleanup(self) -> None:
        """Unpersist cached state and close the plan log."""
        for df in self.states.values():
            df.unpersist()
        self.states.clear()
        self.log.close()

    def reset_outputs(self) -> None:
        """Remove outputs and checkpoints (a fresh run over the same input log)."""
        for d in ("output", "checkpoint", "rdd-checkpoints"):
            shutil.rmtree(self.dir / d, ignore_errors=True)
