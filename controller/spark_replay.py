"""Scenario replay on Spark: input log, plan-driven pipeline, controller embedded in the driver.

The scenario's workload is written to an input log (``batches`` segments, rates x ``scale`` to
fit this machine); a streaming query processes one segment per micro-batch; every
``interval_batches`` batches the controller observes the batches' statistics, decides and
publishes a plan, which the next batch pins. At the end the remaining windows are flushed and
the sink is compared with the reference computed from the same input and the same drops.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from controller.calibration import RUN_FILE, CalibrationOverlay
from controller.loop import ControlLoop
from controller.migration_causes import by_cause
from controller.replay import ReplayResult, pairwise_moves
from controller.routing import RoutingPolicy
from controller.scenario import ScenarioFile
from controller.spark_summary import SparkRun, run_summary
from controller.wiring import make_policy, spark_context, with_shedding
from simulator import SimResult
from spark_adapter.interrupt import Interrupted, asked, holding_sigint
from spark_adapter.verification import output_mismatch

__all__ = [
    "ROUND_BATCHES",
    "SparkRun",
    "close_run",
    "global_step_batch",
    "replay_spark",
    "spark_session",
]
ROUND_BATCHES = 2  # a control round after every this many batches


def global_step_batch(window_k: int, interval_batches: int = ROUND_BATCHES) -> int:
    """The first batch (0-based id) of a Spark replay that can run a correlation method's
    global step: every batch is a load sample, a round follows every ``interval_batches``
    batches, the step runs in the first round whose window holds ``window_k`` samples, and
    the plan it publishes is pinned by the next batch. Before it, the method runs its initial
    plan (LLF's).

    >>> global_step_batch(20), global_step_batch(3), global_step_batch(4, 1)
    (20, 4, 4)
    """
    return -(-window_k // interval_batches) * interval_batches


@holding_sigint  # a Ctrl-C is carried out once Spark is up, or between batches
def replay_spark(
    scenario: ScenarioFile,
    master: str = "local[2]",
    batches: int = 10,
    placement: str | None = None,
    partitioner: str | None = None,
    shedding: str | None = None,
    partitions: int = 2,
    scale: float = 0.1,
    interval_batches: int = ROUND_BATCHES,
    workdir: str | Path | None = None,
    spark: Any = None,
    warmup_batches: int = 1,
    input_dir: str | Path | None = None,
    keep_workdir: bool = True,
    progress: Callable[[int, int], None] | None = None,
    calibration: CalibrationOverlay | None = None,
) -> ReplayResult:
    """Replay ``scenario`` on Spark with the controller in the loop; summary with replay keys.

    The first ``warmup_batches`` batches are left out of the timing statistics (the first
    pays the executors' Python start; a benchmark of steady state also waits for its windows
    to fill); they still count in rows and correctness. A temporary working directory (no
    ``workdir`` given) is removed at the end unless ``keep_workdir``; ``progress(done, total)``
    is called after every batch; a ``calibration`` calibrates the controller's load model.
    """
    if warmup_batches < 0:
        raise ValueError(f"warmup_batches: must be >= 0, got {warmup_batches}")
    from spark_adapter.faults import monitor_report, publish_app, watching

    scenario = with_shedding(scenario, shedding)
    ctl = scenario.controller
    method, part = placement or ctl.placement.method, partitioner or ctl.partitioner
    run = SparkRun(method, part, master, partitions, warmup_batches, calibration)
    own = spark is None
    spark = spark_session(spark, scenario, master, partitions)
    work = Path(workdir or tempfile.mkdtemp(prefix="trimtab-spark-"))
    pipe, sub, loop = _steered_pipeline(spark, scenario, run, work, scale, interval_batches)
    ha = scenario.controller.ha  # a stopped or dead executor is fenced within its timeouts
    try:
        rows_in = _fill_input(pipe, scenario, batches, scale, input_dir)
        _report_progress(pipe, progress)
        publish_app(spark, work, master)
        _record_run(work, scenario, run, scale)
        with watching(spark, ha.heartbeat_timeout_s, ha.failure_timeout_s) as monitor:
            summary, series = _run(pipe, sub, scenario, run, rows_in)
        summary |= monitor_report(monitor)
        summary["migrations_by_cause"] = by_cause(loop.records)
        summary["pairwise_moves"] = pairwise_moves(loop.records, method)
    except Exception as e:  # after a stop signal the JVM got too (sent to the process group)
        if asked() and not isinstance(e, Interrupted):
            raise Interrupted("interrupted: Spark stopped with the signal, under the run") from e
        raise
    finally:
        close_run(
            pipe, spark if own else None, work if workdir is None and not keep_workdir else None
        )
    summary["workdir"] = str(work) if workdir is not None or keep_workdir else None
    return ReplayResult(summary=summary, series=series, decisions=loop.records)


def _fill_input(
    pipe: Any, scenario: ScenarioFile, batches: int, scale: float, input_dir: str | Path | None
) -> int:
    """The pipeline's input log: the scenario's workload generated for ``batches`` (a silent
    input held back, then its backlog), or the events imported into ``input_dir``."""
    if input_dir is None:
        silence = scenario.input_outages()
        return pipe.input.generate(scenario, batches, scale=scale, silence=silence)
    return _copy_input(Path(input_dir), pipe, set(pipe.q.streams))


def close_run(pipe: Any, spark: Any, temporary: Path | None) -> None:
    """The pipeline's cleanup (a ``pipe`` given), then ``spark`` stopped (a session the run
    started) and the ``temporary`` working directory removed, whatever the cleanup raised. A
    cleanup that fails after a stop signal (Spark's JVM gone with it) is not reported over the
    interruption."""
    try:
        if pipe is not None:
            pipe.cleanup()
        if spark is not None:
            spark.stop()
    except Exception:
        if not asked():
            raise
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _record_run(work: Path, scenario: ScenarioFile, run: SparkRun, scale: float) -> None:
    """``run.json``: what ran, for ``trimtab calibrate`` (the scenario as data, the scale)."""
    doc = {
        "scenario": scenario.model_dump(mode="json"),
        "base_dir": scenario.base_dir,
        "scale": scale,
        "partitions": run.partitions,
        "placement": run.placement,
        "partitioner": run.partitioner,
        "master": run.master,
    }
    (work / RUN_FILE).write_text(json.dumps(doc, indent=1))


def _report_progress(pipe: Any, progress: Callable[[int, int], None] | None) -> None:
    """Call ``progress(done, total)`` after each batch, around the controller's hook."""
    if progress is None:
        return
    total = len(pipe.input.segments())
    inner = pipe.on_batch

    def hook(st: Any) -> None:
        inner(st)
        progress(min(st.batch_id + 1, total), total)

    pipe.on_batch = hook


def spark_session(spark: Any, scenario: ScenarioFile, master: str, partitions: int) -> Any:
    """The given session (checked against the scenario's executor speeds) or a new one."""
    from spark_adapter.session import SLOWDOWN_KEY, make_session, slowdown_conf

    slow = slowdown_conf(scenario.spark.slowdowns())
    if spark is not None:
        have = spark.sparkContext.getConf().get(SLOWDOWN_KEY, "")
        if have != slow.get(SLOWDOWN_KEY, ""):
            raise ValueError(
                f"spark.executor_speeds: the session was started with {SLOWDOWN_KEY}={have!r}, "
                f"the scenario needs {slow.get(SLOWDOWN_KEY, '')!r}"
            )
        return spark
    return make_session(
        master,
        f"trimtab-{scenario.name}",
        {"spark.sql.shuffle.partitions": str(partitions), **slow},
    )


def _copy_input(src: Path, pipe: Any, streams: set[str]) -> int:
    """Link (or copy) an imported input log's segments into the run's log; rows copied.

    ``src`` is a workdir holding ``input/`` (``trimtab input import``) or the log itself. A
    log out of order in time is copied, not linked: the run restamps its own files, never the
    user's (a hard link shares them).
    """
    from spark_adapter.source import InputLog

    root = src / "input" if (src / "input").is_dir() else src
    log = InputLog(root)
    segs = log.segments()
    if not segs:
        raise ValueError(
            f"--input: {src} holds no input segments (trimtab input import writes them)"
        )
    names = set(log.read(segs[:1] + segs[-1:])["stream"].unique())
    unknown = sorted(names - streams)
    if unknown:
        raise ValueError(
            f"--input: stream {unknown[0]!r} is not a stream of the scenario's query "
            f"(streams: {', '.join(sorted(streams))})"
        )
    link = not log.restamp(apply=False)
    for i in segs:
        dst = pipe.input.path(i)
        if link:
            with contextlib.suppress(OSError):  # another file system: copied
                dst.hardlink_to(log.path(i))
                continue
        shutil.copyfile(log.path(i), dst)
    return len(pipe.input.read())


def _run(
    pipe: Any, sub: Any, scenario: ScenarioFile, run: SparkRun, rows_in: int
) -> tuple[dict[str, Any], SimResult]:
    """Process the log, close the windows, compare the sink with the reference, summarize.

    The reference reads the whole input first: an availability policy that retains input only
    as far as recovery needs it (upstream, passive, active) trims the log while the run goes."""
    events = pipe.input.read()
    t0 = time.perf_counter()
    pipe.run_available(name=None)
    pipe.flush()
    wall = time.perf_counter() - t0
    got = pipe.output()
    exp, dropped = pipe.reference(events)
    stats = [pipe.stats[b] for b in sorted(pipe.stats)]
    summary = {
        **run_summary(scenario, stats, pipe, sub, run),
        **_accounting(stats, pipe, events, rows_in, dropped),
        "output_matches_reference": output_mismatch(got, exp) is None,
        "wall_s": wall,
    }
    return summary, _series(stats, run.partitions)


def _steered_pipeline(
    spark: Any,
    scenario: ScenarioFile,
    run: SparkRun,
    work: Path,
    scale: float,
    interval_batches: int,
) -> tuple[Any, Any, ControlLoop]:
    """The pipeline with the controller embedded: every ``interval_batches`` batches a
    control round observes the batches and publishes a plan (fault requests served too)."""
    from spark_adapter.faults import serve_lose_requests
    from spark_adapter.pipeline import PipelineOptions, SparkPipeline
    from spark_adapter.query import compile_query
    from spark_adapter.substrate import SparkSubstrate

    q = compile_query(scenario, scenario.spark.partition_speeds)
    ctx = spark_context(scenario, q, run.partitions, scale, run.calibration)
    routing = RoutingPolicy(run.partitioner, q.op_id, q.key_groups, run.partitions)
    policy = make_policy(scenario, run.placement, ctx=ctx, routing=routing)
    ha = scenario.controller.ha
    opts = PipelineOptions.for_ha(
        run.partitions,
        ha.policy,
        ha.checkpoint_interval,
        window_drops=scenario.controller.shedding.window_drops,
        follow_executors=scenario.controller.scaling.enabled,
        warm_executors=scenario.controller.scaling.warm_up,
        dpc_mode=ha.dpc.mode,
        dpc_max_delay_s=ha.dpc.max_delay_s,
    )
    pipe = SparkPipeline(spark, q, work, opts)
    sub = SparkSubstrate(pipe, list(q.sides), scenario.tick_s)
    loop = ControlLoop(sub, policy, window_k=scenario.controller.window_k)
    loop.start()

    def after_batch(st: Any) -> None:
        serve_lose_requests(spark, work)
        if (st.batch_id + 1) % interval_batches == 0:
            loop.tick()

    pipe.on_batch = after_batch
    return pipe, sub, loop


def _accounting(
    stats: list[Any], pipe: Any, events: Any, rows_in: int, dropped: int
) -> dict[str, Any]:
    """Tuples in, processed, dropped, lost, duplicated, late and out."""
    processed = int(sum(int(s.rows.sum()) for s in stats))
    late = int(sum(s.late for s in stats))
    expected = _expected_processed(pipe, events)
    return {
        "rows_in": rows_in,
        "rows_processed": processed,
        "rows_dropped": dropped,
        "dropped_fraction": dropped / rows_in if rows_in else 0.0,
        "lost_tuples": max(0, expected - processed - late),
        "duplicate_tuples": max(0, processed + late - expected),
        "late_tuples": late,
        "rows_out": int(sum(s.rows_out for s in stats)),
        "state_rows_moved": int(sum(s.state_moved for s in stats)),
    }


def _expected_processed(pipe: Any, ev: Any) -> int:
    """Rows of the input ``ev`` that should reach the keyed stage: kept by the pinned drops and
    passing the pinned filters."""
    from spark_adapter.verification import pinned_filters

    keep, covered = pipe.pinned_keep(ev)
    return int((keep & covered & pinned_filters(ev, pipe.pinned())).sum())


def _series(stats: list[Any], n: int) -> SimResult:
    real = [s for s in stats if s.event_range[0] >= 0]
    idx = pd.Index([s.batch_id for s in real], name="batch")
    cols = [f"p{i}" for i in range(n)]
    load = pd.DataFrame([s.busy_s / max(s.duration_s, 1e-3) for s in real], index=idx, columns=cols)
    rows = pd.DataFrame([s.rows for s in real], index=idx, columns=cols)
    streams = pd.DataFrame(
        {
            "completed": [float(s.rows.sum()) for s in real],
            "latency_s": [s.duration_s for s in real],
            "state_rows": [s.state_rows for s in real],
            "state_moved": [s.state_moved for s in real],
            "rows_out": [s.rows_out for s in real],
            "plan_version": [s.plan_version for s in real],
        },
        index=idx,
    )
    totals = {"out": float(streams["completed"].sum()), "migrations": 0.0}
    return SimResult(
        node_load=load,
        node_util=load.clip(upper=1.0),
        backlog_s=rows,
        streams=streams,
        totals=totals,
        shed=None,
    )
