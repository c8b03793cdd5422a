"""The example test the README shows a user (``examples/test_own_pipeline.py``) passes, run on
the suite's shared Spark session (its own fixture would start another)."""

from __future__ import annotations

import runpy
from pathlib import Path

from tests.conftest import ROOT


def test_the_readmes_example_test_of_a_users_pipeline_passes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    example = runpy.run_path(str(ROOT / "examples" / "test_own_pipeline.py"))
    example["test_a_plan_change_between_batches_keeps_the_output_exact"](spark, tmp_path)
