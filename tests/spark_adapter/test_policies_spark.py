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


def test_correlation_placement_pairs_anti_phased_key_groups_on_spark(waves_run) -> None:  # type: ignore[no-untyped-def]
    """Hash puts each class on one partition; after the window fills, the global step mixes
    them, and every batch's output still equals the reference."""
    res, tmp_path = waves_run
    s = res.summary
    assert s["output_matches_reference"] is True
    reasons = [d.reason for d in res.decisions if d.applied]
    assert any(r.startswith("global correlation placement") for r in reasons), reasons
    assert s["migrations"] > 0
    first = PlanStore(tmp_path / "plans").load(0).placement.as_array()
    last = PlanStore(tmp_path / "plans").load_current().placement.as_array()
    cls = np.arange(first.size) % 2  # the class of key group g (2 divides the 16 groups)
    # the initial plan is hash-like: one class per partition
    assert {int(np.unique(cls[first == p]).size) for p in (0, 1)} == {1}
    for p in (0, 1):  # after the global step each partition holds both classes, evenly
        on = cls[last == p]
        assert abs(int((on == 0).sum()) - int((on == 1).sum())) <= 2, last.tolist()


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
