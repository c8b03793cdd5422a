"""Standby drivers: the driver process under a lease (``core.lease``), warm or active.

Two driver processes share one working directory. The *primary* holds the lease and renews it
(a heartbeat). A *warm standby* starts its SparkSession in advance and waits; when the lease
expires (the primary's heartbeat stopped), it takes the lease with a new epoch, restores the
newest state snapshot, refolds the committed batches after it, and resumes the streaming
query on the same checkpoint: Spark re-runs the batch the primary had not committed, with the
plan and watermarks pinned in the plan log, and the idempotent sink replaces any output the
primary wrote. A driver checks its epoch before writing and before committing, so two drivers
never commit the same batch (fencing). An *active* standby (``spark_adapter.active_standby``)
instead processes every batch the primary pins, privately, and publishes the ones the primary
did not commit at takeover: no restore and no refold.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.lease import Lease, read_lease
from core.stopping import stop_on_signals
from spark_adapter.active_standby import follow, handover, publish, shadow_dir
from spark_adapter.actuator import pipeline_ended
from spark_adapter.batchstats import end_to_end
from spark_adapter.interrupt import holding_sigint, stop_if_asked
from spark_adapter.standby_floor import (
    mark_refolding,
    next_segment,
    standby_floor,
    unmark_refolding,
)

__all__ = ["ROLES", "DriverOptions", "EndedMeanwhile", "run_driver", "wait_for_holder"]

ROLES = ("primary", "standby", "active")
READY = "_READY"  # in WORKDIR/active-standby: the active standby is up and following
STANDBY_READY = "_STANDBY_READY"  # in WORKDIR: a warm standby is up and waits for the lease


class EndedMeanwhile(RuntimeError):
    """The pipeline ended (``PlanLog.ended_at``) while this driver waited for the lease: the
    driver that held it ran the last batch, which closed every window. Nothing is left to
    run (a batch after it would start from an infinite watermark)."""

    def __init__(self, role: str, batch: int) -> None:
        self.role, self.batch = role, batch
        who = "active standby" if role == "active" else role
        super().__init__(
            f"the pipeline ended while this {who} waited for the lease: batch {batch} closed "
            "every window; nothing more runs here"
        )


def wait_for_holder(lease_file: str | Path, prefix: str, timeout_s: float = 120.0) -> bool:
    """Wait until a holder whose name starts with ``prefix`` has the lease (for harnesses)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = read_lease(lease_file)
        if st is not None and st.holder.startswith(prefix):
            return True
        time.sleep(0.2)
    return False


@dataclass(frozen=True)
class DriverOptions:
    """How ``run_driver`` runs (see its docstring); the defaults are the CLI's."""

    master: str = "local[2]"
    partitions: int = 2
    lease_ttl_s: float = 3.0
    snapshot_every: int = 2
    kill_after_output: int | None = None
    result_file: str | Path | None = None
    mtbf_s: float | None = None
    trigger_s: float | None = None
    window_drops: bool = False
    follow_executors: bool = False
    warm_executors: bool = True
    suspect_s: float = 5.0  # executor failure detection (the scenario's ha timeouts)
    fail_s: float = 15.0
    partition_speeds: tuple[float, ...] = ()  # the scenario's spark.partition_speeds
    dpc_mode: str = "tentative"  # the scenario's ha.dpc (``spark_adapter.dpc``)
    dpc_max_delay_s: float = 2.0


@holding_sigint  # a Ctrl-C before the stream runs: carried out at the next safe point
def run_driver(
    workdir: str | Path, scenario_path: str, role: str, **options: Any
) -> dict[str, Any]:
    """Run a pipeline driver as ``primary``, warm ``standby`` or ``active`` standby over
    ``workdir``'s input log (an active standby starts before the primary and follows it).

    A standby starts its session, warms its executors and follows the primary's commits
    (restoring snapshots and refolding) while it waits, so a takeover has little left to do.
    Without ``trigger_s`` the driver processes the segments present and closes every window;
    with it, it follows the log live, a micro-batch every ``trigger_s`` seconds, until the log
    is closed (then it closes the windows) or SIGTERM/SIGINT/SIGHUP (then it drains what has arrived
    and stops with the windows open, for the next driver to restore). ``options`` are the
    fields of ``DriverOptions``.
    """
    o = DriverOptions(**options)
    if o.trigger_s is not None and o.trigger_s <= 0:
        raise ValueError(f"trigger_s must be positive, got {o.trigger_s}")
    if role not in ROLES:
        raise ValueError(f"role: expected 'primary', 'standby' or 'active', got {role!r}")
    from spark_adapter.faults import watching

    work = Path(workdir)
    times: dict[str, float | None] = {"t_start": time.time()}
    spark, sc, warmed = _warm_session(scenario_path, role, o)
    # a stopped or dead executor is fenced meanwhile, while following or taking over too
    with watching(spark, o.suspect_s, o.fail_s) as monitor:
        lease = Lease(work / "lease.sqlite", o.lease_ttl_s)
        holder = f"{role}-{os.getpid()}"
        taken: dict[str, Any] = {}
        if role == "active":  # follow the primary batch by batch, take over with the state live
            epoch, pipe, taken = _take_over_active(spark, sc, work, o, lease, holder)
        else:
            pipe = _driver_pipeline(spark, sc, work, o)
            epoch = _acquire(lease, holder, role, pipe)
        times["t_lease"] = time.time()
        hand_over = _heartbeat(lease, holder, epoch)
        # a clean stop, or a driver that failed (its JVM killed, say), lets the lease go: the
        # next driver takes over at once, not a lease's time later
        try:
            pipe.fence = lambda: lease.valid(epoch)
            first_commit = _wire_driver(spark, pipe, work, o)
            restored = pipe.restore()
            times["t_restored"] = time.time()
            ended = _run(pipe, o.trigger_s)
        finally:
            hand_over()
    times["t_first_commit"] = first_commit[0] if first_commit else None
    times["t_end"] = time.time()
    result = {"role": role, "epoch": epoch, "restored_through": restored, "ended": ended}
    result |= times | _outcome(pipe, monitor) | taken | {"warm_start": warmed}
    if taken.get("t_published") is not None:  # the takeover published the batch first
        result["t_first_commit"] = taken["t_published"]
    if o.result_file is not None:
        Path(o.result_file).write_text(json.dumps(result))
    pipe.cleanup()
    with contextlib.suppress(Exception):
        spark.stop()
    return result


def _warm_session(scenario_path: str, role: str, o: DriverOptions) -> tuple[Any, Any, Any]:
    """The driver's session, its scenario, and its warm start (``warm_start``): the first
    batch finds the executors, the file source and the fold warm."""
    from core.scenario import load_scenario
    from spark_adapter.query import compile_query
    from spark_adapter.session import make_session
    from spark_adapter.warm_start import warm_start

    spark = make_session(
        o.master, f"trimtab-driver-{role}", {"spark.sql.shuffle.partitions": str(o.partitions)}
    )
    sc = load_scenario(scenario_path)
    q = compile_query(sc, o.partition_speeds)
    return spark, sc, warm_start(spark, sc, q, o.partitions, snapshot=o.snapshot_every > 0)


def _heartbeat(lease: Lease, holder: str, epoch: int) -> Callable[[], None]:
    """Renew the lease every third of its time to live until the returned function is called:
    it stops the renewals, releases the lease and closes it (its ``-wal`` and ``-shm`` files
    go with the last connection)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(lease.ttl_s / 3):
            if not lease.renew(holder, epoch):
                return

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()

    def hand_over() -> None:
        stop.set()
        beating.join()
        lease.release(holder, epoch)
        lease.close()

    return hand_over


def _outcome(pipe: Any, monitor: Any) -> dict[str, Any]:
    """What a driver did: its batches and commits, trimming, fenced executors, latencies."""
    from spark_adapter.faults import monitor_report

    out: dict[str, Any] = {"pid": os.getpid(), "batches": sorted(pipe.stats)}
    out |= {"committed": pipe.log.committed(), "trim_log": pipe.trim_log}
    out["input_restamped"] = len(pipe.restamped)  # segments put back in order at the start
    out |= monitor_report(monitor)
    return out | end_to_end([pipe.stats[b] for b in sorted(pipe.stats)])


def _driver_pipeline(
    spark: Any, sc: Any, work: Path, o: DriverOptions, shadow: bool = False
) -> Any:
    """The driver's pipeline: passive standby snapshots, the log retained past them (and past
    what an active standby has not read); an active standby's own (``shadow``) keeps no
    snapshots and trims nothing."""
    from spark_adapter.pipeline import PipelineOptions, SparkPipeline
    from spark_adapter.query import compile_query

    opts = PipelineOptions(
        o.partitions,
        snapshot_every=0 if shadow else o.snapshot_every,
        snapshot_mtbf_s=None if shadow else o.mtbf_s,  # Young/Daly from the snapshot cost
        snapshot_max_every=max(50, o.snapshot_every),
        retention="none" if shadow else "passive",
        window_drops=o.window_drops,
        follow_executors=o.follow_executors,
        warm_executors=o.warm_executors,
        retire_plans=True,  # a long-running driver keeps its plan store bounded
        stats_keep=1000,  # and its memory: the newest batches' statistics
        dpc_mode=o.dpc_mode,
        dpc_max_delay_s=o.dpc_max_delay_s,
    )
    pipe = SparkPipeline(spark, compile_query(sc, o.partition_speeds), work, opts)
    if not shadow:
        pipe.retention.floor = standby_floor(work)
    return pipe


def _take_over_active(
    spark: Any, sc: Any, work: Path, o: DriverOptions, lease: Lease, holder: str
) -> tuple[int, Any, dict[str, Any]]:
    """An active standby: process every batch the primary pins in a private pipeline until the
    lease is free, then catch up, publish what the primary did not commit and hand the live
    state to a pipeline on the shared directory (``spark_adapter.active_standby``)."""
    shadow = _driver_pipeline(spark, sc, shadow_dir(work), o, shadow=True)
    (shadow.dir / READY).touch()  # up and following: a harness may start the primary now
    b = max(shadow.log.committed(), default=-1) + 1
    # it takes over from a primary only: never the lease of a pipeline no one has run yet
    while lease.state().epoch == 0 or (epoch := lease.acquire(holder)) is None:
        stop_if_asked("interrupted: the active standby stopped following the primary")
        if follow(shadow, work, b):
            b += 1
        else:
            time.sleep(0.1)
    _unless_ended(lease, holder, epoch, "active", pipeline_ended(work))
    t_lease = time.time()
    while follow(shadow, work, b):  # what the primary pinned before it died
        b += 1
    published = publish(shadow, work, lambda: lease.valid(epoch))
    at = time.time() if published else None
    pipe = _driver_pipeline(spark, sc, work, o)
    handover(shadow, pipe)
    followed = sorted(shadow.stats)
    return (
        epoch,
        pipe,
        {"followed": followed, "published": published, "t_published": at, "t_lease_taken": t_lease},
    )


def _unless_ended(lease: Lease, holder: str, epoch: int, role: str, ended: int | None) -> None:
    """Raise ``EndedMeanwhile`` when the pipeline ended (batch ``ended``) while ``holder``
    waited for the lease it now holds; it runs nothing, so the lease is free again at once."""
    if ended is not None:
        lease.release(holder, epoch)
        lease.close()
        raise EndedMeanwhile(role, ended)


def _acquire(lease: Lease, holder: str, role: str, pipe: Any) -> int:
    """Wait for the lease; a standby follows the primary's commits meanwhile (its state stays
    warm) and takes over from a primary only (never a lease no driver has held: started
    first, it waits for the primary, and says it is ready in ``WORKDIR/_STANDBY_READY``); a
    primary waits out a dead holder's lease and no longer."""
    give_up = time.time() + 2 * lease.ttl_s + 1
    last_follow, marked = 0.0, 0
    if role == "standby":
        mark_refolding(pipe.dir, marked)  # before its first follow reads the newest snapshot
        (pipe.dir / STANDBY_READY).touch()  # warm and waiting: a harness may start the primary
    try:
        while True:
            may_take = not (role == "standby" and lease.state().epoch == 0)
            epoch = lease.acquire(holder) if may_take else None
            if epoch is not None:
                _unless_ended(lease, holder, epoch, role, pipe.log.ended_at())
                return epoch
            if role == "primary" and time.time() > give_up:
                raise RuntimeError("lease: another driver holds the lease")
            if role == "standby" and time.time() - last_follow > 1.0:
                _follow(pipe)
                if (segment := next_segment(pipe)) != marked:  # the mark moves with the state
                    mark_refolding(pipe.dir, marked := segment)
                last_follow = time.time()
            stop_if_asked(f"interrupted: the {role} stopped waiting for the lease")
            time.sleep(0.1)
    finally:  # it took over (no primary trims any more), or it stops
        unmark_refolding(pipe.dir)


def _follow(pipe: Any) -> None:
    """A waiting standby refolds what the primary committed since its last follow. The primary
    keeps the segments a follow may read (``standby_floor``); should one still be gone (a
    mark the primary read before it was written), that follow fails with the state at the
    last batch it refolded, and the next one loads the newer snapshot (a failure with no newer
    snapshot is raised)."""
    try:
        pipe.restore()
    except Exception:
        snap = pipe.log.latest_snapshot()
        if snap is None or snap[0] <= (max(pipe.states) if pipe.states else -1):
            raise


def _wire_driver(spark: Any, pipe: Any, work: Path, o: DriverOptions) -> list[float]:
    """Fault injection hooks, ``app.json`` for ``trimtab inject``, and the first commit's
    time (returned list, filled by the first batch)."""
    from spark_adapter.faults import publish_app, serve_lose_requests

    first_commit: list[float] = []

    def hook(batch_id: int, phase: str) -> None:
        if phase == "output_written" and batch_id == o.kill_after_output:
            os.kill(os.getpid(), signal.SIGKILL)  # crash between the output and its commit

    def on_batch(st: Any) -> None:
        if not first_commit:
            first_commit.append(time.time())
        serve_lose_requests(spark, work)

    pipe.fault_hook = hook
    pipe.on_batch = on_batch
    publish_app(spark, work, o.master)  # `trimtab inject` finds the driver doing the work
    return first_commit


def _run(pipe: Any, trigger_s: float | None) -> bool:
    """Process the log (at once, or live until closed or signalled); flush when it ended."""
    stop_if_asked("interrupted before the first batch ran")  # a Ctrl-C held until now
    if trigger_s is None:
        pipe.run_available()
        ended = True
    else:
        halt = threading.Event()
        if threading.current_thread() is threading.main_thread():
            stop_on_signals(halt.set)
        ended = _await_plan(pipe, halt) and pipe.run_stream(trigger_s, halt)
    if ended:
        pipe.flush()
    return ended


def _await_plan(pipe: Any, halt: threading.Event, poll_s: float = 0.2) -> bool:
    """A live driver's batches need a plan: with none published yet (its controller daemon
    not started, or still starting), wait for the first, saying so once. False when the
    driver is stopped first (no batch ran)."""
    if pipe.plans.current_version() is not None:
        return True
    logging.getLogger("trimtab.pipeline").warning(
        "waiting for a plan in %s: no batch runs before one is published (start the "
        "controller, trimtab run with substrate.kind: spark-external, or pass --default-plan)",
        pipe.plans.root,
    )
    while not halt.wait(poll_s):
        if pipe.plans.current_version() is not None:
            return True
    return False
