"""``trimtab compare --substrate spark``: placements side by side on Spark, each replayed over
the same input in one session, each output checked against the reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SCENARIOS

EXE = str(Path(sys.executable).parent / "trimtab")


@pytest.mark.spark
def test_compare_on_spark_runs_each_placement_over_the_same_input(capsys) -> None:  # type: ignore[no-untyped-def]
    """hash and LLF on ``spark-anticorrelated``: one row each, in the order named, over the
    same rows in; each routed the key groups by its own plan (the partitions' row counts
    differ between them), each output equal to the reference; the table names both."""
    from controller.cli.compares import _show_compared

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    argv = [EXE, "compare", str(SCENARIOS / "spark-anticorrelated.yaml"), "--substrate", "spark"]
    argv += ["--placement", "hash,llf", "--batches", "4", "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout)
    assert [(x["placement"], x["run_order"], x["substrate"]) for x in rows] == [
        ("hash", 1, "spark"),
        ("llf", 2, "spark"),
    ]
    assert all(x["output_matches_reference"] and x["lost_tuples"] == 0 for x in rows), rows
    assert all(x["batches"] == 4 and x["warmup_batches_excluded"] == 1 for x in rows)
    rows_in = {x["rows_in"] for x in rows}
    assert len(rows_in) == 1 and rows_in.pop() > 0, rows  # the same input for both
    assert {sum(x["partition_rows"]) for x in rows} == {rows[0]["rows_processed"]}
    # hash puts key group g on partition g mod 2; LLF balances the groups' modelled loads:
    # the partitions saw different rows (a comparison that ran one plan twice would not)
    assert rows[0]["partition_rows"] != rows[1]["partition_rows"], rows
    _show_compared(rows, ha=False, shedding=False, spark=True)
    out, err = capsys.readouterr()
    assert "on Spark (local[2], hash routing)" in out
    assert "hash" in out and "llf" in out and "batch_duration_p99" in out
    assert "one run per method, in the order named, over the same input" in err
