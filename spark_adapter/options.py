"""How a Spark pipeline runs: ``PipelineOptions``, fixed at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PipelineOptions"]


@dataclass(frozen=True)
class PipelineOptions:
    """How a pipeline runs, fixed at construction.

    * ``partitions``: the keyed stage's partitions (a plan's ``scale`` runs fewer);
    * ``truncate_every``: a reliable checkpoint of the state every k batches (0: never);
    * ``snapshot_every``: passive standby, a Parquet state snapshot every k batches (0: none);
      with ``snapshot_mtbf_s`` k adapts by Young/Daly to the measured snapshot cost
      (``ha.passive_standby.CheckpointCadence``, starting at ``snapshot_every``, at most
      ``snapshot_max_every``);
    * ``retention``: input-log trimming, ``none``, ``upstream`` or ``passive`` (``recovery``);
    * ``replicate_state``: active standby, every cached state block on two executors;
    * ``window_drops``: shed whole windows (``shedding.window_drops``) instead of tuples;
    * ``follow_executors``: one executor per running node (plan.scale), requested and released at
      batch starts (``executor_pool``; standalone and local-cluster masters), a joining one
      warmed by a small job unless ``warm_executors`` is off;
    * ``metrics_keep``: newest batches' statistics files kept in ``metrics/`` (0: all);
      ``retire_plans``: at each snapshot, old plans no restore can load leave ``plans/``;
    * ``dpc_mode``, ``dpc_max_delay_s``: Delay, Process and Correct for an input stream that
      goes silent (``spark_adapter.dpc``; ``ha.dpc`` of a scenario);
    * ``stats_keep``: statistics of the newest batches kept in memory (0: all, as verification
      needs; a long-running driver keeps its memory bounded).
    """

    partitions: int
    truncate_every: int = 10
    snapshot_every: int = 0
    snapshot_mtbf_s: float | None = None
    snapshot_max_every: int = 50
    retention: str = "none"
    replicate_state: bool = False
    window_drops: bool = False
    follow_executors: bool = False
    warm_executors: bool = True
    metrics_keep: int = 1000
    retire_plans: bool = False
    stats_keep: int = 0
    dpc_mode: str = "tentative"
    dpc_max_delay_s: float = 2.0

    @classmethod
    def for_ha(cls, partitions: int, policy: str, k: int = 10, **more: Any) -> PipelineOptions:
        """Options carrying out an availability policy (``core.plans.HAPlan.policy``).

        upstream: the input log is trimmed only past reliable state checkpoints (every ``k``
        batches); passive: Parquet state snapshots every ``k`` batches, the log trimmed past
        them; active: cached state replicated on two executors (plus upstream retention);
        none: nothing is trimmed and nothing is replicated.

        >>> o = PipelineOptions.for_ha(2, "passive", 3)
        >>> (o.truncate_every, o.snapshot_every, o.retention, o.replicate_state)
        (3, 3, 'passive', False)
        >>> PipelineOptions.for_ha(2, "active", 5).replicate_state
        True
        >>> PipelineOptions.for_ha(2, "nosuch")
        Traceback (most recent call last):
        ...
        ValueError: ha.policy: unknown policy 'nosuch'
        """
        if policy == "none":
            return cls(partitions, **more)
        if policy not in ("upstream", "passive", "active"):
            raise ValueError(f"ha.policy: unknown policy {policy!r}")
        return cls(
            partitions,
            truncate_every=k,
            snapshot_every=k if policy == "passive" else 0,
            retention="passive" if policy == "passive" else "upstream",
            replicate_state=policy == "active",
            **more,
        )

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError(f"partitions: must be at least 1, got {self.partitions}")
        for name in ("truncate_every", "snapshot_every", "metrics_keep", "stats_keep"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must not be negative, got {getattr(self, name)}")
        if self.dpc_mode not in ("block", "tentative"):
            raise ValueError(f"ha.dpc.mode: unknown mode {self.dpc_mode!r}")
        if not self.dpc_max_delay_s >= 0:
            raise ValueError(f"ha.dpc.max_delay_s: must be at least 0, got {self.dpc_max_delay_s}")
        if self.retention not in ("none", "upstream", "passive"):
            raise ValueError(f"retention: unknown mode {self.retention!r}")
