"""The query as the Spark pipeline runs it: a scenario's network compiled to one keyed stage.

Per-stream stateless operators (filters, maps, UDF costs) in front of one keyed windowed
operator: an aggregate (count/sum/avg/min/max of ``v``) or a windowed equi-join whose result is
counted per key and window. ``compile_query`` follows each stream's chain of stateless
operators to the keyed operator, collecting its side, per-row cost and filter predicates, and
names the operator when the network has a shape the pipeline cannot run. No pyspark import.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from core.scenario import OperatorModel, Scenario

__all__ = ["OPS", "QuerySpec", "compile_query", "with_operator_params"]

Predicate = tuple[str, str, float]  # column, comparison, value
AGGS = ("count", "sum", "avg", "min", "max")  # what a pane's partials (cnt, sum, mn, mx) give

OPS = {
    ">": np.greater,
    ">=": np.greater_equal,
    "<": np.less,
    "<=": np.less_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


@dataclass(frozen=True)
class QuerySpec:
    """The compiled keyed stage."""

    op_id: str
    kind: str  # "aggregate" or "join"
    agg: str  # count, sum, avg, min, max (join: count of the join result)
    size_s: float
    slide_s: float
    key_groups: int
    sides: dict[str, int]  # stream -> side (join: 0 left, 1 right)
    predicates: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    cost_us: dict[str, float] = field(default_factory=dict)  # per input row, by stream
    merge_cost_us: float = 0.0  # per partial merged across partitions
    filter_ops: dict[str, Predicate] = field(default_factory=dict)  # filter id -> predicate
    filter_streams: dict[str, tuple[str, ...]] = field(default_factory=dict)  # -> its streams

    @property
    def panes_per_window(self) -> int:
        """Slides per window."""
        return max(1, round(self.size_s / self.slide_s))

    @property
    def costs_by_side(self) -> dict[int, float]:
        """Per-row CPU cost (us) of each side: the costliest of the streams feeding it."""
        return {
            side: max(self.cost_us.get(s, 0.0) for s, d in self.sides.items() if d == side)
            for side in set(self.sides.values())
        }

    def predicate_sql(self, stream: str) -> str:
        """The stateless filters of ``stream`` as a Spark SQL condition."""
        conds = [f"`{c}` {op} {float(v)!r}" for c, op, v in self.predicates.get(stream, [])]
        return " AND ".join(conds) if conds else "true"


class _PathWalk:
    """Follows the chains of stateless operators from the keyed operator back to the streams,
    collecting each stream's side, per-row cost and filter predicates."""

    def __init__(self, scenario: Scenario) -> None:
        self.ops = {o.id: o for o in scenario.operators}
        self.streams = [s.id for s in scenario.streams]
        self.sides: dict[str, int] = {}
        self.cost: dict[str, float] = {}
        self.predicates: dict[str, list[tuple[str, str, float]]] = {}
        self.filter_ops: dict[str, Predicate] = {}
        self.filter_streams: dict[str, tuple[str, ...]] = {}

    def walk(self, src: str, side: int) -> None:
        if src in self.streams:
            self.sides[src] = side
            self.cost.setdefault(src, 0.0)
            return
        o = self.ops[src]
        if o.kind in ("aggregate", "join"):
            raise ValueError(
                f"operators.{o.id}: only one keyed operator per path is supported on Spark"
            )
        if len(o.inputs) != 1 and o.kind != "union":
            raise ValueError(
                f"operators.{o.id}.inputs: stateless operators need one input on Spark"
            )
        for inp in o.inputs:
            self.walk(inp, side)
            for s in [s for s in self.streams if self.sides.get(s) == side]:
                self._add(o, s)

    def _add(self, o: OperatorModel, stream: str) -> None:
        self.cost[stream] = self.cost.get(stream, 0.0) + o.cost_us
        if o.kind == "filter" and {"column", "op", "value"} <= set(o.params):
            if o.params["op"] not in OPS:
                raise ValueError(
                    f"operators.{o.id}.params.op: unknown comparison {o.params['op']!r}"
                )
            pred = (str(o.params["column"]), str(o.params["op"]), float(o.params["value"]))
            self.predicates.setdefault(stream, []).append(pred)
            self.filter_ops[o.id] = pred
            self.filter_streams[o.id] = (*self.filter_streams.get(o.id, ()), stream)


def compile_query(scenario: Scenario) -> QuerySpec:
    """The keyed stage of a scenario's query network.

    Raises ``ValueError`` naming the operator when the network has a shape the Spark pipeline
    cannot run (no keyed windowed operator, or a keyed operator that is not windowed).
    """
    keyed = [o for o in scenario.operators if o.kind in ("aggregate", "join")]
    if not keyed:
        raise ValueError("operators: the Spark pipeline needs a keyed windowed aggregate or join")
    top = keyed[0]
    if top.window is None:
        raise ValueError(f"operators.{top.id}.window: a keyed operator needs a window on Spark")
    paths = _PathWalk(scenario)
    if top.kind == "join":
        if len(top.inputs) != 2:
            raise ValueError(f"operators.{top.id}.inputs: a join needs two inputs")
        paths.walk(top.inputs[0], 0)
        paths.walk(top.inputs[1], 1)
    else:
        for inp in top.inputs:
            paths.walk(inp, 0)
    per_row = top.cost_us + sum(
        o.cost_us for o in scenario.operators if o.kind in ("aggregate",) and o.id != top.id
    )
    cost = {s: paths.cost.get(s, 0.0) + per_row for s in paths.sides}
    agg = str(top.params.get("agg", "count")) if top.kind == "aggregate" else "count"
    if agg not in AGGS:
        raise ValueError(f"operators.{top.id}.params.agg: unknown aggregate {agg!r}")
    return QuerySpec(
        op_id=top.id,
        kind=top.kind,
        agg=agg,
        size_s=top.window.size_s,
        slide_s=top.window.slide_s,
        key_groups=top.key_groups,
        sides=paths.sides,
        predicates=paths.predicates,
        cost_us={**paths.cost, **cost},
        merge_cost_us=top.merge_cost_us,
        filter_ops=paths.filter_ops,
        filter_streams=paths.filter_streams,
    )


FILTER_PARAMS = ("column", "op", "value")
COLUMNS = ("v", "c")  # the numeric columns of an input row a filter may test


def with_operator_params(q: QuerySpec, ops: dict[str, dict[str, float | str]]) -> QuerySpec:
    """The query with a plan's operator parameters in effect (``Plan.operators``): a filter's
    ``column``, ``op`` and ``value`` and an aggregate's ``agg`` (one of ``AGGS``: windows
    emitted from then on) may change between batches; a change the keyed stage's state cannot
    take (its key or window, an aggregate the partials cannot give) or an unknown operator
    raises ``ValueError`` naming it.

    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 2, {"s": 0},
    ...               {"s": [("v", ">", 10.0)]}, filter_ops={"f": ("v", ">", 10.0)},
    ...               filter_streams={"f": ("s",)})
    >>> with_operator_params(q, {"f": {"value": 50}}).predicate_sql("s")
    '`v` > 50.0'
    >>> with_operator_params(q, {"agg": {"agg": "max"}}).agg
    'max'
    >>> with_operator_params(q, {"agg": {"agg": "median"}})
    Traceback (most recent call last):
    ...
    ValueError: operators.agg.params.agg: 'median' cannot be computed from the panes' partials (count, sum, min, max); one of count, sum, avg, min, max
    """
    if not ops:
        return q
    preds = dict(q.filter_ops)
    agg = q.agg
    for op_id, params in ops.items():
        if op_id == q.op_id:
            agg = _keyed_params(q, params)
            continue
        if op_id not in preds:
            raise ValueError(
                f"operators.{op_id}: not a filter of this query "
                f"(filters: {', '.join(sorted(preds)) or 'none'})"
            )
        col, cmp, val = preds[op_id]
        unknown = sorted(set(params) - set(FILTER_PARAMS))
        if unknown:
            raise ValueError(
                f"operators.{op_id}.params.{unknown[0]}: a filter takes {', '.join(FILTER_PARAMS)}"
            )
        col = str(params.get("column", col))
        cmp = str(params.get("op", cmp))
        if col not in COLUMNS:
            raise ValueError(f"operators.{op_id}.params.column: {col!r} is not one of {COLUMNS}")
        if cmp not in OPS:
            raise ValueError(f"operators.{op_id}.params.op: unknown comparison {cmp!r}")
        try:
            val = float(params.get("value", val))
        except (TypeError, ValueError):
            raise ValueError(
                f"operators.{op_id}.params.value: {params.get('value')!r} is not a number"
            ) from None
        preds[op_id] = (col, cmp, val)
    predicates: dict[str, list[Predicate]] = {}
    for op_id, streams in q.filter_streams.items():
        for stream in streams:
            predicates.setdefault(stream, []).append(preds[op_id])
    return replace(q, predicates=predicates, filter_ops=preds, agg=agg)


def _keyed_params(q: QuerySpec, params: dict[str, float | str]) -> str:
    """The keyed operator's new aggregate: any of the registered set, since a pane's state
    holds count, sum, min and max whatever is emitted; its key and window cannot change (the
    panes in flight were folded for them), nor a join's count."""
    other = sorted(set(params) - {"agg"})
    if other or q.kind != "aggregate":
        name = other[0] if other else "agg"
        raise ValueError(
            f"operators.{q.op_id}.params.{name}: cannot change while the operator holds state "
            "(its panes were folded for the current one); an aggregate's agg can"
        )
    agg = str(params["agg"])
    if agg not in AGGS:
        raise ValueError(
            f"operators.{q.op_id}.params.agg: {agg!r} cannot be computed from the panes' "
            f"partials (count, sum, min, max); one of {', '.join(AGGS)}"
        )
    return agg
