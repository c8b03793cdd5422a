"""A test of your own pipeline with trimtab's test kit (``controller.testing``): run it with
``pytest examples/test_own_pipeline.py`` from the repository (it starts a ``local[2]`` Spark).

The query is a scenario's; the controller's place is taken by plans the test publishes, one
before the first batch and another between batches, as a controller would. The output must
equal the reference computed without Spark from the same input, whatever the plans did.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.scenario import load_scenario
from controller.testing import alternating_plan, assert_matches_reference, key_group_plan
from spark_adapter.pipeline import PipelineOptions, SparkPipeline
from spark_adapter.query import compile_query

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "seed-groupby-window.yaml"


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from spark_adapter.session import make_session

    session = make_session("local[2]")
    yield session
    session.stop()


def test_a_plan_change_between_batches_keeps_the_output_exact(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIO)
    query = compile_query(sc)
    pipe = SparkPipeline(spark, query, tmp_path, PipelineOptions(2))
    pipe.input.generate(sc, 2, scale=0.05)  # two segments (ticks) of the scenario's input
    pipe.plans.publish(alternating_plan(query))  # key group i on partition i mod 2
    pipe.run_available()  # a micro-batch per segment
    # every key group moves to partition 0 (its state moves with it), half the rows dropped
    pipe.plans.publish(key_group_plan(query, [0] * query.key_groups, version=1, keep={"s": 0.5}))
    pipe.input.generate(sc, 2, scale=0.05, start=2)
    pipe.run_available()
    pipe.flush()  # the end of the stream: every window closes
    got, (exp, dropped) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)  # the reference keeps exactly the rows each batch kept
    assert dropped > 0  # the second plan did act: it dropped rows
    assert pipe.stats[2].state_moved > 0  # and moved key groups' state
    assert [v for _, v in pipe.log.pins()] == [0, 0, 1, 1, 1]  # the flush is a batch too
    pipe.cleanup()
