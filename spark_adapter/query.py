"""The query as the Spark pipeline runs it: a scenario's network compiled to one keyed stage.

Per-stream stateless operators (filters, maps, UDF costs) in front of one keyed windowed
operator; a stream's filters and maps apply in their chain's order (a map's ``expr``, see
``spark_adapter.expressions``, rewrites ``v``; a filter after it tests the mapped value): an aggregate (count/sum/avg/min/max of ``v``) or a windowed equi-join whose result is
counted per key and window. ``compile_query`` follows each stream's chain of stateless
operators to the keyed operator, collecting its side, per-row cost and filter predicates, and
names the operator when the network has a shape the pipeline cannot run. No pyspark import.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from core.scenario import OperatorModel, Scenario
from spark_adapter.expressions import Expr, parse

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
    map_ops: dict[str, str] = field(default_factory=dict)  # map id -> expression over v, c
    # stream -> its filters' and maps' ids in chain order (empty: ``predicates`` alone)
    steps: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # partition id -> factor on the keyed stage's CPU cost (heterogeneous partitions for
    # testing; a partition past the end has factor 1)
    slowdown: tuple[float, ...] = ()

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

    def chain(self, stream: str) -> list[tuple[str, Predicate | Expr]]:
        """``stream``'s filters (``("filter", predicate)``) and maps (``("map", expr)``) in
        chain order."""
        if stream not in self.steps:
            return [("filter", p) for p in self.predicates.get(stream, [])]
        return [
            ("filter", self.filter_ops[o])
            if o in self.filter_ops
            else ("map", parse(self.map_ops[o]))
            for o in self.steps[stream]
        ]

    def _walk_sql(self, stream: str) -> tuple[list[str], str]:
        """The filter conditions and the value of ``stream``'s rows, as Spark SQL."""
        env = {"v": "`v`", "c": "`c`"}
        conds = []
        for _kind, step in self.chain(stream):
            if isinstance(step, Expr):
                env = {**env, "v": step.sql(env)}
            else:
                col, op, val = step  # type: ignore[misc]
                conds.append(f"{env[col]} {op} {float(val)!r}")
        if env["v"] != "`v`":  # a row whose mapped value is not finite is dropped
            v = env["v"]
            conds.append(f"{v} IS NOT NULL AND NOT isnan({v}) AND abs({v}) < double('Infinity')")
        return conds, env["v"]

    def predicate_sql(self, stream: str) -> str:
        """The stateless filters of ``stream`` as a Spark SQL condition."""
        conds = self._walk_sql(stream)[0]
        return " AND ".join(conds) if conds else "true"

    def value_sql(self, stream: str) -> str:
        """The value ``v`` of ``stream``'s rows after its maps, as Spark SQL."""
        return self._walk_sql(stream)[1]

    @property
    def maps_values(self) -> bool:
        """True when some map changes some stream's values."""
        return any(self.value_sql(s) != "`v`" for s in self.sides)


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
        self.map_ops: dict[str, str] = {}
        self.steps: dict[str, tuple[str, ...]] = {}
        self._added: set[tuple[str, str]] = set()  # (operator, stream): a union adds once

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
        if (o.id, stream) in self._added:
            return
        self._added.add((o.id, stream))
        self.cost[stream] = self.cost.get(stream, 0.0) + o.cost_us
        if o.kind == "map":
            expr = str(o.params.get("expr", "v"))
            parse(expr, f"operators.{o.id}.params.expr")
            self.map_ops[o.id] = expr
            self.steps[stream] = (*self.steps.get(stream, ()), o.id)
        if o.kind == "filter" and {"column", "op", "value"} <= set(o.params):
            if o.params["op"] not in OPS:
                raise ValueError(
                    f"operators.{o.id}.params.op: unknown comparison {o.params['op']!r}"
                )
            pred = (str(o.params["column"]), str(o.params["op"]), float(o.params["value"]))
            self.predicates.setdefault(stream, []).append(pred)
            self.filter_ops[o.id] = pred
            self.filter_streams[o.id] = (*self.filter_streams.get(o.id, ()), stream)
            self.steps[stream] = (*self.steps.get(stream, ()), o.id)


def compile_query(scenario: Scenario, partition_speeds: tuple[float, ...] = ()) -> QuerySpec:
    """The keyed stage of a scenario's query network.

    ``partition_speeds`` (relative, by partition id) become the stage's per-partition CPU
    factors: partition i spends ``max(speeds) / speeds[i]`` times the operators' cost.

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
        map_ops=paths.map_ops,
        steps={s: paths.steps.get(s, ()) for s in paths.sides},
        slowdown=tuple(max(partition_speeds) / v for v in partition_speeds),
    )


FILTER_PARAMS = ("column", "op", "value")
COLUMNS = ("v", "c")  # the numeric columns of an input row a filter may test


def with_operator_params(q: QuerySpec, ops: dict[str, dict[str, float | str]]) -> QuerySpec:
    """The query with a plan's operator parameters in effect (``Plan.operators``): a filter's
    ``column``, ``op`` and ``value``, a map's ``expr`` (``spark_adapter.expressions``) and an
    aggregate's ``agg`` (one of ``AGGS``: windows emitted from then on) may change between
    batches; a change the keyed stage's state cannot take (its key or window, an aggregate the
    partials cannot give) or an unknown operator raises ``ValueError`` naming it.

    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 2, {"s": 0},
    ...               {"s": [("v", ">", 10.0)]}, filter_ops={"f": ("v", ">", 10.0)},
    ...               filter_streams={"f": ("s",)}, map_ops={"m": "v"}, steps={"s": ("m", "f")})
    >>> with_operator_params(q, {"f": {"value": 50}}).predicate_sql("s")
    '`v` > 50.0'
    >>> m = with_operator_params(q, {"m": {"expr": "v * 2"}})
    >>> m.value_sql("s"), m.predicate_sql("s").split(" AND ")[0]
    ('(`v` * 2.0D)', '(`v` * 2.0D) > 10.0')
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
    maps = dict(q.map_ops)
    agg = q.agg
    for op_id, params in ops.items():
        if op_id == q.op_id:
            agg = _keyed_params(q, params)
        elif op_id in preds:
            preds[op_id] = _filter_params(op_id, params, preds[op_id])
        elif op_id in maps:
            unknown = sorted(set(params) - {"expr"})
            if unknown:
                raise ValueError(f"operators.{op_id}.params.{unknown[0]}: a map takes expr")
            maps[op_id] = parse(
                params.get("expr", maps[op_id]), f"operators.{op_id}.params.expr"
            ).text  # type: ignore[arg-type]
        else:
            names = ", ".join(sorted({*preds, *maps})) or "none"
            raise ValueError(
                f"operators.{op_id}: not a filter or map of this query (they are: {names})"
            )
    predicates: dict[str, list[Predicate]] = {}
    for op_id, streams in q.filter_streams.items():
        for stream in streams:
            predicates.setdefault(stream, []).append(preds[op_id])
    return replace(q, predicates=predicates, filter_ops=preds, map_ops=maps, agg=agg)


def _filter_params(op_id: str, params: dict[str, float | str], pred: Predicate) -> Predicate:
    """A filter's new predicate from its published parameters."""
    col, cmp, val = pred
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
    return (col, cmp, val)


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
