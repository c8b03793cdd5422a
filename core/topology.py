"""The query network: streams, operators, key groups and the load-coefficient matrix.

An operator has a per-tuple CPU cost ``cost_us`` and a selectivity. Under the linear load
model of ROD (Xing, Hwang, Cetintemel, Zdonik, VLDB 2006) every operator's load is linear in
the input-stream rates: operator j costs ``l[j, k]`` CPU-seconds per tuple of stream k, found
by setting r_k = 1, propagating rates through the DAG (output = input x selectivity) and
summing ``input_rate x cost`` over every path (diamonds add up).

Keyed operators expand into one *placeable unit* per key group; a unit's coefficients are the
operator's coefficients times the key group's share of the key space. Placement, shedding and
the simulator all work on these units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from core.plans import unit_id

__all__ = ["OperatorSpec", "QueryNetwork", "TopologyError", "Units"]

OPERATOR_KINDS = ("filter", "map", "udf", "aggregate", "join", "union", "sink")


class TopologyError(ValueError):
    """A query network that is not a valid DAG over known streams and operators."""


@dataclass(frozen=True)
class OperatorSpec:
    """One query operator.

    Parameters
    ----------
    id : unique operator name
    kind : one of ``filter, map, udf, aggregate, join, union, sink``
    inputs : stream ids or operator ids feeding this operator
    cost_us : CPU microseconds per input tuple
    selectivity : output tuples per input tuple
    key_groups : number of key groups (1 for an unkeyed operator)
    weight : utility of one output tuple when this operator is a query output
    stream_cost_us : (stream, cost) pairs: the cost of a tuple arriving straight from that
        input stream, where it differs from ``cost_us`` (the Spark keyed stage, which spends
        each path's stateless operators where the path's rows fold)
    """

    id: str
    kind: str
    inputs: tuple[str, ...]
    cost_us: float
    selectivity: float = 1.0
    key_groups: int = 1
    weight: float = 1.0
    state_bytes_per_key_group: float = 0.0
    stream_cost_us: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Units:
    """The placeable units of a query network (one per operator key group).

    ``coeff[u, k]`` is unit u's CPU-seconds per tuple of stream k; ``op_index[u]`` is the
    operator that unit u belongs to; ``edges`` are (upstream unit, downstream unit) arcs.
    """

    ids: tuple[str, ...]
    op_index: NDArray[np.int64]
    coeff: NDArray[np.float64]
    edges: NDArray[np.int64]
    state_bytes: NDArray[np.float64]

    @property
    def m(self) -> int:
        """Number of units."""
        return len(self.ids)


@dataclass(frozen=True)
class QueryNetwork:
    """A DAG of operators over input streams, validated at construction.

    Examples
    --------
    >>> net = QueryNetwork(("s1",), (OperatorSpec("o1", "map", ("s1",), 2e6, 0.5),
    ...                             OperatorSpec("o2", "map", ("o1",), 1e6)))
    >>> net.load_coefficients().tolist()
    [[2.0], [0.5]]
    """

    streams: tuple[str, ...]
    operators: tuple[OperatorSpec, ...]
    _order: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if again := sorted({s for s in self.streams if self.streams.count(s) > 1}):
            raise TopologyError(f"streams: duplicate stream id {again[0]!r}")
        ids = [o.id for o in self.operators]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise TopologyError(f"operators: duplicate operator id {sorted(dup)[0]!r}")
        clash = set(ids) & set(self.streams)
        if clash:
            raise TopologyError(f"operators: id {sorted(clash)[0]!r} is also a stream id")
        known = set(ids) | set(self.streams)
        for i, op in enumerate(self.operators):
            if op.kind not in OPERATOR_KINDS:
                raise TopologyError(f"operators.{i}.kind: unknown kind {op.kind!r}")
            if not op.inputs:
                raise TopologyError(f"operators.{i}.inputs: operator {op.id!r} has no input")
            for src in op.inputs:
                if src not in known:
                    raise TopologyError(f"operators.{i}.inputs: unknown input {src!r}")
            if op.cost_us < 0 or op.selectivity < 0 or op.key_groups < 1:
                raise TopologyError(f"operators.{i}: negative cost/selectivity or key_groups < 1")
            for src, c in op.stream_cost_us:
                if src not in op.inputs or src not in self.streams or not c >= 0:
                    raise TopologyError(
                        f"operators.{i}.stream_cost_us: {src!r} is not an input stream of "
                        f"{op.id!r} with a cost of at least 0"
                    )
        object.__setattr__(self, "_order", self._topological_order())

    def _topological_order(self) -> tuple[int, ...]:
        index = {o.id: i for i, o in enumerate(self.operators)}
        indeg = [sum(1 for s in o.inputs if s in index) for o in self.operators]
        children: list[list[int]] = [[] for _ in self.operators]
        for i, o in enumerate(self.operators):
            for s in o.inputs:
                if s in index:
                    children[index[s]].append(i)
        ready = [i for i, d in enumerate(indeg) if d == 0]
        order: list[int] = []
        while ready:
            i = ready.pop(0)
            order.append(i)
            for c in children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) != len(self.operators):
            cyc = next(o.id for i, o in enumerate(self.operators) if i not in set(order))
            raise TopologyError(f"operators: cycle through operator {cyc!r}")
        return tuple(order)

    @property
    def op_ids(self) -> tuple[str, ...]:
        """Operator ids in declaration order."""
        return tuple(o.id for o in self.operators)

    def rate_coefficients(self, arc_keep: Mapping[str, float] | None = None) -> NDArray[np.float64]:
        """``(m, d)`` input rate of each operator per unit rate of each stream.

        ``arc_keep`` maps arc ids ``"src->dst"`` to the keep fraction of a drop placed on
        that arc (a drop just after a split); missing arcs keep everything.
        """
        keep = arc_keep or {}
        m, d = len(self.operators), len(self.streams)
        sidx = {s: k for k, s in enumerate(self.streams)}
        oidx = {o.id: i for i, o in enumerate(self.operators)}
        rate_in = np.zeros((m, d))
        for i in self._order:
            op = self.operators[i]
            for src in op.inputs:
                x = keep.get(f"{src}->{op.id}", 1.0)
                if src in sidx:
                    rate_in[i, sidx[src]] += x
                else:
                    j = oidx[src]
                    rate_in[i] += rate_in[j] * (self.operators[j].selectivity * x)
        return rate_in

    def load_coefficients(self, arc_keep: Mapping[str, float] | None = None) -> NDArray[np.float64]:
        """``(m, d)`` CPU-seconds of operator j per tuple of stream k (the ROD matrix L^o)."""
        return self.rate_coefficients(arc_keep) * self.cost_matrix()

    def cost_matrix(self) -> NDArray[np.float64]:
        """``(m, d)`` CPU-seconds of operator j per tuple it receives of stream k: its
        ``cost_us``, or its ``stream_cost_us`` for a stream it reads directly."""
        cost = np.repeat(
            np.array([o.cost_us for o in self.operators], dtype=float)[:, None] * 1e-6,
            len(self.streams),
            axis=1,
        )
        sidx = {s: k for k, s in enumerate(self.streams)}
        for i, o in enumerate(self.operators):
            for src, c in o.stream_cost_us:
                cost[i, sidx[src]] = c * 1e-6
        return cost

    def output_coefficients(
        self, arc_keep: Mapping[str, float] | None = None
    ) -> NDArray[np.float64]:
        """``(m, d)`` output tuples of each operator per tuple of each stream."""
        sel = np.array([o.selectivity for o in self.operators])
        return self.rate_coefficients(arc_keep) * sel[:, None]

    def weighted_output(self, arc_keep: Mapping[str, float] | None = None) -> NDArray[np.float64]:
        """``(d,)`` weighted query output per tuple of each stream (sum over sinks)."""
        out = self.output_coefficients(arc_keep)
        sinks = self.sinks()
        w = np.array([self.operators[i].weight for i in sinks])
        return np.asarray(w @ out[sinks], dtype=float) if sinks else np.zeros(len(self.streams))

    def sinks(self) -> list[int]:
        """Indices of operators that feed no other operator (the query outputs)."""
        used = {s for o in self.operators for s in o.inputs}
        return [i for i, o in enumerate(self.operators) if o.id not in used]

    def operator_edges(self) -> list[tuple[int, int]]:
        """(upstream, downstream) operator index pairs."""
        oidx = {o.id: i for i, o in enumerate(self.operators)}
        return [(oidx[s], i) for i, o in enumerate(self.operators) for s in o.inputs if s in oidx]

    def units(self, shares: Sequence[NDArray[np.float64]] | None = None) -> Units:
        """Expand operators into placeable units, one per key group.

        Parameters
        ----------
        shares : optional per-operator key-group shares, each ``(g,)`` (one share per key
            group, summing to 1) or ``(g, d)`` (a column per input stream, each summing to 1,
            when the streams' keys spread differently); uniform shares when omitted.
        """
        coeff = self.load_coefficients()
        ids: list[str] = []
        op_index: list[int] = []
        rows: list[NDArray[np.float64]] = []
        state: list[float] = []
        first: list[int] = []
        for i, op in enumerate(self.operators):
            g = op.key_groups
            share = np.full(g, 1.0 / g) if shares is None else np.asarray(shares[i], float)
            first.append(len(ids))
            for kg in range(g):
                ids.append(unit_id(op.id, kg, g))
                op_index.append(i)
                rows.append(coeff[i] * share[kg])
                state.append(op.state_bytes_per_key_group)
        edges: list[tuple[int, int]] = []
        for up, down in self.operator_edges():
            for a in range(self.operators[up].key_groups):
                for b in range(self.operators[down].key_groups):
                    edges.append((first[up] + a, first[down] + b))
        d = len(self.streams)
        return Units(
            ids=tuple(ids),
            op_index=np.asarray(op_index, dtype=np.int64),
            coeff=np.vstack(rows) if rows else np.zeros((0, d)),
            edges=np.asarray(edges, dtype=np.int64).reshape(-1, 2),
            state_bytes=np.asarray(state, dtype=float),
        )
