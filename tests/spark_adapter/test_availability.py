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


def test_the_primary_keeps_what_a_waiting_standbys_next_follow_reads(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A warm standby refolds, while it waits, the batches committed since its last follow.
    The primary trimmed the input log past each new snapshot, so a follow could read a
    segment trimmed meanwhile (a Spark read error in a healthy standby's log). The standby's
    mark now holds the primary's trimming back while the standby runs, and no longer."""
    import json
    import os

    from spark_adapter.standby import DriverOptions, _driver_pipeline
    from spark_adapter.standby_floor import (
        REFOLDING,
        mark_refolding,
        next_segment,
        standby_floor,
        unmark_refolding,
    )

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    primary = _driver_pipeline(spark, sc, tmp_path, DriverOptions(snapshot_every=1))
    primary.input.generate(sc, 2, scale=0.05)
    primary.plans.publish(_plan(q))
    primary.run_available()
    assert primary.log.committed() == [0, 1] and primary.input.trimmed_below() == 2
    standby = _driver_pipeline(spark, sc, tmp_path, DriverOptions(snapshot_every=1))
    assert standby.restore() == 1 and next_segment(standby) == 2
    mark_refolding(tmp_path, next_segment(standby))
    primary.input.generate(sc, 3, scale=0.05, start=2)
    primary.run_available()  # batches 2-4, each snapshotted
    assert primary.log.committed() == [0, 1, 2, 3, 4]
    assert primary.input.segments() == [2, 3, 4]  # trimmed past batch 4's snapshot before
    # a standby that took over, or stopped, holds nothing back
    unmark_refolding(tmp_path)
    primary.input.generate(sc, 1, scale=0.05, start=5)
    primary.run_available()
    assert primary.input.segments() == []
    # nor does one that died: its mark names a process that is gone (here, the right pid
    # with another start time, as when the system has given the pid to another process)
    dead = {"pid": os.getpid(), "started": 1.0, "segment": 0}
    (tmp_path / REFOLDING / "1.json").write_text(json.dumps(dead))
    assert standby_floor(tmp_path)() is None
    primary.cleanup()
    standby.cleanup()
