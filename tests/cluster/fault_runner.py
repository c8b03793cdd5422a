"""Runs one executor-fault scenario on a fresh local-cluster and prints a JSON result.

Invoked by test_failures.py in its own process (one SparkContext per process).
Usage: python -m tests.cluster.fault_runner MODE WORKDIR
MODE: none, kill, kill-active (replicated state: the active-standby mapping), lose (with the
controller in the loop, which must re-place the lost capacity's key groups), stop; a ``-live``
suffix (kill-live, kill-active-live) runs a live stream instead of a replay: a writer adds one
segment every LIVE_TRIGGER_S seconds and the query runs on that processing-time trigger, so a
batch's delay is measured against its trigger interval.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from controller.scenario import load_scenario
from controller.testing import alternating_plan
from spark_adapter.faults import (
    ExecutorMonitor,
    executor_pids,
    kill_executor,
    lose_executor,
    stop_executor,
)
from spark_adapter.pipeline import PipelineOptions, SparkPipeline
from spark_adapter.query import compile_query
from spark_adapter.session import make_session
from spark_adapter.source import InputLog
from spark_adapter.verification import output_mismatch

ROOT = Path(__file__).resolve().parents[2]
FAULT_BATCH = 2
LIVE_TRIGGER_S = 5.0
LIVE_SCALE = 0.08  # normal batches then take about 2 s here: the stream runs below capacity
LIVE_SEGMENTS = 14
LIVE_WARM_S = 21.0  # the fault hits the first batch starting this long after the writer began
LIVE_FIRST_FAULT_BATCH = 3  # and not before this batch: the start-up backlog (the executors'
# first Python workers) has drained and the stream is in its steady state
LIVE_LEAD_S = 1.5  # a segment lands this long before a trigger fires
ON_TIME_SLACK_S = 1.5  # a batch started on time: within this after its trigger (0.06-0.96 s seen)


def _reads(
    pipe: SparkPipeline, events: pd.DataFrame, tick_s: float, written: list[float]
) -> list[tuple[float, float, float]]:
    """Per live segment committed so far, in order: (its arrival, the start and the commit of
    the batch that read it)."""
    batches = sorted(
        (st.info["started_at"], st.duration_s, st.event_range[1])
        for st in pipe.stats.values()
        if st.event_range[1] >= 0
    )
    last_ids = events.groupby(np.floor(events["ts"] / tick_s))["event_id"].max().to_numpy()
    out = []
    for last, t_in in zip(last_ids, written, strict=False):
        first = next(((t, d) for t, d, hi in batches if hi >= last), None)
        if first is None:
            break
        out.append((t_in, first[0], first[0] + first[1]))
    return out


def _latencies(
    pipe: SparkPipeline, events: pd.DataFrame, tick_s: float, written: list[float]
) -> list[float]:
    """Per live segment: seconds from its arrival to the commit of the batch that read it
    (NaN while uncommitted)."""
    lat = [round(done - t_in, 3) for t_in, _, done in _reads(pipe, events, tick_s, written)]
    segments = min(events["ts"].floordiv(tick_s).nunique(), len(written))
    return lat + [float("nan")] * (segments - len(lat))


def _keeping_up(reads: list[tuple[float, float, float]]) -> bool:
    """The newest committed segment was read by the trigger it landed before: the start-up
    backlog has drained and the stream is in its steady state."""
    return bool(reads) and reads[-1][1] - reads[-1][0] <= LIVE_LEAD_S + ON_TIME_SLACK_S


def _recovered_after(
    lat: list[float], written: list[float], fault: list[float], bound: float
) -> float | None:
    """Seconds from the fault until the backlog it caused is gone: the commit of the last
    segment that queued, one slower than ``bound`` (a trigger interval plus a normal batch: a
    segment that waits behind no other batch is read by the next trigger and committed one
    batch later); 0 when none queued. None when the stream was not in its steady state at the
    fault (the last segment committed before it queued, or there was none): there is no
    steady state to recover."""
    if not fault or not lat:
        return None
    tf = fault[0]
    pairs = list(zip(lat, written, strict=False))
    before = sorted((w + x, x) for x, w in pairs if w + x < tf)
    if not before or before[-1][1] > bound:
        return None
    late = [w + x - tf for x, w in pairs if w + x > tf and not x <= bound]
    return round(max(late), 3) if late else 0.0


def main(mode: str, workdir: str) -> None:
    live = mode.endswith("-live")
    mode = mode.removesuffix("-live")
    active = mode.endswith("-active")
    mode = mode.removesuffix("-active")
    fault_batch = FAULT_BATCH
    sc = load_scenario(ROOT / "scenarios" / "zipf-hotkey-shift.yaml")
    q = compile_query(sc)
    spark = make_session(
        "local-cluster[2,1,1024]",
        f"trimtab-fault-{mode}",
        {
            "spark.executor.memory": "640m",
            "spark.sql.shuffle.partitions": "2",
            "spark.network.timeout": "30s",
            "spark.network.timeoutInterval": "10s",
            "spark.executor.heartbeatInterval": "2s",
            "spark.deploy.maxExecutorRetries": "10",
        },
    )
    app = spark.sparkContext.applicationId
    work = Path(workdir)
    opts = PipelineOptions(2, truncate_every=2, retention="upstream", replicate_state=active)
    pipe = SparkPipeline(spark, q, work, opts)
    if not live:
        pipe.input.generate(sc, 6, scale=0.15)
        events = pipe.input.read()  # the reference needs all input; the log itself gets trimmed
    else:  # segments are deterministic: the reference reads the same log, written elsewhere
        ref_log = InputLog(work / "reference-input")
        ref_log.generate(sc, LIVE_SEGMENTS, scale=LIVE_SCALE)
        events = ref_log.read()
    plan0 = alternating_plan(q)
    if mode != "lose":
        pipe.plans.publish(plan0)
    deadline = time.monotonic() + 60
    while len(executor_pids(app)) < 2 and time.monotonic() < deadline:
        spark.range(10).count()
        time.sleep(0.5)
    monitor = ExecutorMonitor(spark, suspect_s=2.0, fail_s=4.0) if mode == "stop" else None
    stop_mon = threading.Event()
    fault_at: list[float] = []
    fault_at_wall: list[float] = []

    errors: list[str] = []

    def watch() -> None:
        while not stop_mon.wait(0.5):
            if monitor is not None:
                try:
                    monitor.poll()
                except Exception as e:
                    errors.append(repr(e))

    def hook(batch_id: int, phase: str) -> None:
        nonlocal fault_batch
        if phase != "start" or fault_at:
            return
        if live:
            warm = written and time.time() >= written[0] + LIVE_WARM_S
            if not warm or batch_id < LIVE_FIRST_FAULT_BATCH:
                return
            if not _keeping_up(_reads(pipe, events, sc.tick_s, written)):
                return  # a slow start-up's backlog is still draining
            fault_batch = batch_id
        elif batch_id != fault_batch:
            return
        fault_at.append(time.monotonic())
        fault_at_wall.append(time.time())
        target = sorted(executor_pids(app))[0]
        if mode == "kill":
            threading.Timer(
                0.8, lambda: kill_executor(app, target)
            ).start()  # in the middle of the batch
        elif mode == "lose":
            threading.Timer(0.8, lambda: lose_executor(spark, target)).start()
        elif mode == "stop":
            threading.Timer(0.8, lambda: stop_executor(app, target, 20.0)).start()

    pipe.fault_hook = hook
    loop = None
    if mode == "lose":  # the controller in the loop: it must re-place the lost partition's groups
        from controller.loop import ControlLoop
        from controller.placements import PLACEMENTS
        from controller.policy import ControlPolicy
        from controller.wiring import spark_context
        from spark_adapter.substrate import SparkSubstrate

        ctx = spark_context(sc, q, 2, 0.15)
        policy = ControlPolicy(ctx, PLACEMENTS["least-loaded"]({}))
        loop = ControlLoop(SparkSubstrate(pipe, list(q.sides), sc.tick_s), policy, window_k=2)
        loop.start()
        pipe.on_batch = lambda st: loop.tick()
    if monitor is not None:
        threading.Thread(target=watch, daemon=True).start()
    written: list[float] = []
    if live:

        def writer() -> None:
            # Spark's processing-time trigger fires on multiples of the interval since the
            # epoch: each segment lands LIVE_LEAD_S before one, so a segment that waits behind
            # no batch is read at once, and its latency is the lead plus its batch
            grid = (time.time() // LIVE_TRIGGER_S + 1) * LIVE_TRIGGER_S
            for i in range(LIVE_SEGMENTS):
                due = grid + i * LIVE_TRIGGER_S - LIVE_LEAD_S
                time.sleep(max(0.0, due - time.time()))
                pipe.input.generate(sc, 1, scale=LIVE_SCALE, start=i)
                written.append(time.time())
            pipe.input.close()

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        pipe.run_stream(LIVE_TRIGGER_S, max_files=4)  # a backlog drains in bigger batches
        w.join()
    else:
        pipe.run_available()
    pipe.flush()
    stop_mon.set()
    got = pipe.output()
    exp, _ = pipe.reference(events)
    same = output_mismatch(got, exp) is None
    durations = {b: st.duration_s for b, st in sorted(pipe.stats.items())}
    steady = [b for b in durations if b not in (0, fault_batch) and b in pipe.stats]
    if live:  # after the start-up backlog; not the batch on the replacement's cold executor
        steady = [
            b
            for b in steady
            if b != fault_batch + 1
            and pipe.stats[b].info["started_at"] >= written[0] + LIVE_WARM_S / 2
        ]
    normal = float(np.median([durations[b] for b in steady]))
    trim_ok = all(trimmed_below <= replay_from for _, trimmed_below, replay_from in pipe.trim_log)
    out = {
        "mode": mode,
        "output_matches": same,
        "windows": len(exp),
        "durations": durations,
        "affected_batch_s": durations.get(fault_batch),
        "fault_batch": fault_batch,
        "live": live,
        "trigger_s": LIVE_TRIGGER_S if live else None,
        "lead_s": LIVE_LEAD_S if live else None,
        # live: seconds from a segment's arrival to its batch's commit, per batch
        "latency_s": _latencies(pipe, events, sc.tick_s, written),
        "fault_at": fault_at_wall[0] if fault_at_wall else None,
        "written": written,
        "recovered_after_s": _recovered_after(
            _latencies(pipe, events, sc.tick_s, written),
            written,
            fault_at_wall,
            LIVE_TRIGGER_S + normal,
        ),
        "normal_batch_s": normal,
        "trim_log": pipe.trim_log,
        "trim_ok": trim_ok,
        "trimmed_any": any(t[1] > 0 for t in pipe.trim_log),
        "committed": pipe.log.committed(),
        "executors_after": len(executor_pids(app)),
        "transitions": [(t.node, t.new.value) for t in monitor.transitions] if monitor else [],
        "fenced": monitor.fenced if monitor else [],
        "detected_after_s": None,
        "monitor_errors": errors[:5],
        "state_replicated": active,
        "decisions": [d.reason for d in loop.records] if loop is not None else [],
        "final_assignment": list(pipe.plans.load_current().placement.assignment),
        "statuses": [pipe.stats[b].info.get("live_executors") for b in sorted(pipe.stats)],
    }
    if monitor is not None and fault_at:
        downs = [t for t in monitor.transitions if t.new.value == "down"]
        out["detected_after_s"] = (downs[0].at - fault_at[0]) if downs else None
    pipe.cleanup()
    spark.stop()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
