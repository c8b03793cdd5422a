"""A plan is where its units live: least-loaded's (the default) and a static method's (llf,
rod, random, connected, hash, and pins). A failover moves units off a dead node, and once every
node of the plan is up again they return, ``max_moves`` a round. Before, they stayed where the
failure left them: with pins on ``seed-shedding-2node`` the survivor kept both nodes' operators
for the rest of the run (throughput 0.325 against 0.508 once they return, 0.573 with no
failure); with least-loaded, 0.308 against 0.479."""

from __future__ import annotations

from pathlib import Path

import yaml

from controller.replay import ReplayResult, replay_sim
from controller.scenario import load_scenario
from tests.conftest import SCENARIOS


def _killed(tmp_path: Path, duration_s: float, **placement: object) -> ReplayResult:
    """``seed-shedding-2node`` (a1, a2 pinned to A; b1, b2 to B) with A killed at 5 s."""
    d = yaml.safe_load((SCENARIOS / "seed-shedding-2node.yaml").read_text())
    d["faults"] = [{"at_s": 5, "kind": "kill", "node": "A", "duration_s": duration_s}]
    d["controller"]["placement"].update(placement)
    f = tmp_path / "killed.yaml"
    f.write_text(yaml.safe_dump(d))
    return replay_sim(load_scenario(f))


def _units_per_node(r: ReplayResult) -> list[tuple[int, int]]:
    pl = r.series.placement
    assert pl is not None
    return [(int(a), int(b)) for a, b in pl[["A", "B"]].to_numpy()]


def test_pinned_units_return_once_their_node_is_up_again(tmp_path: Path) -> None:
    r = _killed(tmp_path, 5)
    per_node = _units_per_node(r)
    assert per_node[0] == (2, 2) and (0, 4) in per_node, per_node  # failed over to B
    assert per_node[-1] == (2, 2), per_node  # and back on A
    restored = [d for d in r.decisions if "plan restored" in d.reason]
    assert len(restored) == 1 and restored[0].applied, [d.reason for d in r.decisions]
    assert "2 of 2 unit(s) moved back to A" in restored[0].reason
    assert restored[0].time_s >= 10  # not while A was down (5 s to 10 s)
    assert r.summary["migrations"] == 2


def test_nothing_returns_while_the_node_is_down(tmp_path: Path) -> None:
    r = _killed(tmp_path, 60)  # down from 5 s past the end of the 60 s run
    per_node = _units_per_node(r)
    assert per_node[-1] == (0, 4), per_node
    assert not any("restored" in d.reason for d in r.decisions)


def test_a_static_plan_returns_max_moves_a_round(tmp_path: Path) -> None:
    """llf (its own plan, not pins) with max_moves 1: one unit a round, heaviest first."""
    r = _killed(tmp_path, 5, method="llf", fixed={}, max_moves=1)
    restored = [d for d in r.decisions if "plan restored" in d.reason]
    assert [d.details["remaining"] for d in restored] == [1, 0], [d.reason for d in restored]
    assert all(d.reason.startswith("llf: ") and "1 of" in d.reason for d in restored)
    assert _units_per_node(r)[-1] == _units_per_node(r)[0]


def test_the_default_least_loaded_plan_returns_too(tmp_path: Path) -> None:
    r = _killed(tmp_path, 5, method="least-loaded", fixed={})
    per_node = _units_per_node(r)
    assert (0, 4) in per_node and per_node[-1] == per_node[0], per_node
    restored = [d for d in r.decisions if "plan restored" in d.reason]
    assert len(restored) == 1 and restored[0].reason.startswith("least-loaded: its plan restored")
    holds = [d.reason for d in r.decisions if d.kind == "hold"]
    assert holds and all("least-loaded: no periodic moves" in h for h in holds), holds


def test_max_moves_zero_freezes_placement_but_not_the_failover(tmp_path: Path) -> None:
    """max_moves 0: the units still leave the dead node A (a failover is not a placement
    move), nothing returns once A is up, and every other round holds, saying why."""
    r = _killed(tmp_path, 5, method="llf", fixed={}, max_moves=0)
    per_node = _units_per_node(r)
    assert (0, 4) in per_node and per_node[-1] == (0, 4), per_node
    assert not any("restored" in d.reason for d in r.decisions)
    holds = [d.reason for d in r.decisions if d.kind == "hold" and "warm-up" not in d.reason]
    assert holds and all(h.startswith("max_moves=0: placement frozen") for h in holds), holds
