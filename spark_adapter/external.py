"""External mode: a controller in another process steers a running pipeline through files.

The pipeline writes ``metrics/batch-<b>.json`` after every micro-batch and pins whatever
``plans/current`` points at when a batch starts. ``ExternalSparkSubstrate`` is the controller's
side of that protocol: ``observe`` reads the batch files it has not seen (a replayed batch's
newer file replaces the first), ``apply`` publishes to the plan store. It remembers only the
files present (the pipeline keeps the newest ``metrics_keep``), so a months-long run's memory
stays bounded. No pyspark import.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from core.observation import Observation
from core.plans import Plan
from spark_adapter.actuator import PlanStore, pipeline_ended
from spark_adapter.batchstats import BatchStats, observation_from_batches, read_batch_stats

__all__ = [
    "ExternalSparkSubstrate",
    "PipelineEnded",
    "PipelineMismatch",
    "batch_mismatch",
    "ended_problem",
    "workdir_mismatch",
]

log = logging.getLogger("trimtab.external")


class PipelineMismatch(ValueError):
    """The steered pipeline's batches are not of the configured scenario or partitions."""


class PipelineEnded(PipelineMismatch):
    """The steered pipeline has ended (``ended_problem``): no batch would run a new plan."""


class ExternalSparkSubstrate:
    """Implements the Substrate protocol over a pipeline's working directory."""

    def __init__(
        self,
        workdir: str | Path,
        streams: list[str],
        partitions: int,
        tick_s: float = 1.0,
        inputs: list[str] | None = None,
        key_groups: int | None = None,
        dry_run: bool = False,
    ) -> None:
        self.dir = Path(workdir)
        self.key_groups = key_groups  # the keyed stage's, when the caller knows its query
        self.dry_run = dry_run  # publish nothing: the pipeline runs the plans it has
        self.plans = PlanStore(self.dir / "plans", read_only=dry_run)
        self.streams, self.n, self.tick_s = streams, partitions, tick_s
        self.inputs = inputs  # the input stream of each (path) stream
        self.last_rates: np.ndarray | None = None  # per stream, the newest sample
        self.mtimes: dict[Path, int] = {}
        self._poll: tuple[int, int] | None = None  # (directory stamp, answer) of the last scan
        self._lock = threading.Lock()
        self.version = self.plans.current_version() or 0

    def observe(self) -> Observation:
        """Batches written (or rewritten by a replay) since the previous call."""
        with self._lock:  # a daemon polls unseen_mtime from another thread
            seen, read = self._stamps(), self.mtimes
            self.mtimes, self._poll = seen, None  # files the pipeline retired are forgotten
        fresh = []
        for f in sorted(f for f in seen if read.get(f) != seen[f]):
            try:
                fresh.append(read_batch_stats(f))
            except ValueError as e:  # one bad file (not the pipeline's): the others still count
                log.warning("batch_file_unreadable", extra={"fields": {"error": str(e)}})
        for b in fresh[-1:]:  # the newest: a restarted pipeline may run another query
            if problem := self.mismatch(b):
                with self._lock:
                    self.mtimes = read  # read again once the pipeline or the config is fixed
                raise PipelineMismatch(problem)
        ended = None if fresh else ended_problem(self.dir, polled=True)  # last batch read
        if ended is not None:
            raise PipelineEnded(ended)
        obs = observation_from_batches(
            fresh, self.n, self.streams, self.tick_s, self.version, self.inputs, self.last_rates
        )
        if obs.input_rates.shape[1]:
            self.last_rates = obs.input_rates[:, -1]
        return obs

    def mismatch(self, b: BatchStats) -> str | None:
        """Why batch ``b`` is not of the configured pipeline (``batch_mismatch``)."""
        return batch_mismatch(b, self.dir, self.streams, self.n, self.key_groups)

    def unseen_mtime(self) -> int:
        """The newest modification time (ns) of a batch file ``observe`` has not read, 0 when
        there is none: a daemon that runs a round on every batch polls it. A poll that finds the
        directory's own stamp unchanged since its last scan answers without listing the files
        (11 ms at 1,000 batch files, polled five times a second)."""
        try:
            stamp = (self.dir / "metrics").stat().st_mtime_ns
        except FileNotFoundError:
            return 0
        with self._lock:
            if self._poll is not None and self._poll[0] == stamp:
                return self._poll[1]  # no file came or went since the last scan
            stamps = self._stamps().items()
            newest = max((m for f, m in stamps if self.mtimes.get(f) != m), default=0)
            if time.time_ns() - stamp > 50_000_000:  # not a stamp another entry could share
                self._poll = (stamp, newest)
            return newest

    def _stamps(self) -> dict[Path, int]:
        """Each batch file present and its modification time (ns)."""
        out: dict[Path, int] = {}
        for f in (self.dir / "metrics").glob("batch-*.json"):
            try:
                out[f] = f.stat().st_mtime_ns
            except FileNotFoundError:  # retired by the pipeline meanwhile
                continue
        return out

    def apply(self, plan: Plan) -> Plan:
        """Publish the plan (after any newer plan, with the user's operator parameters); the
        pipeline's next batch pins it. In a dry run nothing is published: the plan in effect
        is the pipeline's current one when it has the plan's units and nodes (else ``plan``,
        which no batch runs; ``version`` stays the pipeline's, 0 with none)."""
        if self.dry_run:
            v = self.plans.current_version()
            self.version = v or 0
            cur = None if v is None else self.plans.load(v)
            ours = (plan.placement.units, plan.placement.nodes)
            if cur is not None and (cur.placement.units, cur.placement.nodes) == ours:
                return cur
            return plan
        plan = self.plans.publish_next(plan)
        self.version = plan.version
        return plan


def batch_mismatch(
    b: BatchStats,
    workdir: Path,
    streams: list[str],
    partitions: int | None,
    key_groups: int | None,
) -> str | None:
    """Why batch ``b`` is not of the pipeline a daemon was configured for (None: it is): other
    partitions, key groups or streams, as when its ``substrate.scenario`` or
    ``substrate.partitions`` is not the driver's (None: not checked)."""
    where = f"the pipeline in {workdir} ({workdir / 'metrics' / f'batch-{b.batch_id:08d}.json'})"
    if partitions is not None and b.busy_s.size != partitions:
        return f"substrate.partitions: {partitions}, but {where} runs {b.busy_s.size}"
    if key_groups is not None and b.kg_rows.size != key_groups:
        return (
            f"substrate.scenario: its keyed operator has {key_groups} key groups, "
            f"but {where} has {b.kg_rows.size}"
        )
    other = sorted(set(b.stream_rows) - set(streams))
    if other:
        return (
            f"substrate.scenario: {where} reads stream {other[0]!r}, which the scenario "
            f"does not have ({', '.join(streams)})"
        )
    return None


def workdir_mismatch(
    workdir: str | Path, streams: list[str], partitions: int | None, key_groups: int | None
) -> str | None:
    """``batch_mismatch`` of the newest batch file in ``workdir`` (None without one); reads
    only."""
    files = sorted((Path(workdir) / "metrics").glob("batch-*.json"))
    if not files:
        return None
    return batch_mismatch(
        read_batch_stats(files[-1]), Path(workdir), streams, partitions, key_groups
    )


def ended_problem(workdir: str | Path, polled: bool = False) -> str | None:
    """Why a controller has nothing to steer in ``workdir``: its pipeline has ended (a batch
    run's last batch, or a live run's once its log was closed, closed every window), or None;
    reads only (``polled``: a daemon's every round, ``actuator.PlanLog``). A damaged or busy
    plan log is left to the driver's own check (a round asks again)."""
    try:
        ended = pipeline_ended(Path(workdir), polled)
    except (ValueError, sqlite3.DatabaseError):
        return None
    if ended is None:
        return None
    return (
        f"substrate.workdir: the pipeline in {workdir} has ended: batch {ended} closed every "
        "window, and nothing more runs there for a plan to steer (a live pipeline, pipeline "
        "run --trigger-s, runs until its input log is closed)"
    )
