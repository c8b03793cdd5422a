"""Migration-aware moves: gain against pause, and naming a new plan's nodes to move little."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement import correlation as C
from placement.migration_cost import closest_labels, expected_gain, overload, pause_cost

T = np.arange(10)
UP = 0.5 + 0.5 * np.sin(2 * np.pi * T / 10)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 8), st.integers(1, 40))
def test_a_renamed_copy_of_the_current_plan_moves_nothing(seed: int, n: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    current = rng.integers(0, n, m)
    perm = rng.permutation(n)
    renamed = closest_labels(perm[current], current, rng.random(m) + 0.01, np.ones(n))
    assert renamed.tolist() == current.tolist()


def test_names_map_only_between_nodes_of_equal_capacity() -> None:
    # node 2 is twice as large: the plan's node-2 group must stay on node 2 although moving
    # it to node 0 would keep more units in place
    cap = np.array([1.0, 1.0, 2.0])
    current = np.array([0, 0, 0, 1, 2])
    target = np.array([2, 2, 2, 0, 1])
    out = closest_labels(target, current, np.ones(5), cap)
    assert out[:3].tolist() == [2, 2, 2]
    assert out[3] == 1 and out[4] == 0  # the two equal nodes are renamed to keep units 3, 4


def test_the_gain_counts_only_load_above_the_threshold() -> None:
    x = np.stack([0.5 * UP + 0.2, 0.5 * (1 - UP) + 0.2, np.full(10, 0.3)])
    cap = np.ones(2)
    together, apart = np.array([0, 0, 1]), np.array([0, 1, 1])
    # together: node 0 is flat at 0.9, at the threshold; apart, each node swings to 1.0
    assert overload(np.stack([x[0] + x[1], x[2]]), cap) == 0.0
    assert expected_gain(x, together, apart, cap) < 0  # moving makes the peaks queue
    assert expected_gain(x, apart, together, cap) > 0
    # nothing near the threshold: a move gains nothing, whatever it does to the variance
    light = 0.3 * x
    assert expected_gain(light, together, apart, cap) == 0.0


def test_the_pause_is_each_moved_units_pause_times_its_load() -> None:
    x = np.array([[0.2, 0.4], [0.5, 0.5], [1.0, 1.0]])
    pause = np.array([0.5, 2.0, 0.5])
    cost = pause_cost(x, np.array([0, 0, 1]), np.array([1, 1, 1]), pause)
    assert cost == 0.5 * 0.3 + 2.0 * 0.5


def _pair(level: float) -> tuple[np.ndarray, np.ndarray]:
    """Node 0 holds three in-phase units, node 1 one anti-phase unit: a mean gap over 0.2."""
    x = level * np.stack([UP, UP, UP, 1 - UP])
    return x, np.array([0, 0, 0, 1])


def test_a_balancing_move_without_overload_is_held_with_its_numbers() -> None:
    x, a = _pair(0.2)  # node 0 peaks at 0.6: below 0.9, nothing queues
    ok, moves, info = C.balance_pair(x, a, 0, 1, np.ones(2), "oneway", pause_s=np.full(4, 0.5))
    assert not ok and moves == [] and a.tolist() == [0, 0, 0, 1]
    assert info["worth_it"] == 0.0 and info["gain_cpu_s"] == 0.0 < info["pause_cpu_s"]
    # the same pair without a pause model: Borealis's rule alone accepts the move
    ok, moves, _ = C.balance_pair(x, a.copy(), 0, 1, np.ones(2), "oneway")
    assert ok and moves


def test_a_move_that_relieves_an_overloaded_node_is_made() -> None:
    x, a = _pair(0.45)  # node 0 peaks at 1.35
    ok, moves, info = C.balance_pair(x, a, 0, 1, np.ones(2), "oneway", pause_s=np.full(4, 0.5))
    assert ok and moves and info["gain_cpu_s"] > info["pause_cpu_s"] > 0
    assert a.tolist() != [0, 0, 0, 1]
