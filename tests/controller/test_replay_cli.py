from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SCENARIOS

KEYS = {
    "scenario",
    "substrate",
    "placement",
    "ticks",
    "throughput",
    "mean_latency",
    "p99_latency",
    "node_load_variance_mean",
    "mean_pairwise_node_correlation",
    "migrations",
    "dropped_fraction",
    "lost_tuples",
    "duplicate_tuples",
}
EXE = str(Path(sys.executable).parent / "trimtab")


def test_replay_json_keys() -> None:
    r = subprocess.run(
        [
            EXE,
            "replay",
            str(SCENARIOS / "anticorrelated-diurnal.yaml"),
            "--substrate",
            "sim",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    out = json.loads(r.stdout)
    assert set(out) >= KEYS
    assert out["substrate"] == "sim" and out["ticks"] == 1200
    assert out["throughput"] > 0


def test_replay_report_and_ticks(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            EXE,
            "replay",
            str(SCENARIOS / "failure-storm.yaml"),
            "--ticks",
            "150",
            "--seed",
            "3",
            "--report",
            str(tmp_path / "rep"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    for f in (
        "node_load.csv",
        "streams.csv",
        "node_load.png",
        "heatmap.png",
        "correlation_first_half.png",
        "report.html",
    ):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    assert "failure-storm" in r.stdout


def test_unknown_placement_is_usage_error() -> None:
    r = subprocess.run(
        [EXE, "replay", str(SCENARIOS / "bursty-rod.yaml"), "--placement", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "placement" in r.stderr


def test_replay_shedding_flag() -> None:
    base = [EXE, "replay", str(SCENARIOS / "overload-ramp.yaml"), "--json"]
    lp = json.loads(
        subprocess.run(
            [*base, "--shedding", "lp"], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    none = json.loads(
        subprocess.run(
            [*base, "--shedding", "none"], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    assert lp["dropped_fraction"] > 0 and none["dropped_fraction"] == 0
    assert lp["mean_latency"] < none["mean_latency"] / 10
    bad = subprocess.run([*base, "--shedding", "magic"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "shedding" in bad.stderr


def test_initial_method_then_pairwise_rounds() -> None:
    from controller.replay import replay_sim
    from controller.scenario import load_scenario
    from controller.wiring import make_policy
    from placement.rod import rod
    from placement.rod_search import improve_feasible_set

    sc = load_scenario(SCENARIOS / "bursty-rod.yaml")
    ctl = sc.controller.model_copy(
        update={
            "placement": sc.controller.placement.model_copy(
                update={"method": "correlation-oneway", "initial": "rod"}
            )
        }
    )
    sc = sc.model_copy(update={"controller": ctl})
    policy = make_policy(sc)
    plan = policy.initial_plan()
    ctx = policy.ctx
    cap = ctx.cluster.capacities()
    greedy = rod(ctx.units.coeff, cap, ctx.units.edges, seed=sc.seed)
    searched = improve_feasible_set(ctx.units.coeff, cap, greedy, rounds=16, seed=sc.seed)
    assert plan.placement.assignment == tuple(searched.assignment.tolist())
    assert "ROD greedy + local search" in plan.reason
    res = replay_sim(sc, ticks=60)
    assert not any(d.details.get("phase") == "global" for d in res.decisions)
    bad = sc.model_copy(
        update={
            "controller": ctl.model_copy(
                update={"placement": ctl.placement.model_copy(update={"initial": "nope"})}
            )
        }
    )
    import pytest

    with pytest.raises(ValueError, match=r"controller\.placement\.initial"):
        make_policy(bad)
