"""What a substrate reports to the controller: load samples since the last observation.

Both substrates (the simulator and the Spark adapter) produce ``Observation`` values; the
controller never needs to know which one it is steering.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from core.cluster import NodeStatus

__all__ = ["Observation", "PipelineBatch"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class PipelineBatch:
    """A micro-batch a steered pipeline completed: what the daemon exports of it."""

    batch_id: int
    duration_s: float
    rows: int
    partials_merged: int
    started_at: float | None  # wall clock (s since the epoch), when the batch records it
    partition_rows: tuple[int, ...] = ()  # input rows per partition
    partition_busy_s: tuple[float, ...] = ()  # busy seconds per partition
    ready_nodes: int | None = None  # its running nodes whose executors were live (None: unknown)
    # the plan version the pipeline refused for this batch (it kept the one before) and why
    plan_refused: tuple[int, str] | None = None


@dataclass(frozen=True)
class Observation:
    """Samples taken since the previous observation, oldest first.

    Attributes
    ----------
    time_s : substrate time at the end of the last sample
    unit_load : ``(m, s)`` load of each unit in cores (CPU-seconds per second)
    node_load : ``(n, s)`` offered load of each node in cores
    input_rates : ``(d, s)`` arrival rate of each stream in tuples/s
    node_status : status of each node now
    backlog_s : ``(n,)`` queued work per node in seconds of that node's capacity
    latency_s : mean end-to-end latency over the samples
    plan_version : the plan version the substrate is applying
    assignment : the unit -> node assignment in effect (a substrate that fails over by itself
        reports it so the controller adopts it instead of moving units again)
    key_counts : ``(keys, 2)`` rows per key in the latest sample (key, count), for hot-key
        routing; empty when the substrate does not see keys
    batches : the micro-batches a steered pipeline completed (empty for the simulator)
    """

    time_s: float
    unit_load: Array
    node_load: Array
    input_rates: Array
    node_status: tuple[NodeStatus, ...]
    backlog_s: Array
    latency_s: float = 0.0
    plan_version: int = 0
    counters: dict[str, float] = field(default_factory=dict)
    key_counts: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    assignment: NDArray[np.int64] | None = (
        None  # the placement in effect, if the substrate changed it
    )
    batches: tuple[PipelineBatch, ...] = ()

    @property
    def samples(self) -> int:
        """Number of samples held."""
        return int(self.node_load.shape[1])
