"""The simulated sink's sequence ranges: lost tuples are gaps, what a recovery sends again is
counted against what the sink already holds, and de-duplication decides the guarantee."""

from __future__ import annotations

import numpy as np
import pytest

from controller.replay import replay_sim
from controller.scenario import ScenarioFile, load_scenario
from core.plans import HAPlan, Placement, Plan
from simulator import Simulator
from simulator.sink import Sink
from tests.conftest import SCENARIOS


def test_gaps_and_redelivery_by_range() -> None:
    s = Sink(2, dedup=True, ticks=4)
    s.admit(np.array([10.0, 4.0]))
    s.deliver(np.array([4.0, 4.0]))
    s.lose(np.array([3.0, 0.0]))  # stream 0: [7, 10) lost; [4, 7) still queued
    s.admit(np.array([5.0, 0.0]))
    s.deliver(np.array([8.0, 0.0]))  # [4, 7) then [10, 15)
    assert s.received(0) == [(0.0, 7.0), (10.0, 15.0)]
    assert s.lost.tolist() == [3.0, 0.0]
    # a range that straddles the gap: only what was received is a duplicate
    assert s.redeliver(0, 5.0, 12.0) == pytest.approx(4.0)
    assert s.suppressed[0] == pytest.approx(4.0) and s.duplicates.sum() == 0.0
    # a later loss touching the earlier gap merges with it
    s.admit(np.array([2.0, 0.0]))
    s.lose(np.array([2.0, 0.0]))
    assert s.gaps(0) == [(7.0, 10.0)] and s.lost[0] == pytest.approx(5.0)


def _two_nodes(policy: str, dedup: bool, kill_s: float = 55.0) -> ScenarioFile:
    """100 tuples/s through a map on n0 and a 30 s window on n1, which dies at ``kill_s``."""
    doc = {
        "name": "sink-two-nodes",
        "duration_s": 120,
        "cluster": {"nodes": [{"id": f"n{i}", "capacity": 1.0} for i in range(2)]},
        "streams": [{"id": "s0", "rate": {"kind": "constant", "rate": 100.0}}],
        "operators": [
            {"id": "a", "kind": "map", "inputs": ["s0"], "cost_us": 1000.0},
            {
                "id": "w",
                "kind": "aggregate",
                "inputs": ["a"],
                "cost_us": 1000.0,
                "window": {"size_s": 30, "slide_s": 5},
                "state_bytes_per_key_group": 1e6,
            },
        ],
        "faults": [{"at_s": kill_s, "kind": "kill", "node": "n1", "duration_s": 30}],
        "simulator": {"sink_dedup": dedup},
    }
    return ScenarioFile.model_validate(doc)


def _run(policy: str, dedup: bool, checkpoint_interval: int = 10) -> Simulator:
    sc = _two_nodes(policy, dedup)
    sim = Simulator(sc)
    sim.apply(
        Plan(
            placement=Placement(units=sim.units.ids, nodes=sim.cluster.ids, assignment=(0, 1)),
            ha=HAPlan(policy=policy, checkpoint_interval=checkpoint_interval),
        )
    )
    sim.step(sim.T)
    return sim


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("active", 100.0),  # one unacknowledged tick of output
        ("passive", 500.0),  # the 5 s since the checkpoint at 50 s
        ("upstream", 3000.0),  # the window's 30 s of input replayed
        ("none", 0.0),  # amnesia resends nothing (and loses what was in flight)
    ],
)
def test_what_each_policy_sends_again_reaches_the_sink_as_duplicates(
    policy: str, expected: float
) -> None:
    off, on = _run(policy, dedup=False), _run(policy, dedup=True)
    t_off, t_on = off.totals(), on.totals()
    assert t_off["duplicates"] == pytest.approx(expected)
    assert t_on["duplicates"] == 0.0 and t_on["duplicates_suppressed"] == pytest.approx(expected)
    # de-duplication changes what is counted, not what flows
    assert t_on["out"] == pytest.approx(t_off["out"])
    # the sink's gaps are the tuples the run lost
    assert t_on["sink_lost"] == pytest.approx(t_on["lost"], abs=1e-6)
    assert (t_on["lost"] > 0) == (policy == "none")


def test_the_guarantee_follows_from_the_sinks_counts() -> None:
    sc = load_scenario(SCENARIOS / "failure-storm.yaml")
    rows = {}
    for dedup in (True, False):
        s = sc.model_copy(
            update={"simulator": sc.simulator.model_copy(update={"sink_dedup": dedup})}
        )
        for pol in ("none", "upstream", "active"):
            s2 = s.with_controller(ha=s.controller.ha.model_copy(update={"policy": pol}))
            rows[pol, dedup] = replay_sim(s2).summary
    assert rows["none", True]["guarantee"] == "gap" and rows["none", True]["lost_tuples"] > 0
    for pol in ("upstream", "active"):
        assert rows[pol, True]["guarantee"] == "precise"
        assert rows[pol, True]["duplicates_suppressed"] > 0
        assert rows[pol, False]["guarantee"] == "repeating"
        assert rows[pol, False]["duplicate_tuples"] == pytest.approx(
            rows[pol, True]["duplicates_suppressed"]
        )
