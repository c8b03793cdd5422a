"""The plan-driven foreachBatch runtime: a micro-batch is compiled, then executed.

For micro-batch b, ``SparkPipeline.process`` runs named steps:

1. **pin**: the plan and watermarks pinned for b in the plan log (a replay reuses its first
   attempt's), compiled into a frozen ``BatchSpec`` (``batch_compiler``);
2. **shed and route**: deterministic drops, filters, maps, key group, pane and partition of
   the input; the state of b - 1 re-routed by the same plan, so a moved key group takes its
   state along (``batch_executor.shed_and_route``);
3. **fold**: ``repartitionById(n, pid)`` and the keyed stage per partition; the new state is
   cached (on two executors under the active policy) and every ``truncate_every`` batches its
   lineage is cut with a reliable checkpoint;
4. **collect and write**, one job, fenced by the lease: each partition writes its whole keys'
   final values to ``output/batch=<b>`` (emptied first: idempotent) and returns its
   statistics rows and split keys' partials; the driver adds the merged split keys;
5. **commit**: the plan log's commit, a state snapshot when due (``recovery``), input-log
   retention; ``metrics/batch-<b>.json`` for an external controller. Recovery
   (``recovery.restore``) refolds committed batches through the same steps without writing;
   ``verification`` recomputes the output from the input log with the same pinned drops.

Before step 1 a batch is checked to read the input log in segment order (``input_order``);
the log is restamped into index order before the query starts and after each batch.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.plans import Plan
from ha.passive_standby import CheckpointCadence
from spark_adapter import batch_executor as steps
from spark_adapter import verification
from spark_adapter.actuator import BatchPin, PlanLog, PlanStore, retire_plans
from spark_adapter.batch_compiler import BatchSpec, compile_batch, drop_floors, window_keep
from spark_adapter.batchstats import BatchStats, retire_batch_stats, write_batch_stats
from spark_adapter.dpc import Coverage, arrivals, dpc_info
from spark_adapter.executor_pool import ExecutorPool, live_executor_count
from spark_adapter.input_order import InputOutOfOrder, ReadOrder, segment_indices
from spark_adapter.interrupt import Interrupted, StopRequest, sigint_asks, stop_if_asked
from spark_adapter.operators import ROW_COLUMNS, ROW_DDL
from spark_adapter.options import PipelineOptions
from spark_adapter.plan_fit import PlanGuard, PlanRefused
from spark_adapter.query import QuerySpec
from spark_adapter.recovery import Retention, SegmentIndex, restore, snapshot_state
from spark_adapter.session import jvm_log_level
from spark_adapter.source import INPUT_SCHEMA_DDL, SEGMENT_ID_BITS, InputLog

__all__ = ["PipelineOptions", "SparkPipeline"]

QUERY_LOGGER = "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"


class SparkPipeline:
    """Runs a compiled keyed stage over an input log, steered by a plan store.

    Hooks (callables, settable after construction): ``on_batch(stats)`` after each committed
    batch, ``fence()`` True while this driver may write and commit, ``fault_hook(batch, point)``
    for failure injection at ``start`` and ``output_written``.
    """

    def __init__(
        self,
        spark: SparkSession,
        query: QuerySpec,
        workdir: str | Path,
        options: PipelineOptions,
        on_batch: Callable[[BatchStats], None] | None = None,
    ) -> None:
        self.spark, self.q, self.opts = spark, query, options
        self.n = options.partitions
        self.dir = Path(workdir)
        self.input = InputLog(self.dir / "input")
        self.plans = PlanStore(self.dir / "plans")
        self.log = PlanLog(self.dir / "planlog.sqlite")
        self.output_dir = self.dir / "output"
        self.metrics_dir = self.dir / "metrics"
        self.metrics_dir.mkdir(parents=True, exist_ok=True)
        self.on_batch = on_batch
        self.fault_hook: Callable[[int, str], None] | None = None
        self.fence: Callable[[], bool] | None = None
        self.cadence = (
            CheckpointCadence(
                options.snapshot_mtbf_s,
                k=max(1, options.snapshot_every),
                hi=options.snapshot_max_every,
            )
            if options.snapshot_mtbf_s is not None
            else None
        )
        self.index = SegmentIndex(self.input, self.dir / "checkpoint" / "sources" / "0")
        self.retention = Retention(options.retention, self.input, self.index)
        self.order = ReadOrder(self.log, self.input.root)
        self.stats: dict[int, BatchStats] = {}
        self.restamped: list[int] = []  # segments the last start put back in order
        self.guard = PlanGuard(self.q, self.n, self.plans, self.log)  # a plan that fits
        self.stopped: InputOutOfOrder | PlanRefused | None = None  # what stopped the query
        self._muted: str | None = None  # the query logger's level while it is muted
        self.interrupt = StopRequest()  # a batch run's Ctrl-C, carried out between batches
        self.states: dict[int, DataFrame] = {}  # state after batch b (cached), for replays of b + 1
        self.max_ts = -math.inf
        self.dpc = Coverage(options.dpc_mode, options.dpc_max_delay_s)  # per-stream watermarks
        spark.sparkContext.setCheckpointDir(str(self.dir / "rdd-checkpoints"))
        self.live_executors = live_executor_count(spark)
        self.pool = (
            ExecutorPool(spark, options.warm_executors) if options.follow_executors else None
        )

    # ------------------------------------------------------------------ compile
    def version_keep(self, version: int) -> float:
        """The window keep of a published plan version."""
        return window_keep(self.plans.load(version), self.q)

    def compile(self, plan: Plan, pin: BatchPin) -> BatchSpec:
        """The batch spec of ``pin`` (window drops: floors from the plan log's pins)."""
        if not self.opts.window_drops:
            return compile_batch(plan, pin, self.q, self.n, None)
        keep, pins = window_keep(plan, self.q), self.log.pin_rows()
        args = (pin.batch_id, pin.watermark_prev, keep, pins, self.version_keep, self.q)
        return compile_batch(plan, pin, self.q, self.n, drop_floors(*args))

    def _prev_state(self, batch_id: int) -> DataFrame:
        """The state after batch b - 1 (or the newest before it, after a restore)."""
        if batch_id - 1 in self.states:
            return self.states[batch_id - 1]
        older = [k for k in self.states if k < batch_id]
        if batch_id == 0 or not older:
            return self.spark.createDataFrame([], ROW_DDL)
        return self.states[max(older)]

    # -------------------------------------------------------------------- batch
    def process(self, df: DataFrame, batch_id: int, refold: bool = False) -> BatchStats:
        """The foreachBatch function (also called directly by tests and replays); ``refold``
        rebuilds the state of a committed batch (after a driver restart), writing nothing."""
        t0, started_at = time.perf_counter(), time.time()
        marks = [("start", t0)]
        files = steps.input_files(df) or self.index.source_log_files(batch_id)
        if not refold:  # before anything is pinned or written
            self.order.check(batch_id, segment_indices(files))
        wms = self.dpc.watermarks(self.max_ts)
        plan, pin = self.log.resolve(batch_id, self.plans, *wms, choose=self.guard.choose)
        if self.fault_hook is not None and not refold:
            self.fault_hook(batch_id, "start")
        spec = self.compile(plan, pin)
        executors = self.pool.follow(spec.nodes, batch_id) if self.pool and not refold else {}
        res = steps.fold(
            steps.shed_and_route(df, self._prev_state(batch_id), spec), spec, spec.query
        )
        marks.append(("plan", time.perf_counter()))
        state, state_rows, folded_at, checkpointed = self._keep_state(res, batch_id)
        marks += [("fold", folded_at), ("checkpoint", time.perf_counter())]
        stats, split, rows_out, tent_rows = self._write(res, spec, refold)
        marks.append(("output", time.perf_counter()))
        res.unpersist()
        self._retire_states(batch_id, state)
        span = self.index.files_span(files, batch_id) or self.index.span(*steps.rows_span(stats))
        st = steps.batch_stats(
            stats,
            spec,
            spec.query,
            span,
            time.perf_counter() - t0,
            state_rows,
            rows_out,
            int((split["tag"] == "O").sum()) if len(split) else 0,
        )
        st.info["live_executors"] = self.live_executors()
        if self.pool is not None:  # a scale-out's executor may still be starting
            st.info["starting_executors"] = self.pool.starting(st.info["live_executors"])
        st.info["running_partitions"], st.info["nodes"] = spec.partitions, spec.nodes
        segs = self.index.covering(st.event_range)
        self.dpc.add_segments(segs)
        st.info |= dpc_info(spec, self.dir, refold, tent_rows) | arrivals(segs, self.input.path)
        if executors:
            st.info["executors"] = executors
        st.info |= self.guard.info(pin)  # a plan its pin passed over
        if not refold:
            self._commit(st, plan, state, checkpointed)
        marks.append(("commit", time.perf_counter()))
        st.info["started_at"] = started_at  # wall clock: lateness against the trigger
        st.info["phases"] = {n: round(t - marks[i][1], 4) for i, (n, t) in enumerate(marks[1:])}
        self.max_ts = max(self.max_ts, st.max_ts)
        if not refold:
            self.stats[batch_id] = st  # a replayed batch replaces its first attempt
            if self.opts.stats_keep and len(self.stats) > self.opts.stats_keep:
                del self.stats[next(iter(self.stats))]  # the oldest batch
            write_batch_stats(st, self.metrics_dir)
            retire_batch_stats(self.metrics_dir, batch_id, self.opts.metrics_keep)
            if self.on_batch is not None:
                self.on_batch(st)
        return st

    def _keep_state(self, res: DataFrame, batch_id: int) -> tuple[DataFrame, int, float, bool]:
        """Cache the new state (counting it runs the fold); cut its lineage when due.

        Returns the state, its rows, when the fold ended and whether the lineage was cut.
        """
        level = (
            StorageLevel.MEMORY_AND_DISK_2
            if self.opts.replicate_state
            else StorageLevel.MEMORY_AND_DISK
        )
        state = res.where(F.col("tag") == "S").select(*ROW_COLUMNS).persist(level)
        rows = state.count()
        folded = time.perf_counter()
        every = self.opts.truncate_every
        checkpointed = bool(every and (batch_id + 1) % every == 0)
        if checkpointed:
            cached = state
            state = state.checkpoint(eager=True)  # reliable: cuts lineage, survives executor loss
            cached.unpersist()  # the checkpoint is what later batches read
        return state, rows, folded, checkpointed

    def _retire_states(self, batch_id: int, state: DataFrame) -> None:
        old = self.states.pop(batch_id - 2, None)
        if old is not None:
            old.unpersist()
        self.states[batch_id] = state

    def _write(
        self, res: DataFrame, spec: BatchSpec, refold: bool = False
    ) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
        """Collect the statistics and write the batch's output (and DPC's tentative rows) in
        one job, fenced before and after; returns the statistics rows, the split keys'
        partials and the rows of each output (``refold``: collect only, write nothing)."""
        if refold:
            return (*steps.collect(res, spec), 0, 0)
        self._check_fence(spec.batch_id)
        outputs = {"O": self.output_dir / f"batch={spec.batch_id}"}
        if spec.tentative is not None:  # DPC: windows the tentative watermark closes
            outputs["P"] = self.dir / "tentative" / f"batch={spec.batch_id}"
        stats, split, rows = steps.collect_and_write(res, spec, spec.query, outputs)
        if self.fault_hook is not None:
            self.fault_hook(spec.batch_id, "output_written")
        self._check_fence(spec.batch_id)
        return stats, split, rows["O"], rows.get("P", 0)

    def _commit(self, st: BatchStats, plan: Plan, state: DataFrame, checkpointed: bool) -> None:
        """Commit the batch, snapshot the state when due, trim the input log."""
        b = st.batch_id
        keep = {s: self.q.keep_of(plan.shed, s) for s in self.q.sides}
        info = {
            "event_range": st.event_range,
            "max_ts": st.max_ts,  # the watermark a restore needs, even once the input is trimmed
            "plan_version": plan.version,
            "keep": keep,
        }
        if self.dpc.streams:
            info["dpc"] = self.dpc.state()  # what a restored driver's watermarks start from
        self.log.commit(b, st.rows_out, info)
        now = time.time()
        st.info |= self.input.arrival_to_commit(st.event_range, now) | {"committed_at": now}
        if self.cadence is not None:
            due = self.cadence.batch_done(st.duration_s)
        else:
            due = bool(self.opts.snapshot_every and (b + 1) % self.opts.snapshot_every == 0)
        if due:
            t_snap = time.perf_counter()
            snapshot_state(state, self.dir, b, self.log)
            self.retention.snapshot_taken(st.event_range)
            if self.cadence is not None:
                k = self.cadence.checkpointed(time.perf_counter() - t_snap)
                st.info["snapshot_every"] = k  # the Young/Daly interval from now on
            if self.opts.retire_plans:
                retire_plans(self.log, self.plans)
        self.retention.batch_done(b, st.event_range, checkpointed)
        self.order.committed(b, st.event_range)
        if st.event_range[1] >= 0:  # segments copied in since the last listing, after b's
            self.input.restamp(start=st.event_range[1] >> SEGMENT_ID_BITS)

    def _check_fence(self, batch_id: int) -> None:
        """A driver that lost its lease must not write or commit (fencing)."""
        if self.fence is not None and not self.fence():
            raise RuntimeError(
                f"fenced: this driver no longer holds the lease; batch {batch_id} not committed"
            )

    # ------------------------------------------------------------ availability
    def restore(self) -> int:
        """Bring the state up to the last committed batch (``recovery.restore``)."""
        return restore(self)

    @property
    def trim_log(self) -> list[tuple[int, int, int]]:
        """(batch, trimmed below segment, replay from) after each batch under retention."""
        return self.retention.trim_log

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
            .writeStream.foreachBatch(self._foreach_batch)
            .option("checkpointLocation", str(self.dir / "checkpoint"))
        )
        return w.queryName(name) if name else w

    def _foreach_batch(self, df: DataFrame, batch_id: int) -> None:
        try:
            self.process(df, batch_id)
        except (InputOutOfOrder, PlanRefused) as e:  # Spark wraps it in its trace: keep it
            self.stopped = e
            self._muted = jvm_log_level(self.spark, QUERY_LOGGER, "OFF")  # that trace
            raise
        self.interrupt.after_batch()

    def _prepare(self) -> None:
        """Before the query starts: the log in index order by time, and indexed."""
        self.restamped = self.input.restamp()
        self.stopped = None
        self.index.refresh()

    @contextlib.contextmanager
    def _query_errors(self) -> Iterator[None]:
        """An input out of order or a refused plan stops the query as itself, not in
        Spark's trace."""
        try:
            yield
        except Exception:
            if self.stopped is None:
                raise
        finally:
            if self._muted is not None:
                jvm_log_level(self.spark, QUERY_LOGGER, self._muted)
                self._muted = None
        if self.stopped is not None:
            raise self.stopped from None

    @staticmethod
    def _finished(query: Any) -> None:
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")

    def run_available(self, max_files: int = 1, name: str | None = None) -> int:
        """Process every segment present now (availableNow), one segment per batch."""
        self._prepare()
        stop_if_asked("interrupted before the first batch ran")  # a Ctrl-C held until now
        query = self._writer(max_files, name).trigger(availableNow=True).start()
        self.interrupt = StopRequest(query)
        with self._query_errors(), sigint_asks(self.interrupt):
            query.awaitTermination()
        if self.interrupt.stopped:
            last = max(self.stats, default=None)
            raise Interrupted(f"interrupted: the run stopped once batch {last} had committed")
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
        self._prepare()
        query = self._writer(max_files, name).trigger(processingTime=f"{trigger_s} seconds")
        query = query.start()
        stop = stop or threading.Event()
        with self._query_errors():
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
        return verification.committed_output(self.output_dir, self.log.committed())

    def pinned(self) -> verification.PinnedRun:
        """What this pipeline's processed batches pinned, for verification."""
        ranges = {b: st.event_range for b, st in self.stats.items()}
        pins = self.log.pin_rows()
        return verification.PinnedRun(self.q, pins, self.plans, ranges, self.opts.window_drops)

    def pinned_keep(self, events: pd.DataFrame) -> tuple[Any, Any]:
        """Per input row: kept by its batch's pinned drops, and covered by a processed batch."""
        return verification.pinned_keep(events, self.pinned())

    def reference(self, events: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int]:
        """Expected output from the input (default: the input log) with each batch's pinned
        drops, and the drop count."""
        events = self.input.read() if events is None else events
        return verification.reference(events, self.pinned())

    def cleanup(self) -> None:
        """Unpersist cached state and close the plan log."""
        for df in self.states.values():
            df.unpersist()
        self.states.clear()
        self.log.close()

    def reset_outputs(self) -> None:
        """Remove outputs and checkpoints (a fresh run over the same input log)."""
        for d in ("output", "tentative", "checkpoint", "rdd-checkpoints"):
            shutil.rmtree(self.dir / d, ignore_errors=True)
