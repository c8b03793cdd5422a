from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pulp
import pytest
from hypothesis import given, settings

from core.topology import OperatorSpec, QueryNetwork
from shedding import lp
from shedding.loadmodel import ShedModel, build_model, placement_matrix
from shedding.plan_table import PlanTable
from tests.conftest import ROOT, SCENARIOS
from tests.shedding.test_shedding import canonical, random_models


def split_model(rate: float) -> ShedModel:
    net = QueryNetwork(
        ("s", "t"),
        (
            OperatorSpec("p", "map", ("s",), 1e5),
            OperatorSpec("q1", "map", ("p",), 5e5),
            OperatorSpec("q2", "map", ("p",), 1e5, weight=3.0),
            OperatorSpec("u", "map", ("t",), 2e5),
        ),
    )
    share = placement_matrix(net, np.arange(4), np.array([0, 1, 1, 0]), 2)
    return build_model(net, share, np.array([rate, 1.5 * rate]))


@settings(deadline=None)
@given(random_models())
def test_bulk_highs_agrees_with_pulps_own_highs(mc: tuple[ShedModel, np.ndarray]) -> None:
    model, cap = mc
    ours = lp.solve_lp(model, cap)
    # the same LP through pulp.HiGHS, which loads the model one column and row at a time
    prob = pulp.LpProblem("ref", pulp.LpMaximize)
    x = [prob.add_variable(f"x{i}", 1.0 if r <= 0 else 0.0, 1.0) for i, r in enumerate(model.rate)]
    prob += pulp.lpSum(float(g * r) * v for g, r, v in zip(model.gain, model.rate, x, strict=True))
    for j in range(cap.size):
        expr = pulp.lpSum(float(model.load[i, j] * model.rate[i]) * x[i] for i in range(len(x)))
        prob += expr <= float(cap[j])
    prob.solve(pulp.HiGHS(msg=False))
    assert ours.objective == pytest.approx(pulp.value(prob.objective) or 0.0, rel=1e-7, abs=1e-9)


def test_bulk_highs_reports_infeasible_as_pulp_does() -> None:
    prob = pulp.LpProblem("bad", pulp.LpMaximize)
    v = prob.add_variable("v", 0, 1)
    prob += v
    prob += v >= 2
    assert prob.solve(lp.BulkHiGHS(msg=False)) == pulp.LpStatusInfeasible


def test_bulk_highs_canonical_duals() -> None:
    p = lp.solve_lp(canonical(), np.ones(2), 1.0, ("A", "B"))
    assert p.shadow_prices == pytest.approx({"A": 0.4, "B": 0.2}, abs=1e-9)


@pytest.mark.parametrize("rate", [0.7, 1.0, 1.37, 2.9])
def test_table_plan_is_feasible_and_within_the_rounding_bound(rate: float) -> None:
    cap = np.array([0.3, 0.25])
    table = PlanTable(step=0.1)
    table.grid(split_model(3.0))  # the recent maximum: input s at 3.0, t at 4.5
    model = split_model(rate)
    plan = table.lookup(model, cap)
    x = lp.effective(model, np.array(plan.keep))
    assert np.all(lp.node_loads(model, x) <= cap + 1e-9)
    assert np.all(x[1:3] <= x[0] + 1e-12)  # split drops stay under their input
    best = lp.solve_lp(model, cap).objective
    inputs = np.flatnonzero(model.parent < 0)
    delta = 0.1 * np.array([3.0, 4.5])
    per_input_gain = np.array(
        [model.gain[model.parent == i].sum() + model.gain[i] for i in inputs]
    )  # weighted output per tuple of each input, all branches together
    assert best - plan.objective <= float(per_input_gain @ delta) + 1e-9
    assert plan.objective <= best + 1e-9


def test_table_hits_evicts_and_replans() -> None:
    cap = np.ones(2)
    table = PlanTable(step=0.1, max_entries=2)
    base = canonical()
    for r in (1.0, 1.02, 1.05):  # same grid cell after the first lookup sets the maximum
        table.lookup(replace(base, rate=np.array([r, r])), cap)
    assert table.stats.misses == 1 and table.stats.hits == 2
    for r in (0.5, 0.3):
        table.lookup(replace(base, rate=np.array([r, r])), cap)
    assert len(table.plans) == 2  # LRU bound
    table.lookup(replace(base, rate=np.array([0.5, 0.5])), cap, version=7)  # placement moved
    assert table.stats.replans == 1 and len(table.plans) == 1
    costly = replace(base, load=base.load * 1.2)  # costs up 20% > 10% tolerance
    table.lookup(replace(costly, rate=np.array([0.5, 0.5])), cap, version=7)
    assert table.stats.replans == 2
    # a rate beyond the grid's end (1.5x the maximum it was built for) rebuilds the grid on
    # the new maximum: one cell of 10% of it, not some forty of the old grid's
    table.lookup(replace(costly, rate=np.array([0.5, 0.5])), cap, version=7)
    assert table.stats.replans == 2
    g, key = table.grid(replace(costly, rate=np.array([2.0, 2.0])))
    assert table.stats.replans == 3 and key == (10, 10), key
    assert g == pytest.approx([2.0, 2.0])
    with pytest.raises(ValueError, match="step"):
        PlanTable(step=0)


def test_compare_shedding_cli_json() -> None:
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "trimtab"),
            "compare",
            str(SCENARIOS / "overload-ramp.yaml"),
            "--placement",
            "least-loaded",
            "--shedding",
            "lp,uniform,none",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    rows = json.loads(out.stdout)
    assert [r["shedding"] for r in rows] == ["lp", "uniform", "none"]
    by = {r["shedding"]: r for r in rows}
    assert by["lp"]["weighted_throughput"] > by["uniform"]["weighted_throughput"]
    assert by["lp"]["mean_latency"] < 0.01 * by["none"]["mean_latency"]


def test_replay_with_plan_table_stays_close_to_the_lp() -> None:
    from controller.replay import replay_sim
    from controller.scenario import load_scenario

    sc = load_scenario(SCENARIOS / "overload-ramp.yaml")
    ctl = sc.controller
    runs = {}
    for table in (False, True):
        shed = ctl.shedding.model_copy(update={"method": "lp", "plan_table": table})
        s2 = sc.model_copy(update={"controller": ctl.model_copy(update={"shedding": shed})})
        runs[table] = replay_sim(s2)
    lp_run, tab = runs[False].summary, runs[True].summary
    assert tab["mean_latency"] < 1.0  # bounded, as with the LP
    assert tab["weighted_throughput"] >= 0.85 * lp_run["weighted_throughput"]
    notes = [d.details.get("shed", {}).get("plan_table") for d in runs[True].decisions]
    stats = [n for n in notes if n]
    assert stats and stats[-1]["hits"] + stats[-1]["misses"] == len(stats)
