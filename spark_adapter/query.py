"""The query as the Spark pipeline runs it: a scenario's network compiled to one keyed stage.

Per-stream stateless operators (filters, maps, UDF costs) in front of one keyed windowed
operator; a stream's filters and maps apply in their chain's order (a map's ``expr``, see
``spark_adapter.expressions``, rewrites ``v``; a filter after it tests the mapped value): an aggregate (count/sum/avg/min/max of ``v``) or a windowed equi-join whose result is
counted per key and window. ``compile_query`` follows each stream's chain of stateless
operators to the keyed operator, collecting its side, per-row cost and filter predicates, and
names the operator when the network has a shape the pipeline cannot run. No pyspark import.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np

from core.model_base import BOOLEAN
from core.plans import ShedPlan
from core.scenario import OperatorModel, Scenario
from spark_adapter.expressions import COLUMNS, Expr, parse

__all__ = [
    "OPS",
    "QuerySpec",
    "compile_query",
    "filter_predicate",
    "operator_params_problem",
    "with_operator_params",
]

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
    # a path stream of a split (``_PathWalk``) -> (its input stream, the split arcs on its path)
    forks: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def stream_of(self, s: str) -> str:
        """The input stream of ``s`` (a path stream or an input stream)."""
        return self.forks[s][0] if s in self.forks else s

    @property
    def streams(self) -> list[str]:
        """The input streams the stage reads, in order."""
        return list(dict.fromkeys(self.stream_of(s) for s in self.sides))

    @property
    def fork_paths(self) -> dict[str, list[str]]:
        """Each split input stream's path streams, in order (``forks`` inverted)."""
        by: dict[str, list[str]] = {}
        for name, (s, _) in self.forks.items():
            by.setdefault(s, []).append(name)
        return by

    def keep_of(self, shed: ShedPlan, s: str) -> float:
        """The keep fraction of path stream ``s`` under ``shed``: its own location when the
        plan names it (the Spark controller's), else the smallest of its input stream's and
        its split arcs' (a drop after a split keeps at most what reaches the split).

        >>> q = QuerySpec("a", "aggregate", "count", 4.0, 1.0, 2, {"s:f->m": 0, "s:f->n": 1},
        ...               forks={"s:f->m": ("s", ("f->m",)), "s:f->n": ("s", ("f->n",))})
        >>> shed = ShedPlan(locations=("s", "f->m"), keep=(0.8, 0.5))
        >>> q.keep_of(shed, "s:f->m"), q.keep_of(shed, "s:f->n"), q.streams
        (0.5, 0.8, ['s'])
        """
        if s in shed.locations or s not in self.forks:
            return shed.keep_of(s)
        real, arcs = self.forks[s]
        return min([shed.keep_of(real), *(shed.keep_of(a) for a in arcs)])

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


Path = tuple[str, tuple[str, ...]]  # a stream and the stateless operators from it to the keyed one


class _PathWalk:
    """Follows every path of stateless operators from the keyed operator back to the streams.

    A stream with one path keeps its id. A stream that reaches the keyed operator by several
    paths (a *split*: an operator, or the stream, with several consumers) gets one *path
    stream* per path, named ``"stream:a->b"`` by the split arcs on its path: its rows are
    copied once per path, each copy through its own chain (``QuerySpec.forks``)."""

    def __init__(self, scenario: Scenario) -> None:
        self.ops = {o.id: o for o in scenario.operators}
        self.streams = [s.id for s in scenario.streams]
        self.consumers: dict[str, list[str]] = {}
        for o in scenario.operators:
            for i in dict.fromkeys(o.inputs):
                self.consumers.setdefault(i, []).append(o.id)

    def paths(self, src: str) -> list[Path]:
        """The distinct paths from the streams to ``src``, each ending at ``src``."""
        if src in self.streams:
            return [(src, ())]
        o = self.ops[src]
        if o.kind in ("aggregate", "join"):
            raise ValueError(
                f"operators.{o.id}: only one keyed operator per path is supported on Spark"
            )
        if len(o.inputs) != 1 and o.kind != "union":
            raise ValueError(
                f"operators.{o.id}.inputs: stateless operators need one input on Spark"
            )
        found = [(s, (*chain, o.id)) for inp in o.inputs for s, chain in self.paths(inp)]
        return list(dict.fromkeys(found))  # a union of one input twice adds it once

    def split_arcs(self, path: Path, top: str) -> tuple[str, ...]:
        """The arcs of ``path`` (into ``top``) that leave a node with several consumers."""
        nodes = [path[0], *path[1], top]
        return tuple(f"{a}->{b}" for a, b in pairwise(nodes) if len(self.consumers.get(a, ())) > 1)

    def spec(self, top: OperatorModel) -> dict[str, Any]:
        """The per-path fields of the ``QuerySpec`` for keyed operator ``top``: sides (a
        join's input index; an aggregate's path index, which the fold charges by and merges
        away), per-row costs of the stateless operators, predicates, filters, maps, steps and
        forks."""
        per_side = [self.paths(inp) for inp in top.inputs]
        count = Counter(s for ps in per_side for s, _ in ps)
        out: dict[str, Any] = {
            k: {}
            for k in ("sides", "cost", "predicates", "filter_ops", "map_ops", "steps", "forks")
        }
        filter_streams: dict[str, list[str]] = {}
        for side, ps in enumerate(per_side):
            for s, chain in ps:
                name = s
                if count[s] > 1:
                    arcs = self.split_arcs((s, chain), top.id)
                    name = f"{s}:{','.join(arcs) or side}"
                    if name in out["sides"]:
                        name = f"{name}#{len(out['sides'])}"
                    out["forks"][name] = (s, arcs)
                out["sides"][name] = side if top.kind == "join" else len(out["sides"])
                out["cost"][name] = sum(self.ops[o].cost_us for o in chain)
                out["steps"][name] = self._steps(name, chain, out, filter_streams)
        out["filter_streams"] = {k: tuple(v) for k, v in filter_streams.items()}
        return out

    def _steps(
        self, name: str, chain: tuple[str, ...], out: dict[str, Any], fs: dict[str, list[str]]
    ) -> tuple[str, ...]:
        """The filters and maps of ``chain`` for path stream ``name``, recorded in ``out``."""
        steps: list[str] = []
        for op_id in chain:
            o = self.ops[op_id]
            if o.kind == "map":
                expr = str(o.params.get("expr", "v"))
                parse(expr, f"operators.{o.id}.params.expr")
                out["map_ops"][o.id] = expr
                steps.append(o.id)
            if o.kind == "filter" and (pred := filter_predicate(o.id, o.params)) is not None:
                out["predicates"].setdefault(name, []).append(pred)
                out["filter_ops"][o.id] = pred
                fs.setdefault(o.id, []).append(name)
                steps.append(o.id)
        return tuple(steps)


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
    if top.kind == "join" and len(top.inputs) != 2:
        raise ValueError(f"operators.{top.id}.inputs: a join needs two inputs")
    paths = _PathWalk(scenario).spec(top)
    per_row = top.cost_us + sum(
        o.cost_us for o in scenario.operators if o.kind in ("aggregate",) and o.id != top.id
    )
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
        sides=paths["sides"],
        predicates=paths["predicates"],
        cost_us={s: c + per_row for s, c in paths["cost"].items()},
        merge_cost_us=top.merge_cost_us,
        filter_ops=paths["filter_ops"],
        filter_streams=paths["filter_streams"],
        map_ops=paths["map_ops"],
        steps=paths["steps"],
        slowdown=tuple(max(partition_speeds) / v for v in partition_speeds),
        forks=paths["forks"],
    )


FILTER_PARAMS = ("column", "op", "value")


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
            preds[op_id] = filter_predicate(op_id, params, preds[op_id])  # type: ignore[assignment]
        elif op_id in maps:
            unknown = sorted(set(params) - {"expr"})
            if unknown:
                raise ValueError(f"operators.{op_id}.params.{unknown[0]}: a map takes expr")
            maps[op_id] = parse(
                params.get("expr", maps[op_id]), f"operators.{op_id}.params.expr"
            ).text  # type: ignore[arg-type]
        else:
            keyed = [q.op_id] if q.kind == "aggregate" else []  # a join's count cannot change
            names = ", ".join(sorted({*preds, *maps}) + keyed)
            raise ValueError(
                f"operators.{op_id}: not an operator whose parameters can change (this query's "
                f"are: {names})"
            )
    predicates: dict[str, list[Predicate]] = {}
    for op_id, streams in q.filter_streams.items():
        for stream in streams:
            predicates.setdefault(stream, []).append(preds[op_id])
    return replace(q, predicates=predicates, filter_ops=preds, map_ops=maps, agg=agg)


def operator_params_problem(operators: Sequence[OperatorModel]) -> str | None:
    """The first parameter the Spark pipeline would read wrongly, as one line, or None: a
    filter's predicate (``filter_predicate``), a map's ``expr`` (nothing else: a misspelt
    ``expr`` ran the map as ``v``), an aggregate's ``agg``. Checked when the scenario is read,
    so ``validate`` and a simulator replay name it too, not only a Spark run."""
    for o in operators:
        where = f"operators.{o.id}.params"
        try:
            if o.kind == "filter":
                filter_predicate(o.id, o.params)
            elif o.kind == "map":
                if unknown := sorted(set(o.params) - {"expr"}):
                    return f"{where}.{unknown[0]}: a map takes expr"
                parse(str(o.params.get("expr", "v")), f"{where}.expr")
            elif o.kind == "aggregate" and (agg := o.params.get("agg", "count")) not in AGGS:
                return f"{where}.agg: unknown aggregate {agg!r}; one of {', '.join(AGGS)}"
        except ValueError as e:
            return str(e)
    return None


def filter_predicate(
    op_id: str, params: Mapping[str, Any], base: Predicate | None = None
) -> Predicate | None:
    """A filter's predicate from its parameters: a scenario's (``base`` None: all of
    ``column``, ``op`` and ``value``, or none for a filter the simulator alone models by its
    selectivity, which passes every row on Spark) or a published change over ``base``, the
    predicate in effect. ``ValueError`` names the parameter: an unknown one, a column that is
    not a row's, a comparison not in ``OPS``, a value that is not a finite number (a boolean is
    not one: YAML's ``yes`` and JSON's ``true`` read as 1).

    >>> filter_predicate("f", {"column": "v", "op": ">", "value": "10"})
    ('v', '>', 10.0)
    >>> filter_predicate("f", {"value": 50}, ("v", ">", 10.0))
    ('v', '>', 50.0)
    >>> filter_predicate("f", {}) is None
    True
    >>> filter_predicate("f", {"column": "v", "op": ">", "value": True})
    Traceback (most recent call last):
    ...
    ValueError: operators.f.params.value: a number is needed, not a boolean (true/false, yes/no, on/off)
    """
    where = f"operators.{op_id}.params"
    unknown = sorted(set(params) - set(FILTER_PARAMS))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: a filter takes {', '.join(FILTER_PARAMS)}")
    if base is None:
        if not params:
            return None
        missing = [k for k in FILTER_PARAMS if k not in params]
        if missing:
            raise ValueError(
                f"{where}.{missing[0]}: missing; a filter's predicate needs "
                f"{', '.join(FILTER_PARAMS)} (or no params: it then passes every row on Spark)"
            )
    col, cmp, val = base if base is not None else (None, None, None)
    col, cmp, raw = params.get("column", col), params.get("op", cmp), params.get("value", val)
    if col not in COLUMNS:
        raise ValueError(f"{where}.column: {col!r} is not one of {COLUMNS}")
    if cmp not in OPS:
        raise ValueError(f"{where}.op: unknown comparison {cmp!r}; one of {', '.join(OPS)}")
    if isinstance(raw, bool):
        raise ValueError(f"{where}.value: {BOOLEAN}")
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{where}.value: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}.value: {raw!r} is not a finite number")
    return (str(col), str(cmp), value)


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
