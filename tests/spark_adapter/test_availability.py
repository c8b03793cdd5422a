"""Passive standby on Spark: Young/Daly snapshot cadence, and restore from its snapshots."""

from __future__ import annotations

import itertools
from pathlib import Path

from controller.scenario import load_scenario
from controller.testing import alternating_plan, assert_matches_reference
from core.plans import Plan
from ha.passive_standby import young_daly_batches
from spark_adapter.pipeline import PipelineOptions, SparkPipeline
from spark_adapter.query import compile_query
from tests.conftest import SCENARIOS


def _plan(q) -> Plan:  # type: ignore[no-untyped-def]
    return alternating_plan(q)


def test_young_daly_cadence_and_restore_from_its_snapshots(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    # a short MTBF keeps k small enough to see several snapshots in six batches
    opts = PipelineOptions(
        2, snapshot_every=1, snapshot_mtbf_s=0.5, snapshot_max_every=4, retention="passive"
    )
    pipe = SparkPipeline(spark, q, tmp_path, opts)
    pipe.input.generate(sc, 6, scale=0.05)
    events = pipe.input.read()
    pipe.plans.publish(_plan(q))
    pipe.run_available()
    snaps = [b for b, _ in pipe.log.snapshots()]
    assert snaps and snaps[0] == 0  # k starts at 1: the first batch is snapshotted
    # each later gap is the Young/Daly interval chosen after the previous snapshot
    ks = {
        b: st.info["snapshot_every"] for b, st in pipe.stats.items() if "snapshot_every" in st.info
    }
    assert set(ks) == set(snaps)
    for a, b in itertools.pairwise(snaps):
        assert b - a == ks[a]
    assert all(1 <= k <= 4 for k in ks.values())
    c = pipe.cadence
    assert c.cost_s is not None and c.batch_s is not None
    assert c.k == young_daly_batches(c.cost_s, c.mtbf_s, c.batch_s, c.lo, c.hi)
    committed = pipe.log.committed()
    pipe.states.clear()  # the driver is gone: a new one restores from the snapshots
    fresh = SparkPipeline(spark, q, tmp_path, opts)
    assert fresh.restore() == committed[-1]
    assert fresh.states and max(fresh.states) == committed[-1]
    fresh.flush()
    got, (exp, _) = fresh.output(), fresh.reference(events)
    assert_matches_reference(got, exp)
    fresh.cleanup()
