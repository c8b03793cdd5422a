"""LP shedding after a split on Spark (``spark-split-shed``): a split stream's rows go through
each branch as a path stream of their own, the Spark controller's LP places a drop on each
branch and each input, and the pipeline applies them, exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from controller.scenario import load_scenario
from controller.shedding import shed_model
from controller.wiring import spark_context
from shedding.lp import solve_lp
from spark_adapter.batchstats import read_batch_stats
from spark_adapter.query import compile_query
from tests.conftest import SCENARIOS

ENRICH, DIRECT = "s:parse->enrich", "s:parse->direct"


def split_scenario(headroom: float = 0.9):  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / "spark-split-shed.yaml")
    shed = sc.controller.shedding.model_copy(update={"headroom": headroom})
    return sc.model_copy(update={"controller": sc.controller.model_copy(update={"shedding": shed})})


def test_each_branch_of_a_split_is_its_own_path_stream() -> None:
    """Before, a stream reaching the keyed operator by two branches got one chain through both
    (its rows went through the enrichment's map on the direct branch too, and once)."""
    q = compile_query(split_scenario())
    assert list(q.sides) == [ENRICH, DIRECT, "t"]
    assert q.forks == {ENRICH: ("s", ("parse->enrich",)), DIRECT: ("s", ("parse->direct",))}
    assert q.streams == ["s", "t"]
    assert q.steps[ENRICH] == ("parse", "enrich") and q.steps[DIRECT] == ("parse", "direct")
    assert q.value_sql(ENRICH) == "(`v` * 2.0D)" and q.value_sql(DIRECT) == "`v`"
    # each path's own cost (parse + its branch + the count), charged where its rows fold
    assert q.cost_us == {ENRICH: 4100.0, DIRECT: 1200.0, "t": 3000.0}
    assert q.costs_by_side == {0: 4100.0, 1: 1200.0, 2: 3000.0}


def test_a_filter_under_one_input_leaves_the_other_streams_alone() -> None:
    """Before, a filter met after another input of the count had been walked was added to
    that input's stream too (every stream on the same side)."""
    from core.scenario import OperatorModel

    sc = load_scenario(SCENARIOS / "spark-bursty-rod.yaml")
    count = sc.operators[0].model_copy(update={"inputs": ["a", "hi"]})
    hi = OperatorModel(
        id="hi", kind="filter", inputs=["b"], cost_us=50.0,
        params={"column": "v", "op": ">", "value": 0.5},
    )  # fmt: skip
    q = compile_query(sc.model_copy(update={"operators": [hi, count]}))
    assert q.predicates == {"b": [("v", ">", 0.5)]} and q.steps == {"a": (), "b": ("hi",)}
    assert q.cost_us == {"a": 2000.0, "b": 2050.0} and q.sides == {"a": 0, "b": 1}


def test_the_spark_lp_drops_the_costly_branch_first() -> None:
    """Every row reaching the count is worth the same, so the LP gives up the enriched branch
    (4.1 ms a row) before t (3 ms), and t before the direct branch (1.2 ms). With one cost for
    every path (the stage's costliest), any split of the drops would do."""
    sc = split_scenario()
    q = compile_query(sc)
    ctx = spark_context(sc, q, 2, 0.1)
    assert ctx.network.streams == (ENRICH, DIRECT, "t")
    rates = np.array([300.0, 300.0, 300.0])  # rows/s of each path at replay scale 0.1
    model = shed_model(ctx.network, ctx.units, np.array([0, 1] * 4), 2, rates)
    # capacity for the direct branch and part of t: 0.36 + 0.9 x cores wanted
    plan = solve_lp(model, np.array([0.45, 0.45]), headroom=1.0)
    keep = dict(zip(plan.locations, plan.keep, strict=True))
    assert keep[ENRICH] == pytest.approx(0.0, abs=1e-6)
    assert keep[DIRECT] == pytest.approx(1.0)
    assert 0.3 < keep["t"] < 0.9, keep


def test_the_pipeline_runs_the_spark_lps_drops_and_refuses_another_querys() -> None:
    """The plan guard (``batch_compiler.plan_problem``) takes every location the Spark LP
    sheds at (the paths of a split, an input) and refuses a drop at a stream the query does
    not read, or a hot key quota on a partition the plan's scale has released."""
    from controller.testing import key_group_plan
    from spark_adapter.batch_compiler import plan_problem

    sc = split_scenario()
    q = compile_query(sc)
    ctx = spark_context(sc, q, 2, 0.1)
    model = shed_model(ctx.network, ctx.units, np.array([0, 1] * 4), 2, np.full(3, 300.0))
    shed = solve_lp(model, np.array([0.45, 0.45]), headroom=1.0)
    assert set(shed.locations) == {ENRICH, DIRECT, "t"}
    base = key_group_plan(q, [g % 2 for g in range(q.key_groups)])
    assert plan_problem(base.next(shed=shed), q, 2) is None
    keep = {"s": 0.5, "parse->enrich": 0.5}  # an input, and a split's arc
    assert plan_problem(key_group_plan(q, [0] * q.key_groups, keep=keep), q, 2) is None
    other = key_group_plan(q, [0] * q.key_groups, keep={"s:parse->enrich2": 0.5})
    assert plan_problem(other, q, 2).startswith("shed.locations: 's:parse->enrich2' is not")
    released = key_group_plan(q, [0] * q.key_groups, hot={7: ((0, 0.5), (1, 0.5))})
    released = released.next(scale=released.scale.model_copy(update={"nodes": 1}))
    assert (
        plan_problem(released, q, 2) == "routing.hot.7: partition 1 is released (scale.nodes = 1)"
    )


def test_the_daemon_steers_a_split_pipeline_by_its_paths(tmp_path: Path) -> None:
    """External mode (a live pipeline's working directory): the daemon observes and plans
    with the path streams, each tied to its input stream (a branch dropped whole is seen at
    its sibling's rate)."""
    from controller.config import load_settings
    from controller.wiring import make_daemon_wiring

    sub = {"kind": "spark-external", "workdir": str(tmp_path / "pipe")}
    settings = load_settings(
        None,
        substrate=sub | {"scenario": str(SCENARIOS / "spark-split-shed.yaml")},
        metrics={"port": 0},
        decision_log=str(tmp_path / "d.sqlite"),
        state_dir=str(tmp_path / "state"),
    )
    ext, policy = make_daemon_wiring(settings)
    assert ext.streams == [ENRICH, DIRECT, "t"] and ext.inputs == ["s", "s", "t"]  # type: ignore[attr-defined]
    assert policy.ctx.network.streams == (ENRICH, DIRECT, "t")


@pytest.mark.spark
def test_lp_drops_after_the_split_and_at_an_input_on_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """In the loop on local[2] (a headroom low enough that a small replay is overloaded): the
    plans the batches pinned drop the enriched branch after the split and t at its input,
    the direct branch least, and the output equals the reference with those drops."""
    from controller.spark_replay import replay_spark

    res = replay_spark(
        split_scenario(headroom=0.05),
        batches=5,
        scale=0.02,
        interval_batches=1,
        workdir=tmp_path,
        spark=spark,
    )
    assert res.summary["output_matches_reference"] is True
    assert res.summary["rows_dropped"] > 0
    stats = [read_batch_stats(f) for f in sorted((tmp_path / "metrics").glob("batch-*.json"))]
    shed = [b for b in stats if b.info.get("stream_keep")]
    assert shed, [b.info for b in stats]
    keeps = [b.info["stream_keep"] for b in shed]
    assert all(k.get(ENRICH, 1.0) < 0.5 for k in keeps), keeps  # after the split
    assert any(0.0 < k.get("t", 1.0) < 1.0 for k in keeps), keeps  # at an input
    # in the order of the paths' costs: the enriched branch, then t, then the direct branch
    for k in keeps:
        e, t, d = (k.get(p, 1.0) for p in (ENRICH, "t", DIRECT))
        assert e <= t <= d and e < d, keeps
    # each path's rows are counted as its own: the direct branch carries every row of s
    b = max(shed, key=lambda b: sum(b.stream_rows.values()))
    assert set(b.stream_rows) <= {ENRICH, DIRECT, "t"} and b.stream_rows[DIRECT] > 0
    assert b.stream_rows.get(ENRICH, 0) < b.stream_rows[DIRECT]
    # a replay's input is written ahead: the segments after a batch are no backlog to drain
    # (reported as one, it cut the capacity the LP planned with to as little as a fifth)
    shed_in = [d.details["shed"] for d in res.decisions if "shed" in d.details]
    assert shed_in and all(max(s["backlog_s"]) == 0.0 for s in shed_in), shed_in
    plans = [json.loads(f.read_text()) for f in sorted((tmp_path / "plans").glob("v*.json"))]
    assert any(ENRICH in p["shed"]["locations"] for p in plans)
