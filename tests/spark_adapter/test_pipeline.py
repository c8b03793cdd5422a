"""The Spark pipeline on a real local[2] session."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from controller.scenario import load_scenario
from controller.testing import assert_matches_reference, key_group_plan
from core.hashing import stable_mod, stable_uniform
from core.plans import Plan, RoutingConfig
from shedding.drops import keep_mask
from spark_adapter import batch_compiler as bc
from spark_adapter import batch_executor as steps
from spark_adapter import operators as ops
from spark_adapter.actuator import BatchPin
from spark_adapter.batch_compiler import ROUTE_SEED, compile_batch
from spark_adapter.batchstats import observation_from_batches
from spark_adapter.input_order import InputOutOfOrder
from spark_adapter.operators import ROW_DDL
from spark_adapter.pipeline import QUERY_LOGGER, PipelineOptions, SparkPipeline
from spark_adapter.plan_fit import PlanRefused
from spark_adapter.query import compile_query
from spark_adapter.session import jvm_log_level
from spark_adapter.source import INPUT_SCHEMA_DDL
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.spark


def make(
    spark,
    tmp: Path,
    name: str = "seed-groupby-window",
    n: int = 2,
    segments: int = 4,
    scale: float = 0.1,
    window_drops: bool = False,
):  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    q = compile_query(sc)
    pipe = SparkPipeline(spark, q, tmp, PipelineOptions(n, window_drops=window_drops))
    pipe.input.generate(sc, segments, scale=scale)
    return sc, q, pipe


def plan(q, assignment, version=0, hot=None, keep=None, n=2):  # type: ignore[no-untyped-def]
    return key_group_plan(q, assignment, version, n, hot=hot, keep=keep)


def spec_of(p: Plan, q, n: int = 2, batch_id: int = 0):  # type: ignore[no-untyped-def]
    return compile_batch(p, BatchPin(batch_id, p.version, -np.inf, -np.inf, False), q, n)


def segment(spark, pipe, i):  # type: ignore[no-untyped-def]
    return spark.read.schema(INPUT_SCHEMA_DDL).parquet(str(pipe.input.path(i)))


def test_every_row_lands_in_the_planned_partition(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path, n=3)
    table = [(i * 7) % 3 for i in range(q.key_groups)]
    p = plan(q, table, hot={0: ((1, 0.25), (2, 0.75))}, n=3)
    empty = spark.createDataFrame([], ROW_DDL)
    routed = steps.shed_and_route(segment(spark, pipe, 0), empty, spec_of(p, q, 3))
    df = routed.repartitionById(3, "pid")
    got = df.select("key", "event_id", "pid", F.spark_partition_id().alias("part")).toPandas()
    assert len(got) > 0
    assert (got["pid"] == got["part"]).all()  # repartitionById is exact
    exp = np.asarray(table)[stable_mod(got["key"].to_numpy(), q.key_groups)]
    u = stable_uniform(got["event_id"].to_numpy(), ROUTE_SEED)
    hot = got["key"].to_numpy() == 0
    exp[hot] = np.where(u[hot] < 0.25, 1, 2)
    np.testing.assert_array_equal(
        got["pid"].to_numpy(), exp
    )  # Spark routing = Python routing, row by row
    plan_txt = df._jdf.queryExecution().executedPlan().toString()
    assert plan_txt.count("shufflepartitionidpassthrough") == 1


def test_drops_are_deterministic_and_match_python(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path)
    p = plan(q, [0] * q.key_groups, keep={"s": 0.3})
    seg = segment(spark, pipe, 1)
    cond = F.expr(bc.keep_sql(p, q, 5))
    kept = sorted(r[0] for r in seg.where(cond).select("event_id").collect())
    again = sorted(r[0] for r in seg.where(cond).select("event_id").collect())
    ids = pipe.input.read([1])["event_id"].to_numpy()
    assert kept == again == sorted(ids[keep_mask(ids, 5, 0.3)].tolist())
    assert 0.2 < len(kept) / len(ids) < 0.4


def test_windowed_aggregate_and_join_equal_reference_with_plan_switches(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    for name in ("seed-groupby-window", "seed-join-groupby"):
        _, q, pipe = make(spark, tmp_path / name, name=name, segments=4, scale=0.1)
        g = q.key_groups
        pipe.plans.publish(plan(q, [i % 2 for i in range(g)], keep={s: 0.7 for s in q.sides}))
        for b in range(4):
            if b == 2:  # move every key group and split a hot key at batch 2
                pipe.plans.publish(
                    plan(
                        q,
                        [(i + 1) % 2 for i in range(g)],
                        1,
                        hot={0: ((0, 0.5), (1, 0.5))},
                        keep={s: 0.7 for s in q.sides},
                    )
                )
            st = pipe.process(segment(spark, pipe, b), b)
            assert st.plan_version == (
                1 if b >= 2 else 0
            )  # a plan switch takes effect at the next batch
        pipe.flush()
        got, (exp, dropped) = pipe.output(), pipe.reference()
        assert dropped > 0 and len(exp) > 0
        assert_matches_reference(got, exp)
        assert sum(s.state_moved for s in pipe.stats.values()) > 0
        pipe.cleanup()


def test_replayed_batch_gives_identical_output(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path, segments=3)
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)], keep={"s": 0.5}))
    for b in range(3):
        pipe.process(segment(spark, pipe, b), b)
    first = pd.read_parquet(tmp_path / "output" / "batch=2").sort_values(
        ["key", "window_start"], ignore_index=True
    )
    pipe.plans.publish(plan(q, [0] * q.key_groups, 1))  # a newer plan must not affect the replay
    st = pipe.process(segment(spark, pipe, 2), 2)
    again = pd.read_parquet(tmp_path / "output" / "batch=2").sort_values(
        ["key", "window_start"], ignore_index=True
    )
    assert st.replay and st.plan_version == 0
    pd.testing.assert_frame_equal(first, again)
    assert pipe.log.pins() == [(0, 0), (1, 0), (2, 0)]
    pipe.cleanup()


def test_the_collect_job_writes_the_output_and_a_replay_replaces_it(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each partition writes its whole keys' final values in the job that collects the
    statistics (one file per partition, no Spark writer), the driver adds the split keys;
    a replay empties the batch's directory first, so a stale file of a first attempt goes."""
    _, q, pipe = make(spark, tmp_path, segments=3)
    hot = {0: ((0, 0.5), (1, 0.5))}
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)], hot=hot))
    for b in range(3):
        pipe.process(segment(spark, pipe, b), b)
    out = tmp_path / "output" / "batch=2"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["part-00000.parquet", "part-00001.parquet", "part-split-keys.parquet"]
    first = pd.read_parquet(out).sort_values(["key", "window_start"], ignore_index=True)
    assert len(first) > 0 and 0 in set(pd.read_parquet(out / "part-split-keys.parquet")["key"])
    first.head(3).to_parquet(out / "part-00007.parquet")  # a stale file of a first attempt
    st = pipe.process(segment(spark, pipe, 2), 2)
    again = pd.read_parquet(out).sort_values(["key", "window_start"], ignore_index=True)
    assert st.replay and "part-00007.parquet" not in {p.name for p in out.iterdir()}
    pd.testing.assert_frame_equal(first, again)
    assert st.rows_out == len(first)
    pipe.flush()
    assert_matches_reference(pipe.output(), pipe.reference()[0])
    pipe.cleanup()


def test_moved_key_group_state_arrives_whole(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path, segments=2)
    g = q.key_groups
    pipe.plans.publish(plan(q, [0] * g))
    for b in range(2):
        pipe.process(segment(spark, pipe, b), b)
    before = pipe.states[1].toPandas()
    pipe.plans.publish(plan(q, [1] * g, 1))
    empty = spark.createDataFrame([], INPUT_SCHEMA_DDL)
    st = pipe.process(empty, 2)  # no input, no window closes (60 s windows): only the move
    after = pipe.states[2].toPandas()
    assert (before["pid"] == 0).all() and (after["pid"] == 1).all()
    assert st.state_moved == len(before) > 0
    cols = ["key", "side", "pane"]
    b = before.groupby(cols)[["cnt", "sum"]].sum().sort_index()
    a = after.groupby(cols)[["cnt", "sum"]].sum().sort_index()
    pd.testing.assert_frame_equal(a, b)
    pipe.cleanup()


def test_metrics_name_the_hot_partition(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sc, q, pipe = make(spark, tmp_path, name="zipf-hotkey-shift", segments=1, scale=0.1)
    hottest = int(pipe.input.read()["key"].value_counts().index[0])
    hot_g = int(stable_mod(np.array([hottest]), q.key_groups)[0])
    # the hot key group and three in four of the others on partition 1: about 3x the rows of
    # partition 0, so the measured busy time (timer noise about 0.02 s) cannot tie
    table = [int(i == hot_g or i % 4 != 0) for i in range(q.key_groups)]
    hot_pid = 1
    pipe.plans.publish(plan(q, table))
    st = pipe.process(segment(spark, pipe, 0), 0)
    obs = observation_from_batches([st], 2, list(q.sides), sc.tick_s, 0)
    assert st.rows[1] > 2 * st.rows[0]
    assert int(np.argmax(obs.node_load[:, 0])) == hot_pid
    assert int(np.argmax(st.rows)) == hot_pid
    assert obs.key_counts[np.argmax(obs.key_counts[:, 1]), 0] == hottest
    pipe.cleanup()


def test_the_observed_input_rate_is_the_offered_rate_under_drops(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The controller sees what arrived, not what its own drops kept: a shed batch's rows are
    divided by their keep. Counting the kept rows made the LP under-shed and oscillate. On the
    overload ramp's split, the enriched branch dropped after the split and the direct one kept
    whole both show the input's rate (every row is copied to both)."""
    sc, q, pipe = make(spark, tmp_path, name="spark-overload-ramp", segments=1, scale=0.1)
    enrich, direct = paths = list(q.sides)
    assert [q.stream_of(p) for p in paths] == ["s", "s"]
    table = [i % 2 for i in range(q.key_groups)]
    pipe.plans.publish(plan(q, table, keep={enrich: 0.4, direct: 1.0}))
    st = pipe.process(segment(spark, pipe, 0), 0)
    offered = len(pipe.input.read())
    assert st.info["stream_keep"] == {enrich: 0.4}  # a location that keeps all is not listed
    assert 0.3 * offered < st.stream_rows[enrich] < 0.5 * offered  # the drops kept ~40%
    assert st.stream_rows[direct] == offered
    obs = observation_from_batches([st], 2, paths, sc.tick_s, 0, ["s", "s"])
    assert obs.input_rates[:, 0] == pytest.approx([offered / sc.tick_s] * 2, rel=0.1)
    pipe.cleanup()


def test_spark_listens_on_loopback_only(spark) -> None:  # type: ignore[no-untyped-def]
    import os

    import psutil

    me = psutil.Process(os.getpid())
    pids = {me.pid, *(c.pid for c in me.children(recursive=True))}
    listening = [
        c
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert listening, "the Spark JVM should have listeners"
    assert all(c.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1") for c in listening), listening
    assert spark.sparkContext.uiWebUrl.startswith("http://127.0.0.1")


def test_rest_poller_and_listener(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from spark_adapter.metrics import ProgressListener, RestPoller

    # the shared session has run hundreds of batches by now: give its UI time to answer
    poller = RestPoller(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId, 10.0)
    execs = poller.executors()
    assert any(e["id"] == "driver" for e in execs)
    poller.new_tasks()  # skip history
    listener = ProgressListener()
    spark.streams.addListener(listener)
    try:
        _, q, pipe = make(spark, tmp_path, segments=2)
        pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)]))
        assert pipe.run_available() == 2
        tasks = poller.new_tasks()
        assert tasks and all(t["run_s"] >= 0 for t in tasks)
        import time

        deadline = time.monotonic() + 10
        events: list = []
        while len(events) < 2 and time.monotonic() < deadline:
            events += listener.drain()
            time.sleep(0.1)
        assert sorted({e["batch_id"] for e in events}) == [0, 1]
        pipe.cleanup()
    finally:
        spark.streams.removeListener(listener)
    with pytest.raises(ValueError, match="loopback"):
        RestPoller("http://10.0.0.1:4040", "app")


def test_replay_on_spark_with_the_controller(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from controller.spark_replay import replay_spark

    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    res = replay_spark(
        sc,
        batches=4,
        placement="hash",
        partitioner="wchoices",
        scale=0.03,
        interval_batches=1,
        workdir=tmp_path,
        spark=spark,
    )
    s = res.summary
    for k in (
        "batches",
        "batch_duration_p50",
        "batch_duration_p99",
        "rows_in",
        "rows_out",
        "rows_dropped",
        "state_rows_moved",
        "output_matches_reference",
        "throughput",
        "mean_latency",
        "lost_tuples",
        "duplicate_tuples",
    ):
        assert k in s
    assert s["output_matches_reference"] is True
    assert s["lost_tuples"] == 0 and s["duplicate_tuples"] == 0
    assert any(d.kind == "reroute" for d in res.decisions)
    hot = [d for d in res.decisions if d.details.get("routing", {}).get("hot_keys", 0) > 0]
    assert hot, "W-Choices should split the Zipf 1.3 hot keys"


def test_a_replay_that_timed_no_batch_reports_no_timing(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A stream of rate 0: no batch reads a row, so no duration was measured. The replay says
    so (None, "n/a" in the table) instead of reporting 0 s and 0 rows/s."""
    import yaml

    from controller.cli.tables import SPARK_KEYS, table
    from controller.spark_replay import replay_spark

    d = yaml.safe_load((SCENARIOS / "seed-groupby-window.yaml").read_text())
    d["streams"][0]["rate"] = {"kind": "constant", "rate": 0.0}
    (tmp_path / "zero.yaml").write_text(yaml.safe_dump(d))
    sc = load_scenario(tmp_path / "zero.yaml")
    s = replay_spark(sc, batches=2, placement="hash", workdir=tmp_path / "w", spark=spark).summary
    assert s["rows_in"] == 0 and s["batches"] == 0 and s["output_matches_reference"] is True
    timing = ("throughput", "mean_latency", "p99_latency", "batch_duration_p50")
    assert [s[k] for k in timing] == [None] * 4
    from rich.console import Console

    console = Console(width=200)
    with console.capture() as out:
        console.print(table([s], SPARK_KEYS, "scenario"))
    row = next(line for line in out.get().splitlines() if "batch_duration_p50" in line)
    assert "n/a" in row and "0.0" not in row, row


def test_external_controller_protocol(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from spark_adapter.external import ExternalSparkSubstrate

    # enough rows that a partition's work outweighs an empty partition's fixed cost
    sc, q, pipe = make(spark, tmp_path, segments=2, scale=0.25)
    pipe.plans.publish(plan(q, [0] * q.key_groups))
    pipe.run_available()
    ext = ExternalSparkSubstrate(tmp_path, list(q.sides), 2, sc.tick_s)
    obs = ext.observe()
    assert (
        obs.samples == 2 and obs.node_load[1].sum() < 0.3 * obs.node_load[0].sum()
    )  # all rows on partition 0
    assert ext.observe().samples == 0  # nothing new
    ext.apply(plan(q, [1] * q.key_groups, 1))
    pipe.input.generate(sc, 2, scale=0.25, start=2)
    pipe.run_available()
    obs = ext.observe()
    assert (
        obs.samples == 2 and obs.node_load[0].sum() < 0.3 * obs.node_load[1].sum()
    )  # the external plan moved all
    assert [v for _, v in pipe.log.pins()] == [0, 0, 1, 1]
    pipe.cleanup()


def test_shuffle_routing_splits_every_key_and_still_matches(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path, name="zipf-hotkey-shift", segments=2, scale=0.02)
    p = plan(q, [0] * q.key_groups).model_copy(
        update={"routing": RoutingConfig(partitioner="shuffle", num_partitions=2)}
    )
    pipe.plans.publish(p)
    pipe.run_available()
    pipe.flush()
    st = pipe.stats[0]
    assert min(st.rows) > 0.4 * st.rows.sum()  # spread evenly whatever the keys
    got, (exp, _) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)
    pipe.cleanup()


def test_only_split_keys_pay_the_merge_shuffle(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, q, pipe = make(spark, tmp_path, segments=1)
    partials = spark.createDataFrame([], ROW_DDL)

    def exchanges(p: Plan) -> int:
        out = steps.output_frame(partials, spec_of(p, q), q)
        return (
            out._jdf.queryExecution()
            .executedPlan()
            .toString()
            .count("Exchange hashpartitioning(key")
        )

    base = plan(q, [0] * q.key_groups)
    assert exchanges(base) == 0  # table routing: every key's partial is final where it is
    assert exchanges(plan(q, [0] * q.key_groups, hot={3: ((0, 0.5), (1, 0.5))})) == 0  # driver
    assert bc.split_keys(plan(q, [0] * q.key_groups, hot={3: ((0, 0.5), (1, 0.5))})) == (3,)
    shuffle = base.model_copy(
        update={"routing": RoutingConfig(partitioner="shuffle", num_partitions=2)}
    )
    assert exchanges(shuffle) == 1
    pipe.cleanup()


def test_merge_volume_follows_the_routing(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Partials merged across partitions: none when keys stay whole, one or two per window of
    a key split in two (its state waits in its first quota's partition), and every key's
    partials under round-robin; the output stays exact."""
    merged: dict[str, int] = {}
    out: dict[str, pd.DataFrame] = {}
    for mode in ("table", "split", "shuffle"):
        _, q, pipe = make(spark, tmp_path / mode, name="zipf-hotkey-shift", segments=2, scale=0.02)
        hottest = int(pipe.input.read()["key"].value_counts().idxmax())
        p = plan(
            q, [0] * q.key_groups, hot={hottest: ((0, 0.5), (1, 0.5))} if mode == "split" else None
        )
        if mode == "shuffle":
            p = p.model_copy(
                update={"routing": RoutingConfig(partitioner="shuffle", num_partitions=2)}
            )
        pipe.plans.publish(p)
        pipe.run_available()
        pipe.flush()
        merged[mode] = sum(st.info["partials_merged"] for st in pipe.stats.values())
        out[mode] = got = pipe.output()
        exp, _ = pipe.reference()
        assert_matches_reference(got, exp)
        if mode == "split":
            windows = int((got["key"] == hottest).sum())  # at most one partial per partition
            assert windows <= merged[mode] <= 2 * windows
        pipe.cleanup()
    rows_out = len(out["shuffle"])
    assert merged["table"] == 0
    assert 0 < merged["split"] < rows_out < merged["shuffle"] <= 2 * rows_out


def test_merge_cost_is_spent_per_partial() -> None:
    import dataclasses
    import time

    from spark_adapter.operators import charge_merge

    q = compile_query(load_scenario(SCENARIOS / "seed-groupby-window.yaml"))
    t0 = time.perf_counter()
    charge_merge(dataclasses.replace(q, merge_cost_us=20_000.0), 5)
    assert time.perf_counter() - t0 >= 0.1
    t0 = time.perf_counter()
    charge_merge(q, 10_000)  # merge_cost_us 0: vectorised merges cost nothing extra
    assert time.perf_counter() - t0 < 0.05


@pytest.mark.parametrize("window", [(2.0, 2.0), (3.0, 1.0)])  # tumbling, sliding
def test_window_drops_shed_whole_windows_and_keep_the_rest_exact(
    spark, tmp_path: Path, window: tuple[float, float]
) -> None:  # type: ignore[no-untyped-def]
    from controller.scenario import ScenarioFile
    from spark_adapter.operators import reference_output

    d = load_scenario(SCENARIOS / "seed-groupby-window.yaml").model_dump()
    top = next(o for o in d["operators"] if o.get("window"))
    top["window"] = {"size_s": window[0], "slide_s": window[1]}
    sc = ScenarioFile.model_validate(d)
    q = compile_query(sc)
    pipe = SparkPipeline(spark, q, tmp_path, PipelineOptions(2, window_drops=True))
    pipe.input.generate(sc, 16, scale=0.05)
    g = q.key_groups
    # changes while windows are open, then full: the sliding windows' two blocks (u = 0.93,
    # 0.91) are one dropped and one emitted, so the test compares real windows
    keeps = [1.0, 0.6, 0.3, 0.9, 1.0, 0.5, 0.2, 0.7] + [1.0] * 8
    for b in range(16):
        keep = {s: keeps[b] for s in q.sides}
        pipe.plans.publish(plan(q, [i % 2 for i in range(g)], b, keep=keep))
        pipe.process(segment(spark, pipe, b), b)
    pipe.flush()
    got, (exp, dropped) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)
    # every emitted window is exact: equal to the same window computed with no drops at all
    events = pipe.input.read()
    full = reference_output(events, q, pd.Series(np.ones(len(events), dtype=bool)))
    both = got.merge(full, on=["key", "window_start"], suffixes=("", "_exact"), how="left")
    assert both["value_exact"].notna().all()
    np.testing.assert_allclose(both["value"], both["value_exact"], rtol=1e-9)
    assert dropped > 0 and 0 < len(got) < len(full)  # load was shed, and whole windows went
    pipe.cleanup()


def test_window_drop_condition_in_spark_equals_python(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from shedding.window_drops import block_size, early_keep_mask, floor_keep_mask

    _, q, pipe = make(spark, tmp_path, segments=6, window_drops=True)
    keeps = [1.0, 0.3, 1.0, 0.9, 0.6, 0.8]  # a low keep while windows are open, then higher
    for b in range(6):
        pipe.plans.publish(plan(q, [0] * q.key_groups, b, keep={s: keeps[b] for s in q.sides}))
        pipe.process(segment(spark, pipe, b), b)
    b = 5
    pin = {r.batch_id: r for r in pipe.log.pin_rows()}[b]
    p = pipe.plans.load(b)
    floors = bc.drop_floors(
        b, pin.wm_prev, bc.window_keep(p, q), pipe.log.pin_rows(), pipe.version_keep, q
    )
    fsteps, default = floors.steps, floors.default
    assert fsteps and min(v for _, v in fsteps) < default  # earlier, lower keeps still count
    w, blk = q.panes_per_window, block_size(q.panes_per_window)
    panes = np.arange(-300, 900)
    df = spark.createDataFrame(pd.DataFrame({"pane": panes}))
    got = df.select(F.expr(bc.window_tuple_sql(floors, q)).alias("k")).toPandas()["k"]
    th, val = [t for t, _ in fsteps], [v for _, v in fsteps]
    want = floor_keep_mask(panes, w, q.slide_s, blk, th, val, default)
    np.testing.assert_array_equal(got.to_numpy(), want)  # Spark = Python, pane by pane
    # stricter than this batch's keep alone: windows an earlier keep ruled out take nothing
    plain = early_keep_mask(panes, w, default, blk)
    assert (want <= plain).all() and want.sum() < plain.sum()
    pipe.cleanup()


def test_live_stream_follows_the_log_on_its_trigger(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    pipe = SparkPipeline(spark, q, tmp_path, PipelineOptions(2))
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)]))

    def writer() -> None:
        pipe.input.generate(sc, 4, scale=0.05, pace_s=1.5)
        pipe.input.close()

    th = threading.Thread(target=writer)
    th.start()
    ended = pipe.run_stream(trigger_s=1.0, max_files=1)
    th.join()
    assert ended  # the log was closed: the stream ended
    pipe.flush()
    assert sorted(pipe.stats)[:4] == [0, 1, 2, 3]  # one segment per batch, as they arrived
    starts = [pipe.stats[b].info["started_at"] for b in range(4)]
    assert (np.diff(starts) >= 0.9).all()  # live, not at once
    # a micro-batch's files come from the source log: real event ranges, so the watermark
    # advances and windows close while the stream runs, not only at the final flush
    assert all(pipe.stats[b].event_range[0] >= 0 for b in range(4))
    assert sum(pipe.stats[b].rows_out for b in range(4)) > 0
    got, (exp, _) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)
    pipe.cleanup()


def test_replay_cli_on_spark_reports_the_spark_keys(tmp_path: Path) -> None:
    """`trimtab replay --substrate spark --json` as users run it (its own Spark session)."""
    import json
    import os
    import subprocess
    import sys

    from controller.cli import SPARK_KEYS
    from tests.conftest import ROOT

    exe = str(Path(sys.executable).parent / "trimtab")
    args = [exe, "replay", str(SCENARIOS / "zipf-hotkey-shift.yaml"), "--substrate", "spark"]
    args += ["--batches", "4", "--scale", "0.02", "--partitioner", "shuffle", "--placement"]
    args += ["hash", "--json"]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    r = subprocess.run(
        [*args, "--warmup-batches", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # none of the banner of Spark's fallback on its default logging, nor Hadoop's native-
    # library warning: lines a command-line user can do nothing with ("use sc.setLogLevel")
    for banner in ("default log4j profile", "default log level", "setLogLevel", "native-hadoop"):
        assert banner not in r.stderr, r.stderr[-2000:]
    out = json.loads(r.stdout)
    # its temporary working directory is gone (no --keep-workdir)
    assert out["workdir"] is None and not list(tmp.glob("trimtab-spark-*"))
    assert set(SPARK_KEYS) <= set(out) and out["output_matches_reference"] is True
    assert out["batches"] == 4 and out["warmup_batches_excluded"] == 2
    assert out["partials_merged"] >= out["rows_out"] > 0  # round-robin merges every key
    bad = subprocess.run(
        [*args, "--warmup-batches", "-1"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert bad.returncode == 2 and "warmup-batches" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_partition_count_change_mid_stream_matches_the_reference(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Scale 2 -> 1 -> 2 partitions at batch boundaries: the state of b - 1 is re-routed into
    the new layout in the batch's own shuffle, so the output equals the reference, the state
    arrives whole, and a replayed batch folds into its pinned partition count."""
    from core.plans import ScalePlan

    _, q, pipe = make(spark, tmp_path, segments=6)
    g = q.key_groups
    key = ["key", "window_start"]
    pipe.plans.publish(plan(q, [i % 2 for i in range(g)]))
    for b in range(6):
        if b == 2:  # scale in: every key group onto partition 0, partition 1 released
            pipe.plans.publish(plan(q, [0] * g, 0).next(scale=ScalePlan(nodes=1)))
        pipe.process(segment(spark, pipe, b), b)
        if b == 3:  # scale out again, then replay batch 3: it keeps its pinned single partition
            first = pd.read_parquet(tmp_path / "output" / "batch=3").sort_values(key)
            pipe.plans.publish(plan(q, [(i + 1) % 2 for i in range(g)], 1).next())
            again = pipe.process(segment(spark, pipe, 3), 3)
            assert again.replay and again.plan_version == 1 and again.rows[1] == 0
            pd.testing.assert_frame_equal(
                first.reset_index(drop=True),
                pd.read_parquet(tmp_path / "output" / "batch=3").sort_values(
                    key, ignore_index=True
                ),
            )
            state3 = pipe.states[3].toPandas()
    st = pipe.stats
    assert [st[b].plan_version for b in range(6)] == [0, 0, 1, 1, 2, 2]
    assert all(st[b].rows[1] == 0 and st[b].rows[0] > 0 for b in (2, 3))  # one partition
    assert all(st[b].rows.size == 2 for b in range(6))  # statistics keep the pipeline's width
    assert all((st[b].rows > 0).all() for b in (0, 1, 4, 5))
    assert (state3["pid"] == 0).all() and len(state3) > 0  # the state sat in partition 0
    assert st[2].state_moved > 0 and st[4].state_moved > 0
    pipe.flush()
    assert_matches_reference(pipe.output(), pipe.reference()[0])
    pipe.cleanup()


def test_a_quota_on_a_released_partition_is_refused() -> None:
    from core.plans import ScalePlan

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    p = plan(q, [0] * q.key_groups, hot={5: ((0, 0.5), (1, 0.5))}).next(scale=ScalePlan(nodes=1))
    with pytest.raises(ValueError, match=r"routing.hot.5: partition 1 is released"):
        spec_of(p, q)


def test_a_joined_node_gets_its_executor_before_any_partition() -> None:
    """A scale-out's first plan joins a node while every key group stays on partition 0: the
    batch folds into the one partition it routes to, and its executors follow the two nodes;
    once placement spreads, two partitions. Round-robin always spreads over the nodes."""
    from core.plans import RoutingConfig, ScalePlan

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    g = q.key_groups
    joined = plan(q, [0] * g).next(scale=ScalePlan(nodes=2))
    spec = spec_of(joined, q)
    assert (spec.partitions, spec.nodes, spec.slots) == (1, 2, 2)
    spread = joined.next(placement=plan(q, [i % 2 for i in range(g)]).placement)
    assert (spec_of(spread, q).partitions, spec_of(spread, q).nodes) == (2, 2)
    hot = joined.next(routing=RoutingConfig(num_partitions=2, hot={5: ((0, 0.5), (1, 0.5))}))
    assert spec_of(hot, q).partitions == 2  # a quota names partition 1
    rr = joined.next(routing=RoutingConfig(num_partitions=2, partitioner="shuffle"))
    assert spec_of(rr, q).partitions == 2


def test_a_filter_changed_between_batches_matches_the_pinned_reference(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """``filter_v`` (v > 10) becomes v > 60 and ``count_k`` a max of v from batch 3: the
    output equals the reference computed with each batch's pinned filter and each window's
    emitting batch's aggregate, and batch 3 replayed after v > 90 is published keeps v > 60."""
    _, q, pipe = make(spark, tmp_path, segments=6)
    base = plan(q, [i % 2 for i in range(q.key_groups)])
    pipe.plans.publish(base)
    key = ["key", "window_start"]
    for b in range(6):
        if b == 3:
            change = {"filter_v": {"value": 60}, "count_k": {"agg": "max"}}
            pipe.plans.publish(base.next(operators=change))
        st = pipe.process(segment(spark, pipe, b), b)
        if b == 3:
            first = pd.read_parquet(tmp_path / "output" / "batch=3").sort_values(key)
            cur = pipe.plans.load_current()
            newer = cur.next(operators={**cur.operators, "filter_v": {"value": 90}})
            pipe.plans.publish(newer)
            again = pipe.process(segment(spark, pipe, 3), 3)
            assert again.replay and again.plan_version == 1
            assert again.rows.sum() == st.rows.sum()
            pd.testing.assert_frame_equal(
                first.reset_index(drop=True),
                pd.read_parquet(tmp_path / "output" / "batch=3").sort_values(
                    key, ignore_index=True
                ),
            )
    rows = [int(pipe.stats[b].rows.sum()) for b in range(6)]
    ev = pipe.input.read()
    for b, cut in ((0, 10), (3, 60), (5, 90)):  # each batch processed what its filter passed
        seg = ev[(ev["event_id"] >= b << 32) & (ev["event_id"] < (b + 1) << 32)]
        assert rows[b] == int((seg["v"] > cut).sum()), (b, rows)
    pipe.flush()
    got, (exp, _) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)
    # the reference with the query's own filter throughout differs: the change took effect
    unchanged = ops.reference_output(ev, q)
    assert len(unchanged) != len(exp) or not np.allclose(unchanged["value"], exp["value"])
    # windows emitted before batch 3 are counts, later ones maxima of v (not whole numbers)
    frac = exp["value"] % 1 != 0
    assert frac.any() and not frac.all()
    pipe.cleanup()


def test_a_map_expression_changed_between_batches_matches_the_pinned_reference(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A map ``scale_v`` (identity) in front of ``filter_v`` (v > 10) becomes ``v * 0.2 + 5``
    from batch 2, with ``count_k`` a sum: the filter tests the mapped value, the sums are of
    mapped values, the output equals the reference with each batch's pinned expression, and
    batch 2 replayed after another expression keeps its own."""
    from core.scenario import OperatorModel

    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    ops_ = [o.model_dump() for o in sc.operators]
    ops_[0]["inputs"] = ["scale_v"]  # filter_v reads the map
    mapped = OperatorModel.model_validate(
        {"id": "scale_v", "kind": "map", "inputs": ["s"], "cost_us": 0, "params": {"expr": "v"}}
    )
    sc = sc.model_copy(
        update={"operators": [mapped, *(OperatorModel.model_validate(o) for o in ops_)]}
    )
    q = compile_query(sc)
    assert q.steps["s"] == ("scale_v", "filter_v") and not q.maps_values
    pipe = SparkPipeline(spark, q, tmp_path, PipelineOptions(2, metrics_keep=3))
    pipe.input.generate(sc, 5, scale=0.1)
    base = plan(q, [i % 2 for i in range(q.key_groups)])
    pipe.plans.publish(base.model_copy(update={"operators": {"count_k": {"agg": "sum"}}}))
    for b in range(5):
        if b == 2:
            cur = pipe.plans.load_current()
            pipe.plans.publish(
                cur.next(operators={**cur.operators, "scale_v": {"expr": "v * 0.2 + 5"}})
            )
        pipe.process(segment(spark, pipe, b), b)
        if b == 2:
            cur = pipe.plans.load_current()
            pipe.plans.publish(
                cur.next(operators={**cur.operators, "scale_v": {"expr": "v - 1000"}})
            )
            again = pipe.process(segment(spark, pipe, 2), 2)
            assert again.replay and again.plan_version == 1
    ev = pipe.input.read()
    rows = [int(pipe.stats[b].rows.sum()) for b in range(5)]
    for b, f in ((0, lambda v: v), (2, lambda v: v * 0.2 + 5), (4, lambda v: v - 1000)):
        seg = ev[(ev["event_id"] >= b << 32) & (ev["event_id"] < (b + 1) << 32)]
        assert rows[b] == int((f(seg["v"]) > 10).sum()), (b, rows)
    assert rows[4] == 0  # v - 1000 > 10 passes nothing: the newest expression took effect
    files = sorted(p.name for p in (tmp_path / "metrics").glob("batch-*.json"))
    assert files == [f"batch-{b:08d}.json" for b in (2, 3, 4)]  # metrics_keep=3
    pipe.flush()
    got, (exp, _) = pipe.output(), pipe.reference()
    assert_matches_reference(got, exp)
    # against the query's own identity map the sums differ: the expression took effect
    own = ops.reference_output(ev, replace(q, agg="sum"))
    assert len(own) != len(exp) or not np.allclose(own["value"], exp["value"])
    pipe.cleanup()


def test_a_long_running_driver_keeps_the_newest_batches_statistics(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``stats_keep`` bounds the statistics held in memory (a live driver runs for months);
    ``metrics_keep`` the files; a negative bound is refused, named."""
    sc = load_scenario(SCENARIOS / "seed-groupby-window.yaml")
    q = compile_query(sc)
    pipe = SparkPipeline(spark, q, tmp_path, PipelineOptions(2, stats_keep=2, metrics_keep=2))
    pipe.input.generate(sc, 4, scale=0.05)
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)]))
    for b in range(4):
        pipe.process(segment(spark, pipe, b), b)
    assert sorted(pipe.stats) == [2, 3]
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == [
        "batch-00000002.json",
        "batch-00000003.json",
    ]
    with pytest.raises(ValueError, match="stats_keep: must not be negative"):
        PipelineOptions(2, stats_keep=-1)
    pipe.cleanup()


def test_a_pipeline_run_driver_bounds_its_files_and_follows_scaling(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What ``trimtab pipeline run`` builds: plans retired, statistics bounded, and executors
    following the plans' running partitions when the scenario scales."""
    from spark_adapter.standby import DriverOptions, _driver_pipeline

    sc = load_scenario(SCENARIOS / "spark-elastic-ramp.yaml")
    pipe = _driver_pipeline(spark, sc, tmp_path, DriverOptions(follow_executors=True))
    assert pipe.opts.retire_plans and pipe.opts.stats_keep == 1000
    assert pipe.opts.follow_executors and pipe.pool is not None and pipe.pool.warm
    plain = _driver_pipeline(spark, sc, tmp_path / "b", DriverOptions())
    assert plain.pool is None
    cold = DriverOptions(follow_executors=True, warm_executors=False)
    assert not _driver_pipeline(spark, sc, tmp_path / "c", cold).pool.warm


def test_a_log_copied_out_of_order_is_read_in_segment_order(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spark's file source reads by modification time. A copied log whose times run against
    its indices (segment 4 stamped first) is restamped before the query starts and read
    0, 1, ..., 4, with the output equal to the reference; read as stamped, each segment would
    be behind the watermark of the one before."""
    _, q, pipe = make(spark, tmp_path, segments=5)
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)]))
    base = time.time_ns() - 60_000_000_000
    for i in range(5):
        os.utime(pipe.input.path(i), ns=(base + (4 - i) * 1_000_000_000,) * 2)
    pipe.run_available()
    assert pipe.restamped == [1, 2, 3, 4]
    ranges = [pipe.stats[b].event_range for b in sorted(pipe.stats)]
    assert [lo >> 32 for lo, _ in ranges] == [0, 1, 2, 3, 4]
    pipe.flush()
    got, (exp, _) = pipe.output(), pipe.reference()
    assert sum(st.late for st in pipe.stats.values()) == 0 and len(exp) > 0
    assert_matches_reference(got, exp)
    pipe.cleanup()


def test_a_segment_read_behind_a_committed_one_stops_its_batch_before_any_write(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Segment 3 copied into a log whose segment 4 a batch already committed: its rows are
    behind the watermark. The batch that reads it raises, naming both, with nothing pinned,
    written or committed; a restarted driver knows the order from its commit log."""
    sc, q, pipe = make(spark, tmp_path, segments=3)
    pipe.input.generate(sc, 1, scale=0.1, start=4)
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)]))
    pipe.run_available()
    assert sorted(pipe.stats) == [0, 1, 2, 3]
    pipe.input.generate(sc, 1, scale=0.1, start=3)
    with pytest.raises(
        InputOutOfOrder, match=r"batch 4 reads seg-000003 after batch 3 .*seg-000004"
    ):
        pipe.run_available()
    assert pipe.log.committed() == [0, 1, 2, 3] and pipe.log.pin_of(4) is None
    # Spark's trace of the failed query was muted for it alone: the level is back
    assert jvm_log_level(spark, QUERY_LOGGER, "ERROR") == "ERROR"
    assert not (tmp_path / "output" / "batch=4").exists()
    pipe.process(segment(spark, pipe, 4), 3)  # a replay of batch 3: checked against 0-2 only
    again = SparkPipeline(spark, q, tmp_path, PipelineOptions(2))
    with pytest.raises(InputOutOfOrder, match="seg-000003"):
        again.process(segment(spark, again, 3), 4)
    pipe.cleanup()


def test_a_plan_for_another_pipeline_is_never_pinned(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A controller steering another scenario publishes plans this pipeline cannot run
    (spark-anticorrelated's key groups of ``count``, not seed-groupby-window's ``count_k``).
    Pinned, such a plan would stop its batch on every replay. The first batch refuses to
    start on one, with nothing pinned or written. Published while the pipeline runs, the
    batches keep the plan before it and say so in their statistics; the next plan that fits
    is taken, and the output equals the reference."""
    _, q, pipe = make(spark, tmp_path, segments=4)
    other = compile_query(load_scenario(SCENARIOS / "spark-anticorrelated.yaml"))
    pipe.plans.publish(plan(other, [i % 2 for i in range(other.key_groups)], version=0))
    with pytest.raises(PlanRefused, match=r"v000000\.json: placement: unit 'count_k#0' missing"):
        pipe.process(segment(spark, pipe, 0), 0)
    assert pipe.log.pin_of(0) is None and not (tmp_path / "output").exists()
    assert jvm_log_level(spark, QUERY_LOGGER, "ERROR") == "ERROR"
    pipe.plans.publish(plan(q, [i % 2 for i in range(q.key_groups)], version=1))
    for b in (0, 1):
        assert "plan_refused" not in pipe.process(segment(spark, pipe, b), b).info
    pipe.plans.publish(plan(other, [0] * other.key_groups, version=2))
    st = pipe.process(segment(spark, pipe, 2), 2)
    assert st.info["plan_refused"] == {
        "version": 2,
        "problem": "placement: unit 'count_k#0' missing",
    }
    pipe.plans.publish(plan(q, [(i + 1) % 2 for i in range(q.key_groups)], version=3))
    assert "plan_refused" not in pipe.process(segment(spark, pipe, 3), 3).info
    assert pipe.log.pins() == [(0, 1), (1, 1), (2, 1), (3, 3)]
    # the controller reads it from the batch files and says so in its round's reason
    from controller.loop import with_refusals
    from controller.policy import Decision
    from spark_adapter.external import ExternalSparkSubstrate

    obs = ExternalSparkSubstrate(tmp_path, list(q.sides), 2).observe()
    assert [b.plan_refused for b in obs.batches][2][0] == 2
    d = with_refusals(Decision(None, "hold", "no node overloaded"), obs)
    assert d.reason.startswith("no node overloaded; the pipeline refused plan v2 and ran")
    assert d.details["plans_refused"] == [st.info["plan_refused"]]
    pipe.flush()
    got, (exp, _) = pipe.output(), pipe.reference()
    assert len(exp) > 0
    assert_matches_reference(got, exp)
    pipe.cleanup()
