"""The controller's placement policies acting on Spark, in the loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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


def test_correlation_placement_pairs_anti_phased_key_groups_on_spark(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Hash puts each class on one partition; after the window fills, the global step mixes
    them, and every batch's output still equals the reference."""
    res = replay_spark(
        _short_waves(),
        batches=12,
        placement="correlation-twoway",
        scale=0.5,
        interval_batches=2,
        workdir=tmp_path,
        spark=spark,
    )
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
