"""``trimtab compare --substrate spark``: placements side by side on Spark, each replayed over
the same inputs in one session, each output checked against the reference."""

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
def test_compare_on_spark_runs_each_placement_over_the_same_inputs(capsys) -> None:  # type: ignore[no-untyped-def]
    """hash, LLF and least-loaded (LLF with failover: the same plans here) on
    ``spark-anticorrelated`` over the inputs of 2 seeds: one row each, in the order named, the
    order reversed on the second input; the same rows in for each on each input, and the two
    inputs differ; hash and LLF routed the key groups by their own plans (the partitions' row
    counts differ between them), every output equal to the reference; the row's figures are
    the means of its runs; LLF and least-loaded are named as having run the same plans, hash
    is not; the table names all three and says which ran alike."""
    from controller.cli.compares import _show_compared

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    argv = [EXE, "compare", str(SCENARIOS / "spark-anticorrelated.yaml"), "--substrate", "spark"]
    argv += ["--placement", "hash,llf,least-loaded", "--batches", "4", "--seeds", "2", "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout)
    got = [(x["placement"], x["run_order"], x["seeds"], x["substrate"]) for x in rows]
    assert got == [
        ("hash", [1, 6], 2, "spark"),
        ("llf", [2, 5], 2, "spark"),
        ("least-loaded", [3, 4], 2, "spark"),
    ]
    assert all(x["output_matches_reference"] and x["lost_tuples"] == 0 for x in rows), rows
    assert all(x["batches"] == 4 and x["warmup_batches_excluded"] == 1 for x in rows)
    runs = [x["runs"] for x in rows]
    assert all(len(rr) == 2 and all(run["output_matches_reference"] for run in rr) for rr in runs)
    per_seed = [[run["rows_in"] for run in rr] for rr in runs]
    assert per_seed[0] == per_seed[1] == per_seed[2] and per_seed[0][0] != per_seed[0][1]
    for x in rows:  # the row's figure is its runs' mean
        p99 = [run["batch_duration_p99"] for run in x["runs"]]
        assert x["batch_duration_p99"] == pytest.approx(sum(p99) / 2), x
    # hash puts key group g on partition g mod 2; LLF balances the groups' modelled loads:
    # the partitions saw different rows (a comparison that ran one plan twice would not)
    assert rows[0]["partition_rows"] != rows[1]["partition_rows"], rows
    # LLF and least-loaded ran the same plans batch for batch, and hash did not
    assert [x["same_plans_as"] for x in rows] == [[], ["least-loaded"], ["llf"]], rows
    _show_compared(rows, ha=False, shedding=False, spark=True)
    out, err = capsys.readouterr()
    assert "on Spark (local[2], hash routing)" in out
    assert "hash" in out and "llf" in out and "batch_duration_p99" in out
    assert "the same plans: llf = least-loaded (every timed batch" in " ".join(out.split())
    assert "the mean of 2 runs per method, each over the input of one seed" in err
