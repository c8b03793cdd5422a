"""Active standby for the driver: a second driver follows every batch the primary pins and,
when the primary dies between a batch's output and its commit, publishes that batch at
takeover (cluster marker: real driver processes on local-cluster)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from controller.live_rig import driver_failover
from controller.scenario import load_scenario
from controller.testing import alternating_plan, assert_matches_reference
from spark_adapter.actuator import PlanStore
from spark_adapter.operators import reference_output
from spark_adapter.query import compile_query
from spark_adapter.source import InputLog
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.cluster
LEASE_TTL_S = 3.0


def test_an_active_standby_publishes_the_crashed_batch_about_a_lease_expiry_later(
    tmp_path: Path,
) -> None:
    sc_path = SCENARIOS / "seed-groupby-window.yaml"
    sc = load_scenario(sc_path)
    q = compile_query(sc)
    log = InputLog(tmp_path / "input")
    log.generate(sc, 7, scale=0.1)
    events = log.read()
    PlanStore(tmp_path / "plans").publish(alternating_plan(q))
    res = driver_failover(
        sc_path, tmp_path, "active", kill_after=3, master="local-cluster[2,1,768]"
    )
    assert res["epoch"] == 2, res
    # it followed the primary batch by batch, so the batch the primary wrote and did not
    # commit was already processed: published at takeover, with no refold
    assert 3 in res["published"] and set(range(4)) <= set(res["followed"]), res
    assert res["restored_through"] >= 3
    with sqlite3.connect(tmp_path / "planlog.sqlite") as db:
        pins = [b for (b,) in db.execute("SELECT batch_id FROM pins ORDER BY batch_id")]
    assert pins == list(range(len(pins)))
    assert res["committed"] == list(range(len(res["committed"])))
    frames = [
        pd.read_parquet(f)
        for b in res["committed"]
        for f in sorted((tmp_path / "output" / f"batch={b}").glob("*.parquet"))
    ]
    got = pd.concat(frames, ignore_index=True).sort_values(
        ["key", "window_start"], ignore_index=True
    )
    assert_matches_reference(got, reference_output(events, q))
    # a takeover costs about a lease expiry (a warm passive standby started first: 6.2 s)
    assert res["t_first_commit"] - res["t_crash"] <= LEASE_TTL_S + 2.0, res
