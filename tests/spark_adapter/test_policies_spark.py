"""The controller's placement policies acting on Spark, in the loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from controller.scenario import ScenarioFile, load_scenario
from controller.spark_replay import replay_spark
from spark_adapter.actuator import PlanStore

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _short_waves() -> ScenarioFile:
    """spark-anticorrelated with a period of 8 batches and an 8-sample window."""
    doc = load_scenario(SCENARIOS / "spark-anticorrelated.yaml").model_dump()
    doc["duration_s"] = 60
    doc["streams"][0]["keys"]["waves"] |= {"period_s": 16, "step_s": 2}
    doc["controller"]["window_k"] = 8
    return ScenarioFile.model_validate(doc)


@pytest.fixture(scope="module")
def waves_run(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    work = tmp_path_factory.mktemp("waves")
    res = replay_spark(
        _short_waves(),
        batches=12,
        placement="correlation-twoway",
        scale=0.5,
        interval_batches=2,
        workdir=work,
        spark=spark,
    )
    return res, work


def _class_imbalance(assign: np.ndarray) -> int:
    """Over both partitions, how many more key groups of one wave class than of the other
    each holds (the class of key group g is g % 2: 2 divides the 16 groups)."""
    cls = np.arange(assign.size) % 2
    return sum(
        abs(int((cls[assign == p] == 0).sum() - (cls[assign == p] == 1).sum())) for p in (0, 1)
    )


def test_correlation_placement_pairs_anti_phased_key_groups_on_spark(waves_run) -> None:  # type: ignore[no-untyped-def]
    """The initial plan balances the key groups' modelled mean loads, which says nothing of
    their phases; after the window fills, the global step pairs anti-phased groups (each
    partition holds the two classes more evenly), and the output still equals the reference."""
    res, tmp_path = waves_run
    s = res.summary
    assert s["output_matches_reference"] is True
    reasons = [d.reason for d in res.decisions if d.applied]
    assert any(r.startswith("global correlation placement") for r in reasons), reasons
    assert s["migrations"] > 0
    # the pair-wise rounds' own moves, counted from the decisions: none of the global step's
    pairwise = [d for d in res.decisions if d.applied and d.details.get("phase") == "pairwise"]
    assert s["pairwise_moves"] == sum(d.details["moved"] for d in pairwise) < s["migrations"]
    # by cause, the decisions' moves add up to the migrations counted from the plans the
    # pipeline ran: the global step's among them
    by = s["migrations_by_cause"]
    assert sum(by.values()) == s["migrations"] and by["global-step"] > 0, by
    # the global step's plan is pinned from the batch ``global_step_batch`` names (what a short
    # Spark run's note counts): the routing the batches ran holds from the first round's plan
    # (pinned at batch 2) through the warm-up rounds and changes there
    from controller.spark_replay import global_step_batch

    per = {b["batch"]: b["routing_digest"] for b in s["routing_per_batch"]}
    at = global_step_batch(8)
    assert len({per[b] for b in range(2, at)}) == 1 and per[at] != per[at - 1], per
    first = PlanStore(tmp_path / "plans").load(0).placement.as_array()
    last = PlanStore(tmp_path / "plans").load_current().placement.as_array()
    assert _class_imbalance(first) >= 2, first.tolist()  # else the step had nothing to do
    assert _class_imbalance(last) < _class_imbalance(first), (first.tolist(), last.tolist())


def test_calibration_from_the_run_predicts_its_batches(waves_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """calibrate writes an overlay validate accepts; the calibrated simulator's batch p50 is
    near the run's (without the fitted per-batch overhead it would be a fraction of it)."""
    from typer.testing import CliRunner

    from controller.cli import app

    _, work = waves_run
    out = tmp_path / "cal.yaml"
    runner = CliRunner()
    r = runner.invoke(app, ["calibrate", str(work), "--out", str(out)])
    assert r.exit_code == 0, r.output
    v = runner.invoke(app, ["validate", str(out)])
    assert v.exit_code == 0 and "calibration" in v.output, v.output
    scen = tmp_path / "scenario.yaml"
    scen.write_text(yaml.safe_dump(_short_waves().model_dump(mode="json")))
    rp = runner.invoke(
        app,
        [
            "replay",
            str(scen),
            "--calibration",
            str(out),
            "--placement",
            "correlation-twoway",
            "--ticks",
            "12",
            "--json",
        ],
    )
    assert rp.exit_code == 0, rp.output
    got = json.loads(rp.stdout)
    overlay = yaml.safe_load(out.read_text())
    measured = overlay["calibration"]["batch_duration_p50_s"]
    assert overlay["simulator"]["batch_model"]["batch_overhead_s"] > 0
    assert abs(got["predicted_batch_duration_p50"] / measured - 1) < 0.35, (got, measured)


def _stream_balance(coeff: np.ndarray, assign: np.ndarray) -> float:
    """The largest share of one stream's modelled load on one partition (0.5 is even)."""
    from placement.feasible import node_coefficients

    per = node_coefficients(coeff, assign, 2)
    return float((per / per.sum(axis=0)).max())


def test_the_static_model_tells_key_groups_hot_in_different_streams_apart() -> None:
    """spark-bursty-rod's streams are hot on different keys: the controller's model gives each
    key group a load per stream from that stream's declared keys (uniform shares would make
    every key group alike and leave ROD nothing to place by)."""
    from controller.wiring import spark_context
    from spark_adapter.query import compile_query

    sc = load_scenario(SCENARIOS / "spark-bursty-rod.yaml")
    coeff = spark_context(sc, compile_query(sc), 2, 0.1).units.coeff
    assert coeff.shape == (8, 2)
    assert int(np.argmax(coeff[:, 0])) != int(np.argmax(coeff[:, 1]))
    assert coeff[:, 0].max() > 2.5 * coeff[:, 0].min()


def test_rod_places_key_groups_on_spark_by_their_streams(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ROD's initial plan is what the Spark pipeline runs: each partition takes a like part of
    each bursty stream, where least-loaded fill (mean load only) leaves one stream lopsided;
    the output equals the reference."""
    from controller.wiring import make_policy, spark_context
    from spark_adapter.query import compile_query

    sc = load_scenario(SCENARIOS / "spark-bursty-rod.yaml")
    ctx = spark_context(sc, compile_query(sc), 2, 0.05)
    coeff = ctx.units.coeff
    res = replay_spark(sc, batches=3, placement="rod", scale=0.05, workdir=tmp_path, spark=spark)
    assert res.summary["output_matches_reference"] is True
    ran = PlanStore(tmp_path / "plans").load(0).placement.as_array()
    llf = np.asarray(make_policy(sc, "llf", ctx=ctx).initial_plan().placement.as_array())
    assert _stream_balance(coeff, ran) < 0.53
    assert _stream_balance(coeff, llf) > 0.6
    busy = np.asarray(res.summary["partition_busy_s"])
    assert busy.min() > 0  # both partitions ran key groups


def test_pipeline_verify_reads_a_replay_workdir_without_writing(waves_run) -> None:  # type: ignore[no-untyped-def]
    """``pipeline verify``'s check on a finished replay's working directory: equal to the
    reference, and no file in the directory created or changed by it."""
    from spark_adapter.query import compile_query
    from spark_adapter.verification import verify_workdir

    _, work = waves_run
    before = {p: p.stat().st_mtime_ns for p in work.rglob("*")}
    got = verify_workdir(work, compile_query(_short_waves()))
    assert got["output_matches_reference"] is True, got["mismatch"]
    assert got["batches_committed"] == 13 and got["rows_in"] > 0  # 12 and the final flush
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*")} == before
