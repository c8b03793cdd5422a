from __future__ import annotations

import numpy as np
import pytest

from core.topology import OperatorSpec, QueryNetwork, TopologyError


def op(i: str, inputs: tuple[str, ...], cost: float, sel: float = 1.0, g: int = 1) -> OperatorSpec:
    return OperatorSpec(i, "map", inputs, cost, sel, g)


def test_chain_coefficients() -> None:
    net = QueryNetwork(("s1",), (op("o1", ("s1",), 2e6, 0.5), op("o2", ("o1",), 1e6)))
    np.testing.assert_allclose(net.load_coefficients(), [[2.0], [0.5]])


def test_diamond_adds_paths() -> None:
    net = QueryNetwork(
        ("s",),
        (
            op("a", ("s",), 1e6),
            op("b", ("a",), 1e6, 0.5),
            op("c", ("a",), 1e6),
            op("d", ("b", "c"), 1e6),
        ),
    )
    assert net.load_coefficients()[3, 0] == pytest.approx(1.5)


def test_arc_keep_scales_branch_only() -> None:
    net = QueryNetwork(("s",), (op("a", ("s",), 1e6), op("b", ("a",), 1e6), op("c", ("a",), 1e6)))
    c = net.load_coefficients({"a->b": 0.25})
    np.testing.assert_allclose(c[:, 0], [1.0, 0.25, 1.0])


def test_units_expand_key_groups_and_edges() -> None:
    net = QueryNetwork(("s",), (op("a", ("s",), 1e6), op("b", ("a",), 2e6, g=4)))
    u = net.units()
    assert u.m == 5 and u.ids[1] == "b#0"
    np.testing.assert_allclose(u.coeff[1:, 0], [0.5] * 4)
    assert len(u.edges) == 4


@pytest.mark.parametrize(
    ("ops", "msg"),
    [
        ((op("a", ("zz",), 1),), "unknown input"),
        ((op("a", ("b",), 1), op("b", ("a",), 1)), "cycle"),
        ((op("a", ("s",), 1), op("a", ("s",), 1)), "duplicate"),
        ((op("s", ("s",), 1),), "also a stream"),
    ],
)
def test_invalid_networks(ops: tuple[OperatorSpec, ...], msg: str) -> None:
    with pytest.raises(TopologyError, match=msg):
        QueryNetwork(("s",), ops)


def test_a_stream_given_twice_is_named() -> None:
    with pytest.raises(TopologyError, match="streams: duplicate stream id 't'"):
        QueryNetwork(("s", "t", "t"), (op("a", ("s",), 1),))
