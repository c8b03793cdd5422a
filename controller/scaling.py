"""Scaling in the loop: DS2's estimate (``scaling.autoscaler``) from what the substrate
measured, before placement and shedding.

Per round it measures the input rate (the mean arrival rate over the round's samples, all
streams) and the rows processed with the busy core-seconds they took: from a steered
pipeline's batches (every partition's input rows and busy seconds), or from the simulator's
counters (tuples completed and busy core-seconds, differenced between rounds). Scale decides
the node count; placement then places the units on that many nodes; shedding runs only at the
ceiling (``ControlPolicy``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from controller.settings import ScalingSettings
from core.observation import Observation
from scaling.autoscaler import Autoscaler, AutoscalerParams, ScaleDecision

__all__ = ["ScalingPolicy"]


class ScalingPolicy:
    """The autoscaler with the measurements it needs from observations."""

    def __init__(self, settings: ScalingSettings, nodes: int, interval_s: float) -> None:
        top = settings.max_nodes or nodes
        if top > nodes:
            raise ValueError(f"scaling.max_nodes: {top} exceeds the cluster's {nodes} nodes")
        if settings.min_nodes > nodes:
            raise ValueError(
                f"scaling.min_nodes: {settings.min_nodes} exceeds the cluster's {nodes} nodes"
            )
        self.settings = settings
        self.max_nodes = top
        self.auto = Autoscaler(
            AutoscalerParams(
                target_utilization=settings.target_utilization,
                min_nodes=settings.min_nodes,
                max_nodes=top,
                cooldown_rounds=settings.cooldown_rounds,
                scale_in_rounds=max(1, math.ceil(settings.scale_in_after_s / interval_s)),
            )
        )
        self._prev: tuple[float, float] = (0.0, 0.0)

    @property
    def min_nodes(self) -> int:
        """The node count a run starts with."""
        return self.settings.min_nodes

    def measure(self, obs: Observation) -> tuple[float, float, float]:
        """(input rows/s, rows processed, busy core-seconds) since the previous round."""
        rate = float(obs.input_rates.sum(axis=0).mean()) if obs.input_rates.size else 0.0
        if obs.batches:
            rows = float(sum(sum(b.partition_rows) for b in obs.batches))
            busy = float(sum(sum(b.partition_busy_s) for b in obs.batches))
            return rate, rows, busy
        out, busy = obs.counters.get("out", 0.0), obs.counters.get("busy_core_s", 0.0)
        p_out, p_busy = self._prev
        if out < p_out or busy < p_busy:  # the substrate restarted (a looping simulator)
            p_out, p_busy = 0.0, 0.0
        self._prev = (out, busy)
        return rate, out - p_out, busy - p_busy

    def decide(
        self, obs: Observation, running: int, capacities: NDArray[np.float64]
    ) -> ScaleDecision:
        """The node count for the next plan, with the rates and estimate behind it."""
        rate, rows, busy = self.measure(obs)
        return self.auto.decide(running, rate, rows, busy, capacities)
