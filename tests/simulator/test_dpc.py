"""Delay, Process and Correct in the simulator: an input that goes silent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.replay import replay_sim
from controller.scenario import ScenarioFile, load_scenario
from core.scenario import FaultSpec
from tests.conftest import ROOT, SCENARIOS

SC = SCENARIOS / "input-partition-dpc.yaml"


def _mode(sc: ScenarioFile, mode: str) -> ScenarioFile:
    ha = sc.controller.ha
    dpc = ha.dpc.model_copy(update={"mode": mode})
    return sc.with_controller(ha=ha.model_copy(update={"dpc": dpc}))


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    sc = load_scenario(SC)
    return {m: replay_sim(_mode(sc, m)).summary for m in ("tentative", "block")}


def test_tentative_results_flow_and_are_corrected_once(runs: dict[str, dict]) -> None:
    t = runs["tentative"]
    assert t["dpc_mode"] == "tentative"
    assert 0.0 < t["tentative_fraction"] < 0.5
    # every tentative tuple is re-emitted once, as a correction
    assert t["corrections"] == pytest.approx(t["tentative_fraction"] * t["tuples_out"], rel=1e-9)
    # tentative results come after at most the delay (2 s) plus the usual processing
    assert t["latency_tentative_mean"] <= 2.0 + 1.0
    # their stable versions wait for the stream: the outage is 30 s
    assert t["latency_stable_p99"] > 10.0
    assert t["lost_tuples"] == 0 and t["duplicate_tuples"] == 0


def test_block_mode_emits_nothing_tentative_and_waits(runs: dict[str, dict]) -> None:
    b, t = runs["block"], runs["tentative"]
    assert b["tentative_fraction"] == 0.0 and b["corrections"] == 0.0
    assert b["latency_tentative_mean"] == 0.0
    # in block mode the partners' results wait for the stream too; in tentative mode only
    # the silent stream's own (held) results do
    assert b["latency_first_p99"] > t["latency_first_p99"] + 5.0
    # both modes end with the same stable results at the same time: only the first emission
    # differs, so the stable latencies agree
    assert b["latency_stable_mean"] == pytest.approx(t["latency_stable_mean"], rel=1e-9)
    assert b["tuples_out"] == pytest.approx(t["tuples_out"], rel=1e-12)


def test_the_silent_streams_tuples_are_held_not_lost() -> None:
    from controller.wiring import make_simulator

    sc = load_scenario(SC)
    sim = make_simulator(sc)
    (o,) = sim.outages
    s = list(sim.net.streams).index("S")
    assert (o.stream, o.start * sc.tick_s, (o.end - o.start) * sc.tick_s) == (s, 120.0, 30.0)
    assert sim.arrivals[o.start : o.end, s].sum() == 0.0
    held = sim.offered[o.start : o.end, s].sum()
    assert sim.arrivals[o.end, s] == pytest.approx(sim.offered[o.end, s] + held)
    assert sim.arrivals.sum() == pytest.approx(sim.offered.sum())
    sim.step(sim.T)
    tot = sim.totals()
    assert tot["in"] == pytest.approx(tot["out"] + tot["dropped"] + tot["queued"] + tot["lost"])
    assert tot["lost"] == 0.0


def test_no_outage_no_dpc_figures() -> None:
    sc = load_scenario(SC)
    quiet = sc.model_copy(update={"faults": []})
    assert "tentative_fraction" not in replay_sim(quiet, ticks=30).summary


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ({"at_s": 1, "kind": "partition"}, "names a node or a stream"),
        ({"at_s": 1, "kind": "partition", "node": "n0", "stream": "S"}, "names a node or a stream"),
        ({"at_s": 1, "kind": "kill", "stream": "S"}, "only a partition fault names a stream"),
        ({"at_s": 1, "kind": "kill"}, "a kill fault needs a node"),
    ],
)
def test_a_fault_names_what_it_hits(fault: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        FaultSpec.model_validate(fault)


def test_an_unknown_stream_is_named(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(SC.read_text())
    doc["faults"][0]["stream"] = "Q"
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    exe = str(Path(sys.executable).parent / "trimtab")
    r = subprocess.run([exe, "validate", str(f)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "faults.0.stream" in r.stderr and "'Q'" in r.stderr


def test_compare_ha_reports_dpc() -> None:
    exe = str(Path(sys.executable).parent / "trimtab")
    r = subprocess.run(
        [exe, "compare", str(SC), "--ha", "none,upstream", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    rows = json.loads(r.stdout)
    for row in rows:
        for k in ("tentative_fraction", "corrections", "latency_stable_mean"):
            assert k in row, k
