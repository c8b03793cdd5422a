"""A scenario file as the controller reads it: the physical scenario (``core.scenario``: cluster,
streams, query network, faults, simulator constants) plus the ``controller:`` block (one
``ControllerSettings``), the ``expect:`` block (checks on a replay's summary) and the ``spark:``
block (how a Spark replay runs on one machine).

``load_scenario`` validates the whole file; every problem names its dotted field and value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from controller.placement_params import (
    method_problem,
    pin_problem,
    placement_problem,
    window_problem,
)
from controller.settings import ControllerSettings
from core.footprint import footprint_problem, machine_memory
from core.model_base import STRICT, TrimtabModel
from core.scenario import Scenario, ScenarioError, load_model
from spark_adapter.query import operator_params_problem

__all__ = ["Expectations", "ScenarioFile", "SparkSettings", "load_scenario"]


class Expectations(TrimtabModel):
    """Optional checks on a replay's summary."""

    model_config = STRICT
    max_mean_latency_s: float | None = Field(None, gt=0)
    max_p99_latency_s: float | None = Field(None, gt=0)
    zero_lost_tuples: bool = False
    max_dropped_fraction: float | None = Field(None, ge=0, le=1)


class SparkSettings(TrimtabModel):
    """How a Spark replay of the scenario runs on one machine."""

    model_config = STRICT
    # relative speed of each executor, by executor id ("0", "1", ...): executor i spends
    # max(speeds) / speeds[i] times the operators' CPU cost (heterogeneous executors on one
    # machine; honoured on local-cluster and standalone masters, where executors have ids)
    executor_speeds: tuple[float, ...] = ()
    # relative speed of each partition of the keyed stage, by partition id: the task that
    # runs partition i spends max(speeds) / speeds[i] times the operators' CPU cost, on
    # whichever executor Spark schedules it (any master)
    partition_speeds: tuple[float, ...] = ()

    @model_validator(mode="after")
    def _positive(self) -> SparkSettings:
        for name in ("executor_speeds", "partition_speeds"):
            for i, v in enumerate(getattr(self, name)):
                if not v > 0:
                    raise ValueError(f"spark.{name}.{i}: must be > 0 (got {v})")
        if self.executor_speeds and self.partition_speeds:
            raise ValueError(
                "spark.partition_speeds: give executor_speeds or partition_speeds, not both"
            )
        return self

    def slowdowns(self) -> dict[str, float]:
        """Executor id -> factor on the operators' CPU cost (the fastest executor: 1)."""
        top = max(self.executor_speeds, default=1.0)
        return {str(i): top / v for i, v in enumerate(self.executor_speeds)}


class ScenarioFile(Scenario):
    """A replayable scenario with the controller's settings and the run's expectations."""

    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    expect: Expectations = Field(default_factory=Expectations)
    spark: SparkSettings = Field(default_factory=SparkSettings)

    @model_validator(mode="after")
    def _known_methods(self) -> ScenarioFile:
        p = self.controller.placement
        bad = method_problem({"method": p.method, "initial": p.initial}) or placement_problem(
            p.method, p.initial, p.params, p.fixed
        )
        if bad is not None:
            raise ValueError(f"controller.placement.{bad}")
        if bad := window_problem(p.method, p.initial, p.params, self.controller.window_k):
            raise ValueError(f"controller.window_k: {bad}")
        return self

    @model_validator(mode="after")
    def _operator_params(self) -> ScenarioFile:
        """The parameters the Spark pipeline reads (a filter's predicate, a map's expression,
        an aggregate's function), checked on reading: a misspelt or boolean one ran as
        something else."""
        if (bad := operator_params_problem(self.operators)) is not None:
            raise ValueError(bad)
        return self

    @model_validator(mode="after")
    def _fixed_references(self) -> ScenarioFile:
        nodes = {n.id for n in self.cluster.nodes}
        ops = {o.id for o in self.operators}
        if (bad := pin_problem(self.controller.placement.fixed, ops, nodes)) is not None:
            raise ValueError(f"controller.placement.{bad}")
        return self

    @model_validator(mode="after")
    def _scaling_bounds(self) -> ScenarioFile:
        sc, n = self.controller.scaling, len(self.cluster.nodes)
        for field, k in (("max_nodes", sc.max_nodes), ("min_nodes", sc.min_nodes)):
            if sc.enabled and k is not None and k > n:
                raise ValueError(f"controller.scaling.{field}: {k} exceeds the cluster's {n} nodes")
        return self

    @model_validator(mode="after")
    def _rounds_on_ticks(self) -> ScenarioFile:
        """A control round falls on a tick: an interval of 2.5 ticks ran every 2, unsaid. The
        default interval (10 s) is left to the nearest whole number of ticks, at least one."""
        if "interval_s" not in self.controller.model_fields_set:
            return self
        iv, tick = self.controller.interval_s, self.tick_s
        ticks = iv / tick
        if ticks < 1 - 1e-9 or abs(ticks - round(ticks)) > 1e-9 * ticks:
            raise ValueError(
                f"controller.interval_s: {iv:g} s is not a whole number of ticks (tick_s "
                f"{tick:g} s), and a control round falls on a tick"
            )
        return self

    def with_controller(self, **changes: Any) -> ScenarioFile:
        """A copy whose controller settings have ``changes`` (nested models as models)."""
        return self.model_copy(update={"controller": self.controller.model_copy(update=changes)})


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> ScenarioFile:
    """Read and validate a scenario file (YAML or JSON); raises ``core.scenario.ScenarioError``
    with one line per problem, among them a scenario whose replay would not fit this machine's
    memory (``simulator.footprint``)."""
    sc = load_model(path, ScenarioFile, overrides)
    if problem := footprint_problem(sc, machine_memory()):
        raise ScenarioError(str(path), [problem])
    return sc
