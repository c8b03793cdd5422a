"""The controller's settings: one model, one set of defaults, for every way trimtab runs.

A scenario's ``controller:`` block is a ``ControllerSettings``; the daemon's config file holds
the same ``placement``, ``shedding`` and ``availability`` models at its top level (and the
round interval and window in ``control``). When the daemon steers a scenario, a field set in
its config wins and every other field keeps the scenario's value (``overlay``).

The defaults are conservative: least-loaded placement, no shedding, no availability policy.
Dropping input and paying for checkpoints are a user's choice, never a surprise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from core.model_base import STRICT, TrimtabModel
from partitioners.registry import NAMES as PARTITIONERS

__all__ = [
    "ControllerSettings",
    "HASettings",
    "PlacementSettings",
    "ScalingSettings",
    "SheddingSettings",
    "overlay",
]

CORRELATION_SHORTHANDS = ("pair_threshold", "load_threshold")


class PlacementSettings(TrimtabModel):
    """Placement method and its anti-flapping settings."""

    model_config = STRICT
    method: str = Field("least-loaded", description="placement method (trimtab place --help)")
    initial: str | None = Field(None, description="another method for the initial plan only")
    fixed: dict[str, str] = Field(default_factory=dict, description="operator -> node pins")
    min_gain: float = Field(
        0.0, ge=0, description="minimum expected drop of mean node-load variance"
    )
    cooldown_rounds: int = Field(0, ge=0, description="rounds without moves after a change")
    max_moves: int = Field(
        1000,
        ge=0,
        description="most units moved in one round; 0 freezes placement (a failover still "
        "moves units off failed nodes)",
    )
    ineffective_hold_rounds: int = Field(
        3, ge=0, description="rounds a unit whose move did not help stays put"
    )
    churn_rounds: int = Field(
        2, ge=0, description="rounds a moved unit stays out of pair-wise rounds"
    )
    migration_aware: bool = Field(
        True,
        description="move only when the overload a move removes outweighs its pause "
        "(correlation methods; off: every move the method's own rule accepts)",
    )
    measured_speeds: bool = Field(
        True,
        description="on a pipeline that reports batches (Spark), plan with each partition's "
        "measured speed (rows per busy second) as its capacity once the speeds spread beyond "
        "speed_tolerance; least-loaded then re-places by them",
    )
    speed_tolerance: float = Field(
        0.25, gt=0, description="spread of measured speeds (each to mean 1) ignored as noise"
    )
    params: dict[str, float] = Field(
        default_factory=dict, description="the method's parameters, e.g. pair_threshold"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        """``pair_threshold`` and ``load_threshold`` may be given beside the method: they are
        the correlation methods' parameters and go to ``params``."""
        if isinstance(data, dict) and any(k in data for k in CORRELATION_SHORTHANDS):
            data = dict(data)
            params = dict(data.get("params") or {})
            for k in CORRELATION_SHORTHANDS:
                if k in data:
                    params[k] = data.pop(k)
            data["params"] = params
        return data


class SheddingSettings(TrimtabModel):
    """Load shedding: the method and the headroom it plans against."""

    model_config = STRICT
    method: Literal["none", "lp", "fit", "uniform", "local"] = "none"
    headroom: float = Field(0.95, gt=0, le=1, description="plan against headroom x capacity")
    plan_table: bool = Field(
        False, description="lp: answer from a rate-grid table of plans solved ahead (LRU 4096)"
    )
    plan_table_step: float = Field(
        0.1, gt=0, le=1, description="plan-table grid step, as a fraction of the recent max rate"
    )
    window_drops: bool = Field(
        False, description="Spark: shed whole windows (an exact subset) instead of tuples"
    )
    drain_s: float = Field(
        10.0,
        ge=0,
        description="plan to drain a node's queued backlog within about this many seconds: "
        "the node is planned at capacity x (1 - backlog_s / drain_s), at least 20%; "
        "0: backlogs are not planned for (a Spark replay writes its input ahead and "
        "reports none; a live pipeline's are its queued segments)",
    )


class DPCSettings(TrimtabModel):
    """Delay, Process and Correct for an input that stops arriving (Borealis)."""

    model_config = STRICT
    mode: Literal["block", "tentative"] = Field(
        "tentative",
        description="tentative: results that depend on a silent input are emitted tentative "
        "after max_delay_s and corrected when it returns; block: they wait for it",
    )
    max_delay_s: float = Field(
        2.0, ge=0, description="how long results wait for a silent input before going tentative"
    )


class HASettings(TrimtabModel):
    """Availability policy, its checkpoint interval, failure detection and DPC."""

    model_config = STRICT
    policy: Literal["none", "upstream", "passive", "active"] = "none"
    dpc: DPCSettings = Field(default_factory=DPCSettings)
    checkpoint_interval: int = Field(10, ge=1, description="batches or ticks per checkpoint")
    heartbeat_timeout_s: float = Field(5.0, gt=0, description="silence before a node is suspected")
    failure_timeout_s: float = Field(
        15.0, gt=0, description="silence before a node is declared failed"
    )

    @model_validator(mode="after")
    def _order(self) -> HASettings:
        if self.failure_timeout_s < self.heartbeat_timeout_s:
            raise ValueError(
                f"failure_timeout_s: {self.failure_timeout_s} is below heartbeat_timeout_s "
                f"{self.heartbeat_timeout_s}"
            )
        return self


class ScalingSettings(TrimtabModel):
    """Scale the node count from measured true processing rates (DS2); shed only at the
    ceiling. Off by default: every node of the cluster runs."""

    model_config = STRICT
    enabled: bool = False
    target_utilization: float = Field(
        0.7, gt=0, le=1, description="plan the node count for this utilization"
    )
    min_nodes: int = Field(1, ge=1, description="never fewer nodes (the start)")
    max_nodes: int | None = Field(
        None, ge=1, description="never more nodes (default: every node of the cluster)"
    )
    cooldown_rounds: int = Field(1, ge=0, description="rounds without a scale change after one")
    scale_in_after_s: float = Field(
        60.0, ge=0, description="the load must stay low this long before a scale-in"
    )
    warm_up: bool = Field(
        True, description="Spark: warm a joining executor with a small job before batches use it"
    )

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSettings:
        if self.max_nodes is not None and self.max_nodes < self.min_nodes:
            raise ValueError(
                f"scaling.max_nodes: {self.max_nodes} is below min_nodes {self.min_nodes}"
            )
        return self


class ControllerSettings(TrimtabModel):
    """Everything the controller decides with: round interval, load window, policies."""

    model_config = STRICT
    interval_s: float = Field(10.0, gt=0, le=3600, description="seconds between control rounds")
    window_k: int = Field(10, ge=1, le=1000, description="load samples per window")
    partitioner: str = Field("hash", description="hot-key partitioner of a keyed stage")

    @field_validator("partitioner")
    @classmethod
    def _known_partitioner(cls, v: str) -> str:
        if v not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {v!r} (known: {', '.join(PARTITIONERS)})")
        return v

    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    shedding: SheddingSettings = Field(default_factory=SheddingSettings)
    ha: HASettings = Field(default_factory=HASettings)
    scaling: ScalingSettings = Field(default_factory=ScalingSettings)


def overlay(base: BaseModel, top: BaseModel) -> Any:
    """``base`` with every field that ``top`` sets explicitly (recursively for nested models).

    >>> a = PlacementSettings(method="rod", max_moves=5)
    >>> b = PlacementSettings(max_moves=7)
    >>> c = overlay(a, b)
    >>> (c.method, c.max_moves)
    ('rod', 7)
    """
    update: dict[str, Any] = {}
    for name in top.model_fields_set:
        value = getattr(top, name)
        current = getattr(base, name)
        if isinstance(value, BaseModel) and isinstance(current, BaseModel):
            value = overlay(current, value)
        elif isinstance(value, dict) and isinstance(current, dict):
            value = {**current, **value}  # e.g. a method's params: the named ones change
        update[name] = value
    return base.model_copy(update=update)
