"""Measured node capacities: noise within the tolerance is ignored, a real spread is planned
with, lightly loaded partitions do not count, and least-loaded re-places once by them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from controller.node_speed import MeasuredCapacity, shape_differs
from controller.placements import LeastLoaded
from controller.scenario import load_scenario
from controller.wiring import make_context
from core.cluster import Cluster, NodeStatus
from core.observation import Observation, PipelineBatch
from tests.conftest import SCENARIOS


def _obs(rows: list[float], busy: list[float], batches: int = 3) -> Observation:
    b = PipelineBatch(0, 2.0, 1, 0, None, partition_rows=tuple(rows), partition_busy_s=tuple(busy))
    z = np.zeros((2, 1))
    up = (NodeStatus.UP, NodeStatus.UP)
    return Observation(0.0, z, z, np.zeros((1, 1)), up, np.zeros(2), batches=(b,) * batches)


def test_capacities_follow_a_real_spread_only() -> None:
    cap = MeasuredCapacity(np.array([0.8, 0.8]), tolerance=0.25)
    cap.observe(_obs([1000, 1000], [0.60, 0.54]))  # 10% apart: noise
    assert not cap.measured and cap.capacities().tolist() == [0.8, 0.8]
    cap.observe(_obs([1000, 1000], [0.9, 0.3]))  # 1:3
    assert cap.measured
    c = cap.capacities()
    assert c[1] > 2 * c[0] and abs(c.mean() - 0.8) < 1e-9, c


def test_lightly_loaded_partitions_do_not_count() -> None:
    """50 rows in 0.06 s is mostly a task's fixed cost: it must not make a partition slow."""
    cap = MeasuredCapacity(np.ones(2), tolerance=0.25)
    cap.observe(_obs([50, 1000], [0.06, 0.5]))
    assert not cap.speeds.known and not cap.measured


def test_measured_speeds_off_keeps_the_nominal_capacities() -> None:
    cap = MeasuredCapacity(np.ones(2), tolerance=0.25, enabled=False)
    cap.observe(_obs([1000, 1000], [0.9, 0.3]))
    assert cap.capacities().tolist() == [1.0, 1.0]


def test_shape_differs_ignores_scale() -> None:
    assert not shape_differs(np.array([1.0, 3.0]), np.array([2.0, 6.0]), 0.01)
    assert shape_differs(np.array([1.0, 3.0]), np.array([1.0, 1.0]), 0.25)


def test_least_loaded_re_places_once_when_capacities_change() -> None:
    sc = load_scenario(SCENARIOS / "heterogeneous-spark.yaml")
    ctx = make_context(sc)  # nominal capacities 1 and 3
    m = LeastLoaded()
    a = m.initial(ctx, None)
    x = np.tile(ctx.expected_unit_load()[:, None], (1, 3))
    alive = np.ones(2, bool)
    assert m.rebalance(ctx, x, a, alive).judged_by is None  # the plan's own capacities
    even = replace(
        ctx, cluster=Cluster(tuple(replace(nd, capacity=2.0) for nd in ctx.cluster.nodes))
    )
    r = m.rebalance(even, x, a, alive)
    assert r.judged_by == "global step" and r.details["capacities"] == [2.0, 2.0]
    load = ctx.expected_unit_load()
    on = lambda asg, j: load[asg == j].sum()  # noqa: E731
    # made for 1:3, the slow node carried about a quarter; for 2:2, about half
    assert on(a, 0) < 0.35 * load.sum() and on(r.assignment, 0) > 0.4 * load.sum()
    assert m.rebalance(even, x, r.assignment, alive).judged_by is None  # once


def test_least_loaded_leaves_a_new_node_count_to_scaling() -> None:
    """A plan made for one running node, seen with two: not a speed change (scaling places on
    the joined node once it has started), so no move."""
    sc = load_scenario(SCENARIOS / "heterogeneous-spark.yaml")
    ctx = make_context(sc)
    m = LeastLoaded()
    one = replace(ctx, cluster=Cluster(ctx.cluster.nodes[:1]))
    a = m.initial(one, None)
    x = np.tile(ctx.expected_unit_load()[:, None], (1, 3))
    r = m.rebalance(ctx, x, a, np.ones(2, bool))
    assert r.judged_by is None and (r.assignment == a).all()
