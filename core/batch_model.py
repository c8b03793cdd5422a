"""A micro-batch engine's fixed costs: what ``trimtab calibrate`` fits from a Spark run's batch
statistics and the simulator's predictions charge each batch (the busiest node's work on top).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from core.model_base import STRICT, TrimtabModel

__all__ = ["BatchModel", "Warmup"]


class Warmup(TrimtabModel):
    """A driver's fixed cost per batch falls as it runs batches (its JVM and Python workers
    warm up): ``slope_s`` seconds per e-fold of batches run, ``batch_overhead_s`` at batch
    ``at_batch``, never below ``floor_s``."""

    model_config = STRICT
    slope_s: float = Field(ge=0, description="the fall per e-fold of batches run (s)")
    at_batch: float = Field(ge=0, description="the batch whose fixed cost is batch_overhead_s")
    floor_s: float = Field(
        ge=0, description="the lowest fixed cost (calibrate: its 10th percentile)"
    )


class BatchModel(TrimtabModel):
    """A micro-batch engine's fixed costs (``trimtab calibrate`` fits them from a Spark run):
    batch ``b`` whose busiest node has ``w`` CPU-seconds of work takes ``fixed_s(b) + w``,
    ``batch_overhead_s + task_overhead_s`` without a warm-up."""

    model_config = STRICT
    task_overhead_s: float = Field(0.0, ge=0)
    batch_overhead_s: float = Field(0.0, ge=0, description="a batch's typical fixed cost (median)")
    planning_overhead_s: float | None = Field(
        None,
        ge=0,
        description="the fixed cost capacity plans with (calibrate: its 90th percentile, so "
        "nine batches in ten fit); default batch_overhead_s",
    )
    warmup: Warmup | None = Field(None, description="the fixed cost's fall as a driver runs")

    def fixed_s(self, batch: Any) -> Any:
        """The fixed cost (per batch and per task) of batch number ``batch`` (0: a driver's
        first; a number or an array).

        >>> w = Warmup(slope_s=0.2, at_batch=np.e - 1, floor_s=0.5)
        >>> m = BatchModel(task_overhead_s=0.1, batch_overhead_s=0.9, warmup=w)
        >>> m.fixed_s([0, np.e - 1, 1e6]).round(2).tolist()  # 0.2 s more at 0; the floor late
        [1.2, 1.0, 0.6]
        """
        b = np.asarray(batch, dtype=float)
        o = np.full(b.shape, self.batch_overhead_s)
        if self.warmup is not None:
            w = self.warmup
            o = np.maximum(o + w.slope_s * (np.log1p(w.at_batch) - np.log1p(b)), w.floor_s)
        return o + self.task_overhead_s

    def capacity(self, tick_s: float) -> float:
        """Cores of work a node (a partition) can do per second of input when every batch of
        ``tick_s`` pays the fixed costs it plans with (at least 5% of a core, so a badly
        fitted overhead still leaves a plan).

        >>> BatchModel(task_overhead_s=0.1, batch_overhead_s=0.9).capacity(2.0)
        0.5
        >>> BatchModel(task_overhead_s=0.1, batch_overhead_s=0.9, planning_overhead_s=1.3).capacity(2.0)
        0.3
        """
        o = self.batch_overhead_s if self.planning_overhead_s is None else self.planning_overhead_s
        return max(0.05, (tick_s - o - self.task_overhead_s) / tick_s)
