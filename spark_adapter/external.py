"""External mode: a controller in another process steers a running pipeline through files.

The pipeline writes ``metrics/batch-<b>.json`` after every micro-batch and pins whatever
``plans/current`` points at when a batch starts. ``ExternalSparkSubstrate`` is the controller's
side of that protocol: ``observe`` reads the batch files it has not seen (a replayed batch's
newer file replaces the first), ``apply`` publishes to the plan store. It remembers only the
files present (the pipeline keeps the newest ``metrics_keep``), so a months-long run's memory
stays bounded. No pyspark import.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.observation import Observation
from core.plans import Plan
from spark_adapter.actuator import PlanStore
from spark_adapter.batchstats import BatchStats, observation_from_batches, read_batch_stats

__all__ = ["ExternalSparkSubstrate"]


class ExternalSparkSubstrate:
    """Implements the Substrate protocol over a pipeline's working directory."""

    def __init__(
        self,
        workdir: str | Path,
        streams: list[str],
        partitions: int,
        tick_s: float = 1.0,
        inputs: list[str] | None = None,
    ) -> None:
        self.dir = Path(workdir)
        self.plans = PlanStore(self.dir / "plans")
        self.streams, self.n, self.tick_s = streams, partitions, tick_s
        self.inputs = inputs  # the input stream of each (path) stream
        self.last_rates: np.ndarray | None = None  # per stream, the newest sample
        self.mtimes: dict[Path, float] = {}
        self.version = self.plans.current_version() or 0

    def observe(self) -> Observation:
        """Batches written (or rewritten by a replay) since the previous call."""
        fresh: list[BatchStats] = []
        seen: dict[Path, float] = {}
        for f in sorted((self.dir / "metrics").glob("batch-*.json")):
            try:
                m = f.stat().st_mtime_ns
            except FileNotFoundError:  # retired by the pipeline meanwhile
                continue
            seen[f] = m
            if self.mtimes.get(f) != m:
                fresh.append(read_batch_stats(f))
        self.mtimes = seen  # files the pipeline retired are forgotten
        obs = observation_from_batches(
            fresh, self.n, self.streams, self.tick_s, self.version, self.inputs, self.last_rates
        )
        if obs.input_rates.shape[1]:
            self.last_rates = obs.input_rates[:, -1]
        return obs

    def apply(self, plan: Plan) -> Plan:
        """Publish the plan (after any newer plan, with the user's operator parameters); the
        pipeline's next batch pins it."""
        plan = self.plans.publish_next(plan)
        self.version = plan.version
        return plan
