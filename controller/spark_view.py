"""The scenario as the Spark pipeline runs it, for the simulator and the Spark controller.

The pipeline (``spark_adapter.query``) compiles a network to one keyed stage: each input
stream's stateless operators (maps, filters, UDFs) run where its rows fold, on the partition of
their key group, and a split stream's rows are copied once per branch, a path stream each. The
Spark controller therefore sees one keyed operator reading one stream per path, each at its
path's cost per row (``keyed_stage``). The simulator, on the scenario's own network, places
each stateless operator on one node instead. ``spark_view`` gives the simulator the pipeline's
network: one stream per path (its input stream's rate process and keys) and the keyed operator,
so a calibrated replay predicts the load of Spark's partitions, not of a network Spark does not
run. A scenario that is already one keyed operator over its input streams is its own view.
"""

from __future__ import annotations

from pydantic import Field

from controller.scenario import ScenarioFile
from core.topology import OperatorSpec, QueryNetwork

__all__ = ["SparkView", "keyed_stage", "spark_view"]


def keyed_stage(
    op_id: str,
    key_groups: int,
    cost_us: dict[str, float],
    weight: float = 1.0,
    state_bytes_per_key_group: float = 0.0,
) -> QueryNetwork:
    """The pipeline's keyed stage as a network: one aggregate of ``key_groups`` reading the
    path streams of ``cost_us`` (in its order), each at its cost per row."""
    op = OperatorSpec(
        op_id,
        "aggregate",
        tuple(cost_us),
        max(cost_us.values()),
        1.0,
        key_groups,
        weight,
        state_bytes_per_key_group,
        stream_cost_us=tuple(cost_us.items()),
    )
    return QueryNetwork(tuple(cost_us), (op,))


class SparkView(ScenarioFile):
    """A scenario's Spark view (``spark_view``): its streams are the query's path streams, its
    one operator the keyed stage; ``network()`` and ``rate_sources()`` follow the pipeline."""

    path_cost_us: dict[str, float] = Field(default_factory=dict, exclude=True)
    path_source: dict[str, int] = Field(default_factory=dict, exclude=True)

    def network(self) -> QueryNetwork:
        """The keyed stage reading every path stream at its path's cost per row."""
        op = self.operators[0]
        cost = {s.id: self.path_cost_us[s.id] for s in self.streams}
        return keyed_stage(op.id, op.key_groups, cost, op.weight, op.state_bytes_per_key_group)

    def rate_sources(self) -> list[int]:
        """Each path stream follows its input stream's rate process (the rows are copies)."""
        first: dict[int, int] = {}
        for i, s in enumerate(self.streams):
            first.setdefault(self.path_source[s.id], i)
        return [first[self.path_source[s.id]] for s in self.streams]


def spark_view(scenario: ScenarioFile) -> ScenarioFile:
    """``scenario`` as the Spark pipeline runs it (the module's docstring); the scenario
    itself when it is already one keyed operator reading its input streams."""
    from spark_adapter.query import compile_query

    q = compile_query(scenario)
    keyed = next(o for o in scenario.operators if o.id == q.op_id)
    ids = [s.id for s in scenario.streams]
    if len(scenario.operators) == 1 and list(q.sides) == ids:
        return scenario
    by_id = {s.id: s for s in scenario.streams}
    streams = [by_id[q.stream_of(p)].model_copy(update={"id": p}) for p in q.sides]
    op = keyed.model_copy(update={"inputs": list(q.sides)})
    faults = []
    for f in scenario.faults:  # an unreachable input: every path of it
        if f.stream is None:
            faults.append(f)
        else:
            faults += [
                f.model_copy(update={"stream": p}) for p in q.sides if q.stream_of(p) == f.stream
            ]
    placement = scenario.controller.placement
    fixed = {k: v for k, v in placement.fixed.items() if k == keyed.id}
    controller = scenario.controller.model_copy(
        update={"placement": placement.model_copy(update={"fixed": fixed})}
    )
    body = scenario.model_dump(exclude={"streams", "operators", "faults", "controller"})
    return SparkView.model_validate(
        {
            **body,
            "base_dir": scenario.base_dir,
            "streams": streams,
            "operators": [op],
            "faults": faults,
            "controller": controller,
            "path_cost_us": {p: q.cost_us.get(p, 0.0) for p in q.sides},
            "path_source": {p: ids.index(q.stream_of(p)) for p in q.sides},
        }
    )
