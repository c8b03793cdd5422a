"""Shedding inside the control loop keeps latency bounded when load moves faster than the
rounds: a rise in the newest sample acts at once, and a queued backlog is planned for."""

from __future__ import annotations

import numpy as np

from controller.scenario import ScenarioFile, load_scenario
from controller.wiring import make_policy
from core.cluster import NodeStatus
from core.observation import Observation
from core.plans import Plan
from tests.conftest import SCENARIOS


def _obs(plan: Plan, rates: list[float], backlog_s: float) -> Observation:
    """Samples of one stream at ``rates`` (rows/s), both nodes carrying half the load, and
    ``backlog_s`` seconds of queued work on each node."""
    m, n, k = len(plan.placement.units), len(plan.placement.nodes), len(rates)
    cores = np.array(rates) * 0.002 / n  # 2,000 us a row
    return Observation(
        time_s=3.0 * k,
        unit_load=np.tile(cores * n / m, (m, 1)),
        node_load=np.tile(cores, (n, 1)),
        input_rates=np.array([rates], dtype=float),
        node_status=(NodeStatus.UP,) * n,
        backlog_s=np.full(n, backlog_s),
        latency_s=3.0,
        plan_version=plan.version,
        counters={},
    )


def _keyed_count() -> ScenarioFile:
    """A keyed count on 2 nodes (2,000 us a row, one input) with LP shedding at 0.9 headroom
    (``spark-elastic-ramp`` without its scaling, so only shedding answers overload)."""
    sc = load_scenario(SCENARIOS / "spark-elastic-ramp.yaml")
    c = sc.controller
    return sc.with_controller(
        shedding=c.shedding.model_copy(update={"method": "lp", "headroom": 0.9}),
        scaling=c.scaling.model_copy(update={"enabled": False}),
    )


def _keep(rates: list[float], backlog_s: float = 0.0) -> tuple[float, dict]:  # type: ignore[type-arg]
    policy = make_policy(_keyed_count())
    plan = policy.initial_plan()
    obs = _obs(plan, rates, backlog_s)
    d = policy.decide(obs.unit_load, obs.node_load, plan, obs)
    new = d.plan or plan
    return min(new.shed.keep or [1.0]), d.details["shed"]


def test_a_queued_backlog_is_shed_for() -> None:
    """1,500 rows/s is 1.5 cores a node against 0.9: the LP keeps about 0.6. With 5 s of
    backlog a node and the default 10 s to drain it, half the capacity is left for new input:
    it keeps about half as much, and the decision records the backlog it planned for."""
    plain, _ = _keep([1500.0] * 3)
    drained, info = _keep([1500.0] * 3, backlog_s=5.0)
    assert 0.5 < plain < 0.7, plain
    assert drained < 0.6 * plain, (drained, plain)
    assert info["backlog_s"] == [5.0, 5.0]
    assert info["limit"] == [0.45, 0.45]


def test_a_rise_in_the_newest_sample_is_shed_for_at_once() -> None:
    """The mean of 600, 600 and 1,500 rows/s (0.9 cores a node) fits; the newest does not."""
    keep, info = _keep([600.0, 600.0, 1500.0])
    assert keep < 0.7, keep
    assert info["rates"] == [1500.0]
    falling, _ = _keep([1500.0, 1500.0, 600.0])  # a fall acts once it holds: still shedding
    assert falling < 1.0, falling
