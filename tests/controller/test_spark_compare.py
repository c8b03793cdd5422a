"""The Spark comparison's order of runs and its stop, without Spark: ``replay_spark`` (one
run, tested on Spark in tests/spark_adapter) is replaced by a recorder."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from controller.scenario import load_scenario
from tests.conftest import SCENARIOS


def _fake(monkeypatch: pytest.MonkeyPatch, stop_at: int | None = None) -> list[dict[str, Any]]:
    import controller.spark_replay as sr

    calls: list[dict[str, Any]] = []

    def replay(sc: Any, **kw: Any) -> Any:
        from spark_adapter.interrupt import Interrupted

        calls.append({"seed": sc.seed, **kw})
        if len(calls) == stop_at:
            raise Interrupted("interrupted: the run stopped once batch 2 had committed")
        p99 = 1.0 + len(calls)  # each run its own figure
        return SimpleNamespace(summary={"batch_duration_p99": p99, "rows_in": sc.seed})

    monkeypatch.setattr(sr, "replay_spark", replay)
    monkeypatch.setattr(sr, "spark_session", lambda *a: "session")
    monkeypatch.setattr(sr, "close_run", lambda *a: None)
    return calls


def test_runs_alternate_their_order_over_the_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.spark_compare import WARMUP_BATCHES, compare_spark

    calls = _fake(monkeypatch)
    sc = load_scenario(SCENARIOS / "spark-anticorrelated.yaml")
    rows = compare_spark(sc, ["hash", "llf", "rod"], seeds=3, batches=6)
    warm, runs = calls[0], calls[1:]
    assert warm["batches"] == WARMUP_BATCHES and warm["placement"] == "hash"
    assert [(c["placement"], c["seed"] - sc.seed) for c in runs] == [
        ("hash", 0), ("llf", 0), ("rod", 0),
        ("rod", 1), ("llf", 1), ("hash", 1),
        ("hash", 2), ("llf", 2), ("rod", 2),
    ]  # fmt: skip
    assert all(c["spark"] == "session" and c["batches"] == 6 for c in runs)
    assert len({c["workdir"] for c in runs}) == 9  # a directory of its own each
    assert [r["placement"] for r in rows] == ["hash", "llf", "rod"]
    assert [r["run_order"] for r in rows] == [[1, 6, 7], [2, 5, 8], [3, 4, 9]]
    # hash's runs were calls 2, 7, 8 (the warm-up first): p99 3, 8, 9
    assert rows[0]["batch_duration_p99"] == pytest.approx((3 + 8 + 9) / 3)
    assert [x["batch_duration_p99"] for x in rows[0]["runs"]] == [3, 8, 9]


def test_a_stop_names_the_run_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.spark_compare import compare_spark
    from spark_adapter.interrupt import Interrupted

    _fake(monkeypatch, stop_at=3)  # the warm-up, hash / none, then hash / lp
    sc = load_scenario(SCENARIOS / "spark-anticorrelated.yaml")
    with pytest.raises(Interrupted) as e:
        compare_spark(sc, ["hash", "llf"], ["none", "lp"])
    assert str(e.value) == (
        "interrupted: the run stopped once batch 2 had committed, in hash / lp (run 2 of 4): "
        "nothing compared"
    )


def test_methods_that_ran_the_same_plans_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each method's runs route as the recorder says: llf and least-loaded alike on both
    inputs, rod alike with them on the first input only, hash its own. Only llf and
    least-loaded are named as having run the same plans; a method whose drops differ (lp
    against none, one routing) is not."""
    import controller.spark_replay as sr
    from controller.spark_compare import compare_spark

    _fake(monkeypatch)
    routes = {"hash": ["h", "h"], "llf": ["a", "b"], "least-loaded": ["a", "b"], "rod": ["a", "c"]}

    def replay(sc: Any, **kw: Any) -> Any:
        seed = sc.seed - base.seed
        shed = "-" if kw.get("shedding") in (None, "none") else "drops"
        per = [{"routing_digest": routes[kw["placement"]][seed], "shed_digest": shed}] * 3
        return SimpleNamespace(summary={"batch_duration_p99": 1.0, "routing_per_batch": per})

    monkeypatch.setattr(sr, "replay_spark", replay)
    base = load_scenario(SCENARIOS / "spark-anticorrelated.yaml")
    rows = compare_spark(base, ["hash", "llf", "least-loaded", "rod"], seeds=2)
    assert {r["placement"]: r["same_plans_as"] for r in rows} == {
        "hash": [],
        "llf": ["least-loaded"],
        "least-loaded": ["llf"],
        "rod": [],
    }
    rows = compare_spark(base, ["llf", "least-loaded"], ["none", "lp"])
    alike = {f"{r['placement']} / {r['shedding']}": r["same_plans_as"] for r in rows}
    assert alike == {
        "llf / none": ["least-loaded / none"],
        "llf / lp": ["least-loaded / lp"],
        "least-loaded / none": ["llf / none"],
        "least-loaded / lp": ["llf / lp"],
    }
