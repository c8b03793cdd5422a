"""Every partitioner routes on Spark by its own rule: exact output, distinct routings,
a partitioner state restored from a plan that continues identically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from controller.scenario import load_scenario
from controller.spark_replay import replay_spark
from core.plans import Placement, Plan, RoutingConfig
from partitioners.micro_batch import MicroBatchRouter
from partitioners.registry import NAMES

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / "zipf-hotkey-shift.yaml")
    out = {}
    for name in NAMES:
        work = tmp_path_factory.mktemp(name)
        res = replay_spark(
            sc,
            batches=4,
            placement="hash",
            partitioner=name,
            scale=0.03,
            interval_batches=1,
            workdir=work,
            spark=spark,
        )
        out[name] = (res, work)
    return out


def test_each_partitioner_exact_and_distinct(runs) -> None:  # type: ignore[no-untyped-def]
    last = {}
    for name, (res, _) in runs.items():
        s = res.summary
        assert s["output_matches_reference"] is True, name
        assert s["partitioner"] == name
        per = s["routing_per_batch"]
        assert per and all(b["partitioner"] == name for b in per)
        last[name] = per[-1]["routing_digest"]
    # the old single water-fill gave W-Choices, Dalton, Prompt, CG and the rest one routing
    assert len(set(last.values())) >= 4, last
    for name, d in last.items():
        assert any(d != other for o, other in last.items() if o != name), name
    assert runs["hash"][0].summary["routing_per_batch"][-1]["split_keys"] == 0


def test_split_keys_follow_the_partitioner(runs) -> None:  # type: ignore[no-untyped-def]
    """W-Choices spreads its head keys over every partition; hash splits nothing."""
    w = runs["wchoices"][0].summary["routing_per_batch"][-1]
    assert w["split_keys"] >= 1 and w["fragmentation"] == 2.0
    assert all(
        b["split_keys"] == 0 and b["keys_moved_whole"] == 0
        for b in runs["hash"][0].summary["routing_per_batch"]
    )


def test_restored_state_routes_identically(runs) -> None:  # type: ignore[no-untyped-def]
    """The plan carries the partitioner state: a router restored from a published plan and the
    live one, fed the same batch, give the same quotas and the same next state."""
    _, work = runs["dalton"]
    plans = sorted((work / "plans").glob("v*.json"))
    with_state = [Plan.from_json(p.read_bytes()) for p in plans]
    with_state = [p for p in with_state if p.routing.state]
    assert with_state, "the plans carry no partitioner state"
    plan = with_state[-1]
    live = MicroBatchRouter.load(plan.routing.state)
    restored = MicroBatchRouter.load(plan.routing.state)
    rng = np.random.default_rng(4)
    keys = np.arange(500, dtype=np.int64)
    counts = rng.zipf(1.5, 500).astype(float)
    for batch in (10, 11, 12):
        assert live.step(keys, counts, batch) == restored.step(keys, counts, batch)
        live.feedback(np.array([300.0, 200.0]), np.array([0.3, 0.4]))
        restored.feedback(np.array([300.0, 200.0]), np.array([0.3, 0.4]))
    assert live.state_digest() == restored.state_digest()
    # the state is really carried: a fresh router is not in it
    assert MicroBatchRouter("dalton", 2).state_digest() != live.state_digest()


def test_restarted_controller_continues_from_the_plan(runs) -> None:  # type: ignore[no-untyped-def]
    """A routing policy started from a published plan decides the next round exactly as the
    policy that published it (same quotas, same state), on the batches the run really saw."""
    from controller.routing import RoutingPolicy
    from spark_adapter.batchstats import observation_from_batches, read_batch_stats

    _, work = runs["cg"]
    files = sorted(work.glob("**/batch-*.json"))
    stats = [read_batch_stats(f) for f in files]
    stats = [s for s in stats if s.event_range[0] >= 0]
    assert len(stats) >= 3
    obs = [observation_from_batches([s], 2, ["events"], 1.0, 0) for s in stats]
    kg = stats[0].kg_rows.size
    placement = Placement(
        units=tuple(f"count#{g}" for g in range(kg)),
        nodes=("p0", "p1"),
        assignment=tuple(g % 2 for g in range(kg)),
    )
    a = RoutingPolicy("cg", "count", kg, 2)
    current = RoutingConfig(num_partitions=2)
    new, _, _ = a.decide(obs[0], placement, current)
    assert new is not None and new.state
    b = RoutingPolicy("cg", "count", kg, 2)  # the restarted controller
    for o in obs[1:]:
        na, _, _ = a.decide(o, placement, new)
        nb, _, _ = b.decide(o, placement, new)
        assert (na is None) == (nb is None)
        if na is not None and nb is not None:
            assert na.hot == nb.hot and na.params == nb.params  # params: the state's digest
    assert a.router.state_digest() == b.router.state_digest()


def test_executor_slowdown_by_executor_id(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from spark_adapter import operators

    monkeypatch.setenv("TRIMTAB_EXECUTOR_SLOWDOWN", "0:3.0,1:1.5")
    for url, factor in (
        ("http://127.0.0.1:1/logPage/?appId=a&executorId=1&logType=stderr", 1.5),
        ("http://127.0.0.1:1/logPage/?appId=a&executorId=0&logType=stderr", 3.0),
        ("http://127.0.0.1:1/logPage/?appId=a&executorId=7&logType=stderr", 1.0),
        ("", 1.0),  # local mode: no executor id
    ):
        monkeypatch.setenv("SPARK_LOG_URL_STDERR", url)
        operators.executor_slowdown.cache_clear()
        assert operators.executor_slowdown() == factor
    operators.executor_slowdown.cache_clear()


def test_executor_speeds_are_checked(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from core.scenario import ScenarioError

    doc = SCENARIOS / "heterogeneous-spark.yaml"
    text = doc.read_text().replace("partition_speeds:", "executor_speeds:")
    slow = tmp_path / "slow.yaml"
    slow.write_text(text)
    sc = load_scenario(slow)
    assert sc.spark.slowdowns() == {"0": 3.0, "1": 1.0}
    for name in ("executor_speeds", "partition_speeds"):
        bad = tmp_path / f"bad-{name}.yaml"
        bad.write_text(
            doc.read_text()
            .replace("partition_speeds:", f"{name}:")
            .replace("- 1.0\n  - 3.0", "- 0.0\n  - 3.0")
        )
        with pytest.raises(ScenarioError, match=rf"spark.{name}.0"):
            load_scenario(bad)
    both = tmp_path / "both.yaml"
    both.write_text(doc.read_text() + "  executor_speeds:\n  - 1.0\n  - 1.0\n")
    with pytest.raises(ScenarioError, match="not both"):
        load_scenario(both)
    # the shared local[2] session was not started with the slowdowns: refused, not ignored
    with pytest.raises(ValueError, match="executor_speeds"):
        replay_spark(sc, batches=2, spark=spark, workdir=tmp_path / "w")


def test_partition_speeds_slow_the_partition_wherever_it_runs(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """heterogeneous-spark's partition 0 spends 3x the CPU per row: its measured busy time per
    row is well over partition 1's (fixed costs dilute the 3x), on the shared session, and the
    speeds the partitioner learns follow; the output is exact."""
    sc = load_scenario(SCENARIOS / "heterogeneous-spark.yaml")
    res = replay_spark(
        sc,
        batches=4,
        placement="hash",
        partitioner="ecapa",
        scale=0.5,
        interval_batches=1,
        workdir=tmp_path / "w",
        spark=spark,
    )
    s = res.summary
    assert s["output_matches_reference"]
    per_row = np.array(s["partition_busy_s"]) / np.array(s["partition_rows"])
    assert per_row[0] > 1.8 * per_row[1], per_row
    speeds = [d.details.get("routing", {}).get("speeds") for d in res.decisions]
    assert speeds[-1][1] > 1.5 * speeds[-1][0], speeds


def _least_loaded_het(spark, work: Path, measured: bool):  # type: ignore[no-untyped-def]
    sc = load_scenario(SCENARIOS / "heterogeneous-spark.yaml")
    pl = sc.controller.placement.model_copy(update={"measured_speeds": measured})
    sc = sc.model_copy(update={"controller": sc.controller.model_copy(update={"placement": pl})})
    return replay_spark(
        sc,
        batches=6,
        placement="least-loaded",
        partitioner="hash",
        scale=0.5,
        interval_batches=1,
        workdir=work,
        spark=spark,
    )


def test_least_loaded_places_key_groups_by_measured_speed(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With hash routing (no hot-key quotas), the cold keys follow the key-group table: once
    the partitions' speeds are measured (1:3), least-loaded re-places the key groups by them
    (once), so in the last batches the slow partition's busy time is much nearer the fast
    one's than with measured_speeds off. Both outputs are exact."""
    on = _least_loaded_het(spark, tmp_path / "on", True)
    off = _least_loaded_het(spark, tmp_path / "off", False)
    assert on.summary["output_matches_reference"] and off.summary["output_matches_reference"]
    moves = [d for d in on.decisions if "capacities_before" in d.details]
    assert len(moves) == 1, [d.reason for d in on.decisions]
    cap = moves[0].details["capacities"]
    assert cap[1] > 1.8 * cap[0], cap
    assert not any("capacities_before" in d.details for d in off.decisions)
    # busy seconds per partition in the last two batches (slow over fast)
    ratio = lambda r: (lambda x: x[0] / x[1])(r.series.node_load.iloc[-2:].sum().to_numpy())  # noqa: E731
    print("busy slow/fast: on", ratio(on), "off", ratio(off))
    assert ratio(off) > 1.8 and ratio(on) < 0.75 * ratio(off), (ratio(on), ratio(off))
