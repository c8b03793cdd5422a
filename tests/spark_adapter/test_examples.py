"""The example test the README shows a user (``examples/test_own_pipeline.py``) passes, run on
the suite's shared Spark session (its own fixture would start another)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import ROOT


def test_the_readmes_example_test_of_a_users_pipeline_passes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = ROOT / "examples" / "test_own_pipeline.py"
    spec = importlib.util.spec_from_file_location("own_pipeline_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.test_a_plan_change_between_batches_keeps_the_output_exact(spark, tmp_path)
