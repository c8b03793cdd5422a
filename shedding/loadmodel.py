"""The shedding load model: drop locations and their per-node load coefficients.

Aurora / Staying FIT (Tatbul, Cetintemel, Zdonik, VLDB 2003 and 2007): drops go at the inputs
and just after split points (arcs leaving an operator with several consumers). For drop
location i, ``L[i, j]`` is the CPU-seconds on node j per tuple arriving at i, counting the
operators that location controls (selectivities along the path multiplied in); ``gain[i]`` is
the weighted query output per tuple arriving at i. A split drop's effective keep fraction
``z_b`` is charged for the operators below the split, its parent's ``x_a`` above it, and the
LP adds ``z_b <= x_a``. Splits are taken at the top level only: a split nested below another
split's branch is charged to the outer location (documented limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from core.topology import QueryNetwork

__all__ = ["ShedModel", "build_model", "placement_matrix"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class ShedModel:
    """Drop locations with their loads, rates, gains and parent relation.

    ``locations[i]`` is a stream id (input drop) or ``"a->b"`` (drop after a split);
    ``load[i, j]`` CPU-seconds per tuple on node j; ``rate[i]`` tuples/s reaching i without
    shedding; ``gain[i]`` weighted output per tuple; ``parent[i]`` the input location above a
    split drop (-1 for inputs); ``background[j]`` load no location controls.
    """

    locations: tuple[str, ...]
    load: Array
    rate: Array
    gain: Array
    parent: NDArray[np.int64]
    background: Array


def placement_matrix(
    net: QueryNetwork, unit_op: NDArray[np.int64], unit_node: NDArray[np.int64], n: int
) -> Array:
    """``(n, ops)`` share of each operator's work on each node (key groups split it evenly)."""
    g = np.array([o.key_groups for o in net.operators], dtype=float)
    out = np.zeros((n, len(net.operators)))
    np.add.at(out, (unit_node, unit_op), 1.0 / g[unit_op])
    return out


def build_model(net: QueryNetwork, share: Array, rates: Array) -> ShedModel:
    """Drop locations, per-node loads and gains for a placement.

    ``share`` is the ``(n, ops)`` matrix of ``placement_matrix``; ``rates`` the input rates.
    """
    n = share.shape[0]
    d = len(net.streams)
    consumers: dict[str, list[str]] = {}
    for o in net.operators:
        for s in o.inputs:
            consumers.setdefault(s, []).append(o.id)
    splits = [
        (a, b) for a, cs in consumers.items() if a not in net.streams and len(cs) > 1 for b in cs
    ]
    cost_s = net.cost_matrix()  # (m, d)
    base_rate = net.rate_coefficients()  # (m, d)
    base_out = net.weighted_output()
    onehot = share
    locs: list[str] = list(net.streams)
    load_rows = [onehot @ (base_rate[:, k] * cost_s[:, k]) for k in range(d)]
    rate = list(rates)
    gain = list(base_out)
    parent = [-1] * d
    for a, b in splits:
        # operators below arc a->b get z_b instead of x_a: difference of coefficients
        arc = {f"{a}->{b}": 0.0}
        below_rate = base_rate - net.rate_coefficients(arc)  # what the arc carries, per stream
        below_out = base_out - net.weighted_output(arc)
        k = int(np.argmax(below_rate.sum(axis=0)))  # the input stream feeding this split
        locs.append(f"{a}->{b}")
        row = onehot @ (below_rate[:, k] * cost_s[:, k])
        load_rows[k] = load_rows[k] - row
        load_rows.append(row)
        rate.append(float(rates[k]))
        gain[k] -= below_out[k]
        gain.append(float(below_out[k]))
        parent.append(k)
    return ShedModel(
        locations=tuple(locs),
        load=np.maximum(np.array(load_rows, dtype=float).reshape(len(locs), n), 0.0),
        rate=np.asarray(rate, dtype=float),
        gain=np.asarray(gain, dtype=float),
        parent=np.asarray(parent, dtype=np.int64),
        background=np.zeros(n),
    )
