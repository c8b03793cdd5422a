"""The Spark substrate: the controller's ``observe()`` / ``apply(plan)`` over a running pipeline.

``apply`` publishes the plan to the plan store (the next micro-batch pins it); ``observe``
returns one sample per micro-batch completed since the previous call, from the statistics the
batches emitted as data.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.observation import Observation
from core.plans import Plan
from spark_adapter.batchstats import observation_from_batches
from spark_adapter.pipeline import SparkPipeline

__all__ = ["SparkSubstrate"]


class SparkSubstrate:
    """Implements the controller's Substrate protocol for a ``SparkPipeline``."""

    def __init__(self, pipeline: SparkPipeline, streams: list[str], tick_s: float) -> None:
        self.pipeline = pipeline
        self.streams = streams
        self.tick_s = tick_s
        self.seen: set[int] = set()
        self.version = -1
        self.published: list[Plan] = []
        self.last_rates: np.ndarray | None = None  # per stream, the newest sample

    def apply(self, plan: Plan) -> Plan:
        """Publish ``plan`` (after any newer plan, with the user's operator parameters);
        batches that start after this pin it."""
        plan = self.pipeline.plans.publish_next(plan)
        self.version = plan.version
        self.published.append(plan)
        return plan

    def observe(self) -> Observation:
        """Samples of the batches completed since the previous call (replays replace, not add).

        A replay writes its input ahead and reads a segment a batch: the segments after a
        batch are its future, not a backlog, so none is reported (it made shedding plan for
        draining a queue that was never there, at as little as a fifth of the capacity).
        """
        fresh = sorted(b for b in self.pipeline.stats if b not in self.seen)
        self.seen.update(fresh)
        batches = [self.pipeline.stats[b] for b in fresh]
        obs = observation_from_batches(
            batches,
            self.pipeline.n,
            self.streams,
            self.tick_s,
            self.version,
            [self.pipeline.q.stream_of(s) for s in self.streams],
            self.last_rates,
        )
        if obs.input_rates.shape[1]:
            self.last_rates = obs.input_rates[:, -1]
        return replace(obs, backlog_s=np.zeros_like(obs.backlog_s))
