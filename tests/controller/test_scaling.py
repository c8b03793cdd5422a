"""Scaling in the loop on the simulator: DS2 decides the node count, placement places on it,
shedding waits for the ceiling; nodes start with a delay and are paid for while they run."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from controller.policy import Decision
from controller.replay import replay_sim
from controller.scenario import load_scenario
from controller.wiring import make_policy, make_simulator
from core.cluster import NodeStatus
from core.observation import Observation, PipelineBatch
from core.plans import Placement, Plan, ScalePlan
from tests.conftest import SCENARIOS

ELASTIC = SCENARIOS / "elastic-ramp.yaml"


@pytest.fixture(scope="module")
def elastic() -> object:
    return replay_sim(load_scenario(ELASTIC))


def test_elastic_ramp_scales_out_and_back_in(elastic: object) -> None:
    r = elastic
    s = r.summary  # type: ignore[attr-defined]
    counts = [k for _, k in s["nodes_over_time"]]
    assert counts[0] == 1 and counts[-1] == 1 and max(counts) >= 3, counts
    ups = sum(b > a for a, b in itertools.pairwise(counts))
    downs = sum(b < a for a, b in itertools.pairwise(counts))
    assert ups >= 2 and downs >= 2
    # DS2 jumps: at most 3 actions per load change (one ramp up, one down)
    assert s["scale_actions"] <= 6
    # resource cost: well under every node for the whole run
    duration = r.series.streams.index[-1] + 1.0  # type: ignore[attr-defined]
    assert s["node_seconds"] <= 0.75 * 4 * duration
    # lp is configured, but the cluster never reached its ceiling: nothing was shed
    assert s["dropped_fraction"] == 0.0 and s["lost_tuples"] == 0.0
    assert s["p99_latency"] < 0.1


def test_scale_out_joins_first_and_places_a_round_later(elastic: object) -> None:
    recs = elastic.decisions  # type: ignore[attr-defined]
    outs = [i for i, d in enumerate(recs) if d.kind == "scale" and "scaled out" in d.reason]
    assert outs
    for i in outs:
        assert recs[i].details["moved"] == 0  # nothing waits for a starting node
        assert "needed_cores" in recs[i].details["scale"]  # the numbers behind it are logged
        nxt = recs[i + 1]
        assert nxt.kind == "place" and "running nodes" in nxt.reason, nxt.reason
        assert nxt.details["moved"] > 0


def test_a_joining_node_serves_nothing_until_it_has_started() -> None:
    sc = load_scenario(ELASTIC)
    sim = make_simulator(sc)
    policy = make_policy(sc)
    plan = policy.initial_plan()
    assert plan.scale.nodes == 1 and set(plan.placement.assignment) == {0}
    sim.apply(plan)
    sim.step(20)
    # join node 1 and put half the units there at once: they queue for the start-up delay
    a = np.array(plan.placement.assignment)
    a[::2] = 1
    pl = Placement.from_array(plan.placement.units, plan.placement.nodes, a)
    sim.apply(plan.next(placement=pl, scale=ScalePlan(nodes=2)))
    sim.step(10)  # node_startup_s = 10
    util = sim.result().node_util.to_numpy()
    assert np.all(util[20:30, 1] == 0.0)  # not started: no service
    assert sim.result().streams["queued"].iloc[29] > 0
    sim.step(30)
    assert sim.result().node_util.to_numpy()[31:, 1].max() > 0
    assert sim.result().streams["queued"].iloc[-1] < 1.0  # caught up after the start
    t = sim.totals()
    assert t["node_seconds"] == pytest.approx(20 * 1 + 40 * 2)  # the starting node is paid
    assert t["scale_actions"] == 1


def test_at_the_ceiling_shedding_takes_over() -> None:
    sc = load_scenario(ELASTIC)
    capped = sc.controller.scaling.model_copy(update={"max_nodes": 2})
    r = replay_sim(sc.with_controller(scaling=capped))
    assert max(k for _, k in r.summary["nodes_over_time"]) == 2
    assert r.summary["dropped_fraction"] > 0.01  # 2 cores of load on 2 nodes: lp sheds
    shed = [d for d in r.decisions if "shed" in d.kind]
    assert shed and all(d.time_s > 190 for d in shed)  # never before the second node ran


def test_a_plan_cannot_keep_units_on_released_nodes() -> None:
    pl = Placement(units=("a", "b"), nodes=("n0", "n1"), assignment=(0, 1))
    with pytest.raises(ValueError, match=r"unit 'b' is on a node the plan releases"):
        Plan(placement=pl, scale=ScalePlan(nodes=1))
    assert Plan(placement=pl, scale=ScalePlan(nodes=2)).scale.count(2) == 2


def test_scaling_bounds_beyond_the_cluster_are_named() -> None:
    sc = load_scenario(ELASTIC)
    bad = sc.with_controller(scaling=sc.controller.scaling.model_copy(update={"max_nodes": 9}))
    with pytest.raises(ValueError, match=r"scaling.max_nodes: 9 exceeds the cluster.s 4 nodes"):
        make_policy(bad)


def test_a_scenario_asking_for_more_nodes_than_it_has_is_refused(tmp_path) -> None:
    from core.scenario import ScenarioError

    bad = tmp_path / "bad.yaml"
    bad.write_text(ELASTIC.read_text().replace("max_nodes: 4", "max_nodes: 9"))
    with pytest.raises(ScenarioError, match=r"controller.scaling.max_nodes: 9 exceeds"):
        load_scenario(bad)


def test_the_daemon_config_sets_scaling_over_the_scenario(tmp_path) -> None:
    from controller.config import load_settings
    from controller.wiring import make_daemon_wiring

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"substrate:\n  kind: sim\n  scenario: {ELASTIC}\n"
        "scaling:\n  target_utilization: 0.8\n  scale_in_after_s: 30\n"
    )
    _, policy = make_daemon_wiring(load_settings(cfg))
    assert policy.scaling is not None
    got = policy.ctx.settings.scaling
    assert (got.target_utilization, got.scale_in_after_s, got.max_nodes) == (0.8, 30.0, 4)
    assert policy.scaling.auto.p.scale_in_rounds == 3  # 30 s at 10 s rounds


def _steered(plan: Plan, ready: int | None, k: int = 2) -> Observation:
    """What a steered Spark pipeline reports: ``k`` batches of 5 s, 7,000 rows each on one
    partition at 500 us a row, arriving at 2,800 rows/s (1.4 cores against a 0.7 target: two
    nodes), whose running nodes had ``ready`` executors live."""
    m, n = len(plan.placement.units), len(plan.placement.nodes)
    batches = tuple(
        PipelineBatch(i, 5.0, 7000, 0, None, (7000, 0), (3.5, 0.0), ready_nodes=ready)
        for i in range(k)
    )
    return Observation(
        time_s=5.0 * k,
        unit_load=np.full((m, k), 0.7 / m),
        node_load=np.tile(np.array([[0.7], [0.0]])[:n], k),
        input_rates=np.full((1, k), 7000 / 2.5),
        node_status=(NodeStatus.UP,) * n,
        backlog_s=np.zeros(n),
        latency_s=5.0,
        plan_version=plan.version,
        counters={"batches": float(k)},
        batches=batches,
    )


def test_a_steered_pipeline_gets_units_on_a_joined_node_once_its_executor_runs() -> None:
    """A daemon's rounds can be faster than the pipeline's batches: the placement onto a node
    a scale-out joined waits until a batch ran that node with its executor live (the daemon
    once routed to a node whose join plan no batch had pinned)."""
    policy = make_policy(load_scenario(SCENARIOS / "spark-elastic-ramp.yaml"))
    plan = policy.initial_plan()
    assert plan.scale.nodes == 1

    def round_(obs: Observation) -> Decision:
        return policy.decide(obs.unit_load, obs.node_load, plan, obs)

    d = round_(_steered(plan, ready=1))
    assert d.kind == "scale" and d.plan is not None and d.plan.scale.nodes == 2
    assert d.details["moved"] == 0
    plan = d.plan
    for obs in (_steered(plan, ready=1, k=0), _steered(plan, ready=1)):  # not yet started
        d = round_(obs)
        assert d.plan is None or d.plan.placement == plan.placement, d.reason
        assert "waiting for the joined node(s) to start" in d.reason, d.reason
    d = round_(_steered(plan, ready=2))
    assert d.kind.startswith("place") and "running nodes" in d.reason, d.reason
    assert d.plan is not None and set(d.plan.placement.assignment) == {0, 1}
