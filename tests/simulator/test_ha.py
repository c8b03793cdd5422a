"""Availability policies in the simulator, on the failure-storm scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.compare import compare_ha
from controller.scenario import load_scenario
from tests.conftest import ROOT, SCENARIOS


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    sc = load_scenario(SCENARIOS / "failure-storm.yaml")
    return {r["ha"]: r for r in compare_ha(sc, ["none", "upstream", "passive", "active"])}


def test_overhead_and_recovery_follow_hwang_et_al(rows: dict[str, dict]) -> None:
    o = {k: rows[k]["runtime_overhead"] for k in rows}
    r = {k: rows[k]["recovery_time_mean"] for k in rows}
    assert o["none"] == 0.0 < o["upstream"] < o["passive"] < o["active"]
    assert r["active"] < r["passive"] < r["upstream"]
    assert (
        r["active"] <= load_scenario(SCENARIOS / "failure-storm.yaml").simulator.detection_s + 1.0
    )


def test_guarantees_and_losses(rows: dict[str, dict]) -> None:
    assert rows["none"]["guarantee"] == "gap" and rows["none"]["lost_tuples"] > 0
    for p in ("upstream", "passive", "active"):
        assert rows[p]["guarantee"] == "precise"
        assert rows[p]["lost_tuples"] == 0 and rows[p]["duplicate_tuples"] == 0
        assert rows[p]["recoveries_unfinished"] == 0


def test_conservation_under_every_policy() -> None:
    from controller.replay import replay_sim

    sc = load_scenario(SCENARIOS / "failure-storm.yaml")
    for pol in ("none", "upstream", "passive", "active"):
        ctl = sc.controller.model_copy(
            update={"ha": sc.controller.ha.model_copy(update={"policy": pol})}
        )

        res = replay_sim(sc.model_copy(update={"controller": ctl}))
        t = res.series.totals
        assert t["in"] == pytest.approx(t["out"] + t["dropped"] + t["queued"] + t["lost"], rel=1e-9)


def test_compare_ha_cli_json() -> None:
    exe = str(Path(sys.executable).parent / "trimtab")
    r = subprocess.run(
        [
            exe,
            "compare",
            str(SCENARIOS / "failure-storm.yaml"),
            "--ha",
            "upstream,passive,active,none",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    out = json.loads(r.stdout)
    assert [x["ha"] for x in out] == ["upstream", "passive", "active", "none"]
    assert "note:" not in r.stderr  # it has faults
    for x in out:
        for k in (
            "runtime_overhead",
            "recovery_time_mean",
            "recovery_time_max",
            "lost_tuples",
            "duplicate_tuples",
            "guarantee",
        ):
            assert k in x
    bad = subprocess.run(
        [exe, "compare", str(SCENARIOS / "failure-storm.yaml"), "--ha", "magic"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "magic" in bad.stderr


def test_compare_ha_runs_every_policy_on_the_placement_named() -> None:
    """``--placement`` with ``--ha`` is the placement each policy runs on (it was ignored):
    the rows carry it, and their figures are those of that placement, not the scenario's."""
    from typer.testing import CliRunner

    from controller.cli import app

    argv = ["compare", str(SCENARIOS / "failure-storm.yaml"), "--ha", "upstream", "--json"]
    rod = json.loads(CliRunner().invoke(app, [*argv, "--placement", "rod"]).stdout)
    own = json.loads(CliRunner().invoke(app, argv).stdout)
    assert rod[0]["placement"] == "rod" and own[0]["placement"] != "rod", (rod, own)
    assert rod[0]["mean_latency"] != own[0]["mean_latency"]


def test_upstream_overhead_is_the_acknowledgement_work_of_the_tuples_carried() -> None:
    """Upstream backup's overhead is ``ack_cost_us`` per tuple a unit takes in: it scales with
    the constant and, per unit of work, with 1 / the operators' cost per tuple."""
    from controller.replay import replay_sim

    sc = load_scenario(SCENARIOS / "failure-storm.yaml")
    ctl = sc.controller.model_copy(
        update={"ha": sc.controller.ha.model_copy(update={"policy": "upstream"})}
    )

    def overhead(ack_us: float, cost_factor: float = 1.0) -> float:
        sim = sc.simulator.model_copy(update={"ack_cost_us": ack_us})
        ops = [o.model_copy(update={"cost_us": o.cost_us * cost_factor}) for o in sc.operators]
        s = sc.model_copy(update={"controller": ctl, "simulator": sim, "operators": ops})
        return float(replay_sim(s, ticks=60).summary["runtime_overhead"])

    base = overhead(1.0)
    assert base > 0
    assert overhead(2.0) == pytest.approx(2 * base, rel=1e-9)
    assert overhead(0.0) == 0.0
    # operators twice as costly per tuple carry half the tuples per unit of work
    assert overhead(1.0, cost_factor=2.0) == pytest.approx(base / 2, rel=1e-6)


def test_compare_ha_on_a_scenario_without_faults_says_so() -> None:
    """Every policy then recovers nothing: identical rows but the overhead, which read as a
    comparison."""
    from typer.testing import CliRunner

    from controller.cli import app

    args = ["compare", str(SCENARIOS / "seed-shedding-2node.yaml"), "--ha", "upstream,none"]
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("note: seed-shedding-2node has no fault: the policies differ")
    assert [x["recovery_time_max"] for x in json.loads(r.stdout)] == [0, 0]
