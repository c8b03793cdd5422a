"""Plans: immutable, versioned, validated bundles of placement, routing, shedding and HA.

A plan is what the controller publishes and what the substrate applies at its next tick or
micro-batch boundary. Every model is a frozen pydantic model with ``extra="forbid"``, so a plan
file with a typo fails to load, and ``Plan.to_json`` / ``Plan.from_json`` round-trip exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.model_base import BOOLEAN, TrimtabModel

__all__ = [
    "HAPlan",
    "Placement",
    "Plan",
    "RoutingConfig",
    "ScalePlan",
    "ShedPlan",
    "key_group_table",
    "key_group_units",
    "unit_id",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def unit_id(op_id: str, kg: int, key_groups: int) -> str:
    """The placeable unit of key group ``kg`` of an operator: ``op#kg``, or the operator's own
    id when it has one key group.

    >>> unit_id("agg", 3, 8), unit_id("agg", 0, 1)
    ('agg#3', 'agg')
    """
    return op_id if key_groups == 1 else f"{op_id}#{kg}"


def key_group_units(op_id: str, key_groups: int) -> tuple[str, ...]:
    """The units of every key group of an operator, in key-group order.

    >>> key_group_units("agg", 3)
    ('agg#0', 'agg#1', 'agg#2')
    """
    return tuple(unit_id(op_id, kg, key_groups) for kg in range(key_groups))


class Placement(TrimtabModel):
    """Unit -> node assignment. ``assignment[u]`` is the index into ``nodes`` of unit ``units[u]``.

    Examples
    --------
    >>> p = Placement(units=("a", "b"), nodes=("n0", "n1"), assignment=(1, 0))
    >>> p.node_of("a"), p.moves_to(Placement(units=("a", "b"), nodes=("n0", "n1"), assignment=(1, 1)))
    ('n1', 1)
    """

    model_config = _FROZEN
    units: tuple[str, ...]
    nodes: tuple[str, ...]
    assignment: tuple[int, ...]

    @model_validator(mode="after")
    def _check(self) -> Placement:
        if len(self.assignment) != len(self.units):
            raise ValueError(
                f"assignment: {len(self.assignment)} entries for {len(self.units)} units"
            )
        if len(set(self.units)) != len(self.units):
            raise ValueError("units: duplicate unit id")
        bad = [a for a in self.assignment if not 0 <= a < len(self.nodes)]
        if bad:
            raise ValueError(f"assignment: node index {bad[0]} outside [0, {len(self.nodes)})")
        return self

    @classmethod
    def from_array(
        cls, units: tuple[str, ...], nodes: tuple[str, ...], assignment: NDArray[np.int64]
    ) -> Placement:
        """Build from a numpy index vector."""
        return cls(units=units, nodes=nodes, assignment=tuple(int(a) for a in assignment))

    def as_array(self) -> NDArray[np.int64]:
        """The assignment as an int64 vector."""
        return np.asarray(self.assignment, dtype=np.int64)

    def node_of(self, unit: str) -> str:
        """The node id hosting ``unit``."""
        return self.nodes[self.assignment[self.units.index(unit)]]

    def moves_to(self, other: Placement) -> int:
        """Number of units placed differently in ``other``."""
        return int(np.count_nonzero(self.as_array() != other.as_array()))


def key_group_table(
    placement: Placement, op_id: str, key_groups: int, partitions: int
) -> tuple[int, ...]:
    """Key group -> partition: the node index of each key group's unit, modulo ``partitions``.

    >>> p = Placement(units=("agg#0", "agg#1"), nodes=("n0", "n1", "n2"), assignment=(2, 1))
    >>> key_group_table(p, "agg", 2, 2)
    (0, 1)
    >>> key_group_table(p, "other", 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: placement: unit 'other#0' missing
    """
    index = {u: i for i, u in enumerate(placement.units)}
    table = []
    for uid in key_group_units(op_id, key_groups):
        if uid not in index:
            raise ValueError(f"placement: unit {uid!r} missing")
        table.append(int(placement.assignment[index[uid]]) % partitions)
    return tuple(table)


class RoutingConfig(TrimtabModel):
    """Key routing: a key-group -> partition table for cold keys, quotas for split hot keys.

    ``hot`` maps a key to ``((partition, fraction), ...)``: its rows are spread over those
    partitions by a stable hash of the event id, in those proportions. ``params`` holds what
    the partitioner reported with it (the batch it routed from, a digest of its state).
    """

    model_config = _FROZEN
    partitioner: str = "hash"
    num_partitions: int = Field(1, ge=1)
    table: tuple[int, ...] = ()
    hot: dict[int, tuple[tuple[int, float], ...]] = Field(default_factory=dict)
    params: dict[str, float | int | str] = Field(default_factory=dict)
    # the live partitioner's state that produced ``hot`` (opaque text), so a controller
    # restarted from this plan continues where it left off
    state: str = Field("", repr=False)

    def digest(self) -> str:
        """A short digest of what routes rows (table and quotas, not the partitioner state).

        Examples
        --------
        >>> a = RoutingConfig(num_partitions=2, table=(0, 1), hot={5: ((0, 0.5), (1, 0.5))})
        >>> a.digest() == a.model_copy(update={"state": "x"}).digest(), len(a.digest())
        (True, 12)
        """
        doc = json.dumps(
            [
                "round-robin" if self.partitioner == "shuffle" else "table",
                self.num_partitions,
                list(self.table),
                sorted(self.hot.items()),
            ]
        )
        return hashlib.sha1(doc.encode()).hexdigest()[:12]

    @model_validator(mode="after")
    def _check(self) -> RoutingConfig:
        bad = [t for t in self.table if not 0 <= t < self.num_partitions]
        if bad:
            raise ValueError(f"table: partition {bad[0]} outside [0, {self.num_partitions})")
        for key, quotas in self.hot.items():
            if not quotas:
                raise ValueError(f"hot.{key}: a split key needs at least one (partition, fraction)")
            for pid, frac in quotas:
                if not 0 <= pid < self.num_partitions:
                    raise ValueError(
                        f"hot.{key}: partition {pid} outside [0, {self.num_partitions})"
                    )
                if not (math.isfinite(frac) and 0 < frac <= 1 + 1e-9):
                    raise ValueError(f"hot.{key}: fraction {frac} outside (0, 1]")
            total = sum(f for _, f in quotas)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"hot.{key}: fractions sum to {total}, not 1")
        return self


class ShedPlan(TrimtabModel):
    """Keep fractions per drop location, with the numbers that justify them."""

    model_config = _FROZEN
    method: str = "none"
    locations: tuple[str, ...] = ()
    keep: tuple[float, ...] = ()
    objective: float = 0.0
    node_loads: dict[str, float] = Field(default_factory=dict)
    shadow_prices: dict[str, float] = Field(default_factory=dict)
    status: str = "optimal"
    solve_time_s: float = 0.0

    @model_validator(mode="after")
    def _check(self) -> ShedPlan:
        if len(self.keep) != len(self.locations):
            raise ValueError(f"keep: {len(self.keep)} values for {len(self.locations)} locations")
        for i, x in enumerate(self.keep):
            if not (math.isfinite(x) and -1e-9 <= x <= 1 + 1e-9):
                raise ValueError(f"keep.{i}: keep fraction {x} outside [0, 1]")
        return self

    def digest(self) -> str:
        """A short digest of what the plan drops: each location's keep fraction below 1 (a
        location kept whole drops nothing, named or not; the method and the numbers behind
        the fractions do not drop rows).

        Examples
        --------
        >>> a = ShedPlan(method="lp", locations=("s", "t"), keep=(0.5, 1.0), objective=3.0)
        >>> a.digest() == ShedPlan(method="uniform", locations=("s",), keep=(0.5,)).digest()
        True
        >>> ShedPlan().digest() == ShedPlan(locations=("s",), keep=(1.0,)).digest()
        True
        >>> a.digest() == ShedPlan(locations=("s",), keep=(0.25,)).digest()
        False
        """
        kept = zip(self.locations, self.keep, strict=True)
        drops = sorted((loc, round(k, 9)) for loc, k in kept if k < 1)
        return hashlib.sha1(json.dumps(drops).encode()).hexdigest()[:12]

    def keep_of(self, location: str, default: float = 1.0) -> float:
        """Keep fraction of ``location`` (``default`` when the plan does not name it)."""
        if location in self.locations:
            return min(1.0, max(0.0, self.keep[self.locations.index(location)]))
        return default


class HAPlan(TrimtabModel):
    """Availability settings: the policy and its parameters."""

    model_config = _FROZEN
    policy: Literal["none", "upstream", "passive", "active"] = "none"
    checkpoint_interval: int = Field(10, ge=1)
    standby: dict[str, str] = Field(default_factory=dict)


class ScalePlan(TrimtabModel):
    """How many nodes run: the first ``nodes`` of the placement's nodes, the rest released
    (0: every node, the plan does not scale).

    >>> ScalePlan(nodes=2).active(4), ScalePlan().active(2)
    (array([ True,  True, False, False]), array([ True,  True]))
    """

    model_config = _FROZEN
    nodes: int = Field(0, ge=0)

    def count(self, n: int) -> int:
        """Nodes running out of ``n``."""
        return min(self.nodes, n) if self.nodes else n

    def active(self, n: int) -> NDArray[np.bool_]:
        """Mask of the running nodes among ``n``."""
        return np.arange(n) < self.count(n)


class Plan(TrimtabModel):
    """A versioned plan: what the substrate applies, and why it was made."""

    model_config = _FROZEN
    schema_version: Literal[1] = 1
    version: int = Field(0, ge=0)
    # the controller's leadership epoch that made the plan (0: no lease, e.g. a replay); a plan
    # store that has seen epoch e refuses a plan from an older epoch (core.lease)
    epoch: int = Field(0, ge=0)
    placement: Placement
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    shed: ShedPlan = Field(default_factory=ShedPlan)
    ha: HAPlan = Field(default_factory=HAPlan)
    scale: ScalePlan = Field(default_factory=ScalePlan)
    # operator id -> parameters in effect from this plan on (a filter's predicate), over the
    # query's own; a batch pinned to this plan runs with them
    operators: dict[str, dict[str, float | str]] = Field(default_factory=dict)
    reason: str = ""
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("operators", mode="before")
    @classmethod
    def _no_boolean_parameter(cls, ops: Any) -> Any:
        """A parameter's ``true`` would be read as 1 (a filter on ``v > 1``)."""
        for op, params in ops.items() if isinstance(ops, dict) else ():
            for name, v in params.items() if isinstance(params, dict) else ():
                if isinstance(v, bool):
                    raise ValueError(f"{op}.{name}: {BOOLEAN}")
        return ops

    @model_validator(mode="after")
    def _on_running_nodes(self) -> Plan:
        k = self.scale.count(len(self.placement.nodes))
        off = [
            u
            for u, a in zip(self.placement.units, self.placement.assignment, strict=True)
            if a >= k
        ]
        if off:
            raise ValueError(
                f"placement: unit {off[0]!r} is on a node the plan releases "
                f"(scale.nodes = {self.scale.nodes})"
            )
        return self

    def to_json(self) -> str:
        """Serialize to JSON."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        """Parse and validate a plan from JSON."""
        return cls.model_validate_json(text)

    def next(self, **changes: Any) -> Plan:
        """A copy with ``changes`` applied and the version incremented."""
        data = self.model_dump()
        data.update(
            {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in changes.items()}
        )
        data["version"] = self.version + 1
        return Plan.model_validate(data)
