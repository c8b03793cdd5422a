from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement import baselines
from placement.feasible import feasible_set_ratio
from placement.rod import rod

CHAINS = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]])
EDGES = np.array([[0, 1], [2, 3]])


@pytest.mark.parametrize("seed", range(5))
def test_rod_returns_the_cut_plan(seed: int) -> None:
    a = rod(CHAINS, np.ones(2), EDGES, seed=seed)
    assert a[0] != a[1] and a[2] != a[3]


def test_slides_example_cut_beats_connected() -> None:
    cut = rod(CHAINS, np.ones(2), EDGES)
    conn = baselines.connected(np.ones(4), np.ones(2), EDGES)
    assert conn.tolist() == [0, 0, 1, 1]
    fc = feasible_set_ratio(CHAINS, cut, np.ones(2), points=2**16)
    fn = feasible_set_ratio(CHAINS, conn, np.ones(2), points=2**16)
    assert fc.ratio == pytest.approx(1.0, abs=0.005)
    assert fn.ratio == pytest.approx(0.5, abs=0.005)


def test_fractional_example() -> None:
    c = np.array([[2.0, 0], [1, 0], [0, 1], [0, 2]])
    exact = {(0, 1, 0, 1): 0.75, (0, 1, 1, 0): 0.5625, (0, 0, 1, 1): 0.5, (0, 0, 0, 1): 0.5625}
    for a, r in exact.items():
        assert feasible_set_ratio(c, np.array(a), np.ones(2), points=2**16).ratio == pytest.approx(
            r, abs=0.005
        )
    a = rod(c, np.ones(2), np.array([[0, 1], [2, 3]]))
    assert a[0] == a[2] and a[1] == a[3] and a[0] != a[1]


def test_ideal_plan_is_one_within_error() -> None:
    c = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    f = feasible_set_ratio(c, np.array([0, 1, 2]), np.ones(3))
    assert abs(f.ratio - 1.0) <= max(3 * f.error, 1e-9)


@given(st.integers(1, 3), st.integers(2, 4), st.integers(0, 100))
def test_ratio_properties(d: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = rng.random((6, d)) + 0.01
    a = rng.integers(0, n, 6)
    f = feasible_set_ratio(c, a, np.ones(n), points=2**10)
    assert 0.0 <= f.ratio <= 1.0
    all_one = feasible_set_ratio(c, np.zeros(6, dtype=np.int64), np.ones(n), points=2**12)
    assert all_one.ratio == pytest.approx((1 / n) ** d, abs=0.02)


@given(st.integers(1, 3), st.integers(2, 4), st.integers(0, 100), st.integers(0, 3))
def test_adding_capacity_never_shrinks_the_feasible_set(
    d: int, n: int, seed: int, node: int
) -> None:
    """Capacity added to a node never removes a feasible rate vector, so the feasible set's
    volume (ratio x the ideal set's volume, which grows with the total capacity as C_T^d)
    never falls. The ratio alone may fall: all units on node 0 and capacity added to node 1
    leaves the feasible set as it was while the ideal set grows."""
    rng = np.random.default_rng(seed)
    c = rng.random((6, d)) + 0.01
    a = rng.integers(0, n, 6)
    cap = np.ones(n)
    more = cap + np.eye(n)[node % n]
    base = feasible_set_ratio(c, a, cap, points=2**12)
    grown = feasible_set_ratio(c, a, more, points=2**12)
    tol = 3 * (base.error + grown.error) + 0.01
    assert grown.ratio * more.sum() ** d >= (base.ratio - tol) * cap.sum() ** d


def test_lower_bound_changes_the_plan_where_it_must() -> None:
    """Without the lower bound ROD's plan overloads a node at the rates b it must carry; with
    it, every node carries b (a case found by search: the two plans differ)."""
    c = np.array([[2.5, 2.9], [2.9, 2.5], [0.1, 0.3], [2.9, 1.6]])
    b = np.array([0.17, 0.01])

    def node_loads_at_b(a: np.ndarray) -> np.ndarray:
        out = np.zeros((2, 2))
        np.add.at(out, a, c)
        return out @ b

    plain = rod(c, np.ones(2))
    bounded = rod(c, np.ones(2), lower_bound=b)
    assert node_loads_at_b(plain).max() > 1.0  # the plain plan fails at b
    assert node_loads_at_b(bounded).max() <= 1.0  # the bounded plan carries b
    assert plain.tolist() != bounded.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_i_follows_each_nodes_share_of_the_capacity(seed: int) -> None:
    """A Class I node is one the unit fits within its share C_i / C_T: on nodes of capacity 4
    and 1, ten equal units go about 8 to 2 (with an equal share, 1 / n, they went 5 to 5 and
    the small node ran at four times the big one's utilisation)."""
    a = rod(np.ones((10, 1)), np.array([4.0, 1.0]), seed=seed)
    assert np.bincount(a, minlength=2)[0] >= 7, a


def test_baselines_place_each_once() -> None:
    load = np.array([3.0, 1.0, 2.0, 2.0])
    assert baselines.llf(load, np.ones(2)).tolist() == [0, 0, 1, 1]
    r = baselines.random_placement(7, 3, seed=1)
    assert sorted(np.bincount(r).tolist()) == [2, 2, 3]
    assert baselines.inter_node_arcs(EDGES, np.array([0, 1, 0, 0])) == 1
