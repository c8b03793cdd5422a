"""The batch compiler: (plan, pin, query, drop floors) -> a frozen ``BatchSpec``.

Pure: no pyspark import. Everything a micro-batch decides before it touches a row is here, as
Spark SQL text: which rows are kept (deterministic drops, ``shedding.drops``; or whole windows,
``shedding.window_drops``), which pass the stateless filters, their key group and pane, which
partition each row goes to (the placement's key-group table, a split hot key's quotas, or
round-robin), and which output windows are emitted. The executor (``batch_executor``) applies
a spec; recovery and verification compile the same spec from the plan log, so a replayed or
restored batch decides exactly what its first attempt decided.

The uniforms are Spark's ``xxhash64`` shifted to 53 bits, the same numbers as
``shedding.drops.uniform_of`` computes in numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.plans import Plan, key_group_table
from shedding.drops import drop_seed
from shedding.window_drops import WINDOW_BATCH, block_size, floor_steps
from spark_adapter.actuator import BatchPin, PinRow
from spark_adapter.query import QuerySpec, with_operator_params

__all__ = [
    "ROUTE_SEED",
    "BatchSpec",
    "DropFloors",
    "compile_batch",
    "drop_floors",
    "every_key_split",
    "first_quota",
    "keep_sql",
    "plan_problem",
    "route_sql",
    "routed_partitions",
    "split_keys",
    "uniform_sql",
    "window_keep",
]

ROUTE_SEED = 77
Quotas = tuple[tuple[int, float], ...]


def uniform_sql(col: str, seed: int) -> str:
    """A uniform in [0, 1) from a stable hash of ``col``: the top 53 bits of ``xxhash64``.

    >>> uniform_sql("event_id", 77)
    '(CAST(shiftrightunsigned(xxhash64(event_id, CAST(77 AS BIGINT)), 11) AS DOUBLE) / 9007199254740992.0D)'
    """
    return (
        f"(CAST(shiftrightunsigned(xxhash64({col}, CAST({int(seed)} AS BIGINT)), 11) AS DOUBLE)"
        f" / {float(1 << 53)!r}D)"
    )


def _str(s: str) -> str:
    """A SQL string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def every_key_split(plan: Plan) -> bool:
    """Round-robin (``shuffle``) routing: every key's partials sit in every partition."""
    return plan.routing.partitioner == "shuffle"


def split_keys(plan: Plan) -> tuple[int, ...]:
    """Keys whose partials sit in several partitions and are merged on the driver (none under
    round-robin, where every key is split and merged on the cluster)."""
    if every_key_split(plan):
        return ()
    return tuple(sorted(int(k) for k in plan.routing.hot))


def first_quota(quotas: Quotas) -> int:
    """The partition a row with uniform 0 picks: the first quota with a positive share.

    >>> first_quota(((2, 0.0), (0, 0.6), (1, 0.4)))
    0
    """
    return next((int(p) for p, f in quotas if f > 0), int(quotas[-1][0]))


def _quota_pick(hot: dict[int, Quotas], u: str) -> str:
    """The quota whose cumulative share first exceeds the row's uniform ``u`` (the last takes
    the rest)."""
    entries = []
    for key, quotas in sorted(hot.items()):
        cum, arr = 0.0, []
        for i, (pid, frac) in enumerate(quotas):
            cum += frac
            hi = 2.0 if i == len(quotas) - 1 else cum
            arr.append(f"named_struct('hi', CAST({float(hi)!r} AS DOUBLE), 'pid', {int(pid)})")
        entries.append(f"CAST({int(key)} AS BIGINT), array({', '.join(arr)})")
    choices = f"element_at(map({', '.join(entries)}), key)"
    return f"element_at(filter({choices}, x -> x.hi > {u}), 1).pid"


def route_sql(plan: Plan, q: QuerySpec, partitions: int, *, state: bool = False) -> str:
    """The partition of a row (columns ``kg``, ``key``, ``event_id``; state rows: ``pid``).

    Round-robin (``shuffle``) spreads input rows by a hash of the event id and leaves state
    where it is. Otherwise a key group's partition is the placement's table and a split hot
    key picks a quota by the row's uniform; a split key's state waits at its first quota. One
    SQL string: one parse instead of a py4j call per literal.

    >>> from core.plans import Placement, RoutingConfig
    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 2, {"s": 0}, {}, {"s": 0.0})
    >>> placement = Placement(units=("agg#0", "agg#1"), nodes=("n0", "n1"), assignment=(1, 0))
    >>> p = Plan(placement=placement)
    >>> route_sql(p, q, 2)
    'CAST(element_at(array(1, 0), kg + 1) AS INT)'
    >>> hot = p.next(routing=RoutingConfig(num_partitions=2, hot={5: ((0, 0.5), (1, 0.5))}))
    >>> route_sql(hot, q, 2, state=True)
    'CAST(CASE WHEN key IN (CAST(5 AS BIGINT)) THEN element_at(map(CAST(5 AS BIGINT), 0), key) ELSE element_at(array(1, 0), kg + 1) END AS INT)'
    """
    if every_key_split(plan):
        if state:  # partial state stays where it is, unless its partition was released
            return f"CAST(pmod(pid, {partitions}) AS INT)"
        return f"CAST(pmod(xxhash64(event_id, CAST({ROUTE_SEED} AS BIGINT)), {partitions}) AS INT)"
    table = key_group_table(plan.placement, q.op_id, q.key_groups, partitions)
    cold = f"element_at(array({', '.join(str(p) for p in table)}), kg + 1)"
    hot = plan.routing.hot
    if not hot:
        return f"CAST({cold} AS INT)"
    keys = ", ".join(f"CAST({int(k)} AS BIGINT)" for k in sorted(hot))
    if state:
        first = ", ".join(
            f"CAST({int(k)} AS BIGINT), {first_quota(v)}" for k, v in sorted(hot.items())
        )
        pick = f"element_at(map({first}), key)"
    else:
        pick = _quota_pick(hot, uniform_sql("event_id", ROUTE_SEED))
    # the IN set (a hash set) keeps cold rows away from the map scan and the lambda
    return f"CAST(CASE WHEN key IN ({keys}) THEN {pick} ELSE {cold} END AS INT)"


def keep_sql(plan: Plan, q: QuerySpec, batch_id: int) -> str | None:
    """Deterministic tuple drops: keep a row when its uniform is below its stream's keep
    (None: every row is kept).

    >>> from core.plans import Placement, ShedPlan
    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 1, {"s": 0}, {}, {"s": 0.0})
    >>> p = Plan(placement=Placement(units=("agg",), nodes=("n0",), assignment=(0,)),
    ...     shed=ShedPlan(locations=("s",), keep=(0.25,)))
    >>> keep_sql(p, q, 3).endswith("< 0.25D)")
    True
    >>> keep_sql(p.next(shed=ShedPlan()), q, 3) is None
    True
    """
    conds = [
        f"(stream <> {_str(s)} OR {uniform_sql('event_id', drop_seed(batch_id))} < {keep!r}D)"
        for s in q.sides
        if (keep := float(q.keep_of(plan.shed, s))) < 1.0
    ]
    return " AND ".join(conds) if conds else None


def fork_sql(q: QuerySpec) -> str | None:
    """The path streams of an input row (``QuerySpec.forks``) as an array, its own stream
    where it has one path (None: no stream is split).

    >>> q = QuerySpec("a", "aggregate", "count", 4.0, 1.0, 2, {"s:f->m": 0, "s:f->n": 1, "t": 2},
    ...               forks={"s:f->m": ("s", ("f->m",)), "s:f->n": ("s", ("f->n",))})
    >>> fork_sql(q)
    "CASE stream WHEN 's' THEN array('s:f->m', 's:f->n') ELSE array(stream) END"
    """
    if not q.forks:
        return None
    cases = " ".join(
        f"WHEN {_str(s)} THEN array({', '.join(_str(v) for v in names)})"
        for s, names in q.fork_paths.items()
    )
    return f"CASE stream {cases} ELSE array(stream) END"


def filter_sql(q: QuerySpec) -> str:
    """Rows of the query's streams that pass their stateless filters."""
    return " OR ".join(f"(stream = {_str(s)} AND ({q.predicate_sql(s)}))" for s in q.sides)


def value_sql(q: QuerySpec) -> str:
    """An input row's value ``v`` after its stream's maps (``v`` when no map changes it).

    >>> from spark_adapter.query import QuerySpec
    >>> q = QuerySpec("a", "aggregate", "sum", 10.0, 1.0, 2, {"s": 0, "t": 0},
    ...               map_ops={"m": "v + 1"}, steps={"s": ("m",), "t": ()})
    >>> value_sql(q)
    "CASE stream WHEN 's' THEN (`v` + 1.0D) ELSE `v` END"
    """
    if not q.maps_values:
        return "`v`"
    cases = " ".join(f"WHEN {_str(s)} THEN {v}" for s in q.sides if (v := q.value_sql(s)) != "`v`")
    return f"CASE stream {cases} ELSE `v` END"


def pane_columns_sql(q: QuerySpec) -> dict[str, str]:
    """An input row's key group, side and pane, as SQL by column name."""
    sides = ", ".join(f"{_str(s)}, {i}" for s, i in q.sides.items())
    return {
        "kg": f"CAST(pmod(xxhash64(key, CAST(0 AS BIGINT)), {q.key_groups}) AS INT)",
        "side": f"CAST(element_at(map({sides}), stream) AS INT)",
        "pane": f"CAST(floor(ts / {float(q.slide_s)!r}D) AS BIGINT)",
    }


def window_keep(plan: Plan, q: QuerySpec) -> float:
    """A window's keep fraction under ``plan``: the smallest of its input streams'."""
    return min(float(q.keep_of(plan.shed, s)) for s in q.sides)


@dataclass(frozen=True)
class DropFloors:
    """``floor_j`` of a batch as a step function of the window start: ``value`` for starts up
    to ``threshold``, in order, else ``default`` (``shedding.window_drops``).

    >>> DropFloors(((10.0, 0.5),), 1.0).sql("s")
    'CASE WHEN s <= 10.0D THEN 0.5D ELSE 1.0D END'
    >>> DropFloors((), 0.7).sql("s")
    '0.7D'
    """

    steps: tuple[tuple[float, float], ...]
    default: float

    def sql(self, start: str) -> str:
        """The floor of the window starting at ``start`` (a SQL expression)."""
        if not self.steps:
            return f"{self.default!r}D"
        cases = " ".join(f"WHEN {start} <= {t!r}D THEN {v!r}D" for t, v in self.steps)
        return f"CASE {cases} ELSE {self.default!r}D END"


def drop_floors(
    batch_id: int,
    wm_prev: float,
    keep_now: float,
    pins: Sequence[PinRow],
    version_keep: Callable[[int], float],
    q: QuerySpec,
) -> DropFloors:
    """``floor_j`` in batch ``batch_id`` from the pinned watermarks and plans of the earlier
    batches (``version_keep``: a plan version's window keep). Only steps that windows still
    open in this batch (closing now or later) can reach are kept."""
    hist = [r for r in pins if r.batch_id <= batch_id]
    lo = (
        -math.inf
        if wm_prev == -math.inf
        else (math.floor((wm_prev - q.size_s) / q.slide_s + 1e-9) + 1) * q.slide_s
    )  # the earliest start of a window still open in this batch
    # earlier batches whose next watermark stayed below lo fed no window still open
    first = next((i for i in range(len(hist) - 1) if hist[i + 1].wm >= lo), len(hist) - 1)
    next_wm = [hist[i + 1].wm for i in range(first, len(hist) - 1)]
    keeps = [version_keep(hist[i].plan_version) for i in range(first, len(hist) - 1)]
    th, val, default = floor_steps(next_wm, keeps, keep_now)
    steps = tuple(
        (float(t), float(v))
        for i, (t, v) in enumerate(zip(th, val, strict=True))
        if math.isfinite(t) and not (i + 1 < len(val) and val[i + 1] == v)
    )
    return DropFloors(steps, float(default))


def window_tuple_sql(floors: DropFloors, q: QuerySpec) -> str:
    """Window drops: keep a row (by its ``pane``) iff one of its windows can still be emitted,
    ``u(block) < floor_j`` so far (``shedding.window_drops.floor_keep_mask``)."""
    w = q.panes_per_window
    blk = block_size(w)
    u = uniform_sql("bk", drop_seed(WINDOW_BATCH))
    lo = f"CAST(floor((pane - {w - 1}) / {blk}) AS BIGINT)"
    hi = f"CAST(floor(pane / {blk}) AS BIGINT)"
    start = f"(CAST(least(pane, (bk + 1) * {blk} - 1) AS DOUBLE) * {float(q.slide_s)!r}D)"
    return f"exists(sequence({lo}, {hi}), bk -> {u} < {floors.sql(start)})"


def window_emit_sql(floors: DropFloors, q: QuerySpec) -> str:
    """Window drops: emit window j (an 'O' row's ``pane``) only if ``u(j) < floor_j``."""
    start = f"(CAST(pane AS DOUBLE) * {float(q.slide_s)!r}D)"
    blk = block_size(q.panes_per_window)
    u = uniform_sql(f"CAST(floor(pane / {blk}) AS BIGINT)", drop_seed(WINDOW_BATCH))
    return f"{u} < {floors.sql(start)}"


@dataclass(frozen=True)
class BatchSpec:
    """Everything one micro-batch does to its rows, decided before it runs."""

    batch_id: int
    plan_version: int
    replay: bool
    partitions: int  # this batch's keyed partitions: those its routing names
    slots: int  # the pipeline's partitions (statistics arrays are this long)
    nodes: int  # the plan's running nodes (scale), whose executors the pipeline keeps
    wm_prev: float
    wm: float
    keep: tuple[tuple[str, float], ...]  # per (path) stream, as pinned
    fork: str | None  # an input row's path streams, one copy each (None: no split)
    input_keep: str | None  # tuple drops on the input rows (None: keep all)
    input_filter: str  # stream membership and stateless filters
    input_value: str  # an input row's value after its maps
    pane_columns: tuple[tuple[str, str], ...]  # kg, side, pane of an input row
    window_keep: str | None  # window drops on the input's panes (None: keep all)
    route: str  # an input row's partition
    state_route: str  # a state row's partition
    emit: str | None  # which 'O' rows are emitted (None: all)
    split_keys: tuple[int, ...]  # merged on the driver
    every_key_split: bool  # round-robin: merged on the cluster
    costs_by_side: tuple[tuple[int, float], ...]  # per-row CPU cost (us) of each side
    query: QuerySpec  # the keyed stage with the plan's operator parameters in effect
    twm_prev: float = -math.inf  # DPC's tentative watermarks (``spark_adapter.dpc``)
    twm: float = -math.inf

    @property
    def tentative(self) -> tuple[float, float] | None:
        """The tentative watermark pair when it closes windows beyond the stable one."""
        if self.twm > max(self.twm_prev, self.wm) and self.wm != math.inf:
            return self.twm_prev, self.twm
        return None


def routed_partitions(plan: Plan, q: QuerySpec, running: int) -> int:
    """The partitions a batch folds into: all ``running`` for round-robin; otherwise up to the
    highest one the key-group table or a hot key's quota names. A scale-out's first plan joins
    a node before placement spreads units on it (``controller.policy``): its batches keep the
    partitions they use, so the new executor starts with no task of theirs to wait for.

    >>> from core.plans import Placement, ScalePlan
    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 2, {"s": 0}, {}, {"s": 0.0})
    >>> joined = Plan(placement=Placement(units=("agg#0", "agg#1"), nodes=("n0", "n1"),
    ...                                   assignment=(0, 0)), scale=ScalePlan(nodes=2))
    >>> routed_partitions(joined, q, 2)
    1
    >>> spread = joined.next(placement=Placement(units=("agg#0", "agg#1"), nodes=("n0", "n1"),
    ...                                          assignment=(0, 1)))
    >>> routed_partitions(spread, q, 2)
    2
    """
    if every_key_split(plan):
        return running
    named = list(key_group_table(plan.placement, q.op_id, q.key_groups, running))
    named += [pid for quotas in plan.routing.hot.values() for pid, _ in quotas]
    return min(running, 1 + max(named, default=0))


def compile_batch(
    plan: Plan,
    pin: BatchPin,
    q: QuerySpec,
    partitions: int,
    floors: DropFloors | None = None,
) -> BatchSpec:
    """The batch spec of ``pin`` under ``plan``; ``floors`` switches to whole-window drops
    (``None``: tuple drops). ``partitions`` is the pipeline's; the batch folds into the plan's
    running share of them (``plan.scale``), the state of b - 1 re-routed in the same shuffle."""
    shed_windows = floors is not None and window_keep(plan, q) < 1.0
    q = with_operator_params(q, plan.operators)
    running = plan.scale.count(partitions)
    for key, quotas in plan.routing.hot.items():
        released = [pid for pid, _ in quotas if pid >= running]
        if released:
            raise ValueError(
                f"routing.hot.{key}: partition {released[0]} is released "
                f"(scale.nodes = {plan.scale.nodes})"
            )
    width = routed_partitions(plan, q, running)
    return BatchSpec(
        batch_id=pin.batch_id,
        plan_version=plan.version,
        replay=pin.replay,
        partitions=width,
        slots=partitions,
        nodes=running,
        wm_prev=pin.watermark_prev,
        wm=pin.watermark,
        keep=tuple((s, float(q.keep_of(plan.shed, s))) for s in q.sides),
        fork=fork_sql(q),
        input_keep=None if floors is not None else keep_sql(plan, q, pin.batch_id),
        input_filter=filter_sql(q),
        input_value=value_sql(q),
        pane_columns=tuple(pane_columns_sql(q).items()),
        window_keep=window_tuple_sql(floors, q) if shed_windows and floors else None,
        route=route_sql(plan, q, width),
        state_route=route_sql(plan, q, width, state=True),
        emit=window_emit_sql(floors, q) if floors is not None else None,
        split_keys=split_keys(plan),
        every_key_split=every_key_split(plan),
        costs_by_side=tuple(sorted(q.costs_by_side.items())),
        query=q,
        twm_prev=max(pin.tentative[0], pin.watermark_prev),
        twm=max(pin.tentative[1], pin.watermark),
    )


def plan_problem(plan: Plan, q: QuerySpec, partitions: int) -> str | None:
    """Why a pipeline of query ``q`` on ``partitions`` cannot run ``plan`` (None: it can): a
    plan made for another query (key groups or drop locations it does not have) or another
    partition count, as a controller steering another scenario publishes.

    >>> from core.plans import Placement
    >>> q = QuerySpec("agg", "aggregate", "count", 10.0, 1.0, 2, {"s": 0})
    >>> fits = Plan(placement=Placement(units=("agg#0", "agg#1"), nodes=("p0", "p1"),
    ...                                 assignment=(0, 1)))
    >>> plan_problem(fits, q, 2) is None
    True
    >>> plan_problem(fits, q, 4)
    'placement.nodes: the plan places key groups on 2 partitions; the pipeline runs 4'
    >>> plan_problem(fits.next(placement=fits.placement.model_copy(
    ...     update={"units": ("cnt#0", "cnt#1")})), q, 2)
    "placement: unit 'agg#0' missing"
    """
    nodes = len(plan.placement.nodes)
    if nodes != partitions:
        return (
            f"placement.nodes: the plan places key groups on {nodes} partitions; "
            f"the pipeline runs {partitions}"
        )
    arcs = {a for _, path in q.forks.values() for a in path}
    known = set(q.sides) | set(q.streams) | arcs
    for loc in plan.shed.locations:
        if loc not in known:
            return (
                f"shed.locations: {loc!r} is not a stream or split of this query "
                f"({', '.join(sorted(known))})"
            )
    pin = BatchPin(0, plan.version, -math.inf, -math.inf, False)
    try:
        compile_batch(plan, pin, q, partitions)
    except ValueError as e:
        return str(e)
    return None
