"""trimtab calibrate: the fit recovers known costs; bad input is one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from controller.calibration import (
    calibrate,
    fit_batches,
    load_overlay,
    overlay_yaml,
    predicted_batches,
)
from controller.cli import app
from controller.scenario import load_scenario
from core.batch_model import BatchModel
from spark_adapter.batchstats import BatchStats, write_batch_stats

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "spark-anticorrelated.yaml"
C, T0, OVER = 250e-6, 0.02, 0.9  # s per row, s per task, s per batch


def _batches(n: int = 12, scale: float = 2.0) -> list[BatchStats]:
    rng = np.random.default_rng(0)
    out = []
    for b in range(n):
        total = int(1000 * 2 * scale)  # the scenario's 1000 tuples/s over 2 s ticks
        p0 = int(total * rng.uniform(0.2, 0.8))
        rows = np.array([p0, total - p0])
        busy = T0 + C * rows
        out.append(
            BatchStats(
                batch_id=b,
                plan_version=0,
                replay=False,
                duration_s=OVER + busy.max(),
                rows=rows,
                busy_s=busy,
                kg_rows=np.zeros(16, dtype=np.int64),
                key_rows=pd.DataFrame({"key": [], "side": [], "rows": []}),
                stream_rows={"s": total},
                state_rows=0,
                state_moved=0,
                late=0,
                rows_out=0,
                event_range=(b << 32, (b << 32) + total - 1),
                max_ts=2.0 * b + 1.9,
            )
        )
    return out


def _workdir(tmp: Path, batches: list[BatchStats], run_json: bool = True) -> Path:
    (tmp / "metrics").mkdir(parents=True)
    for st in batches:
        write_batch_stats(st, tmp / "metrics")
    if run_json:
        sc = load_scenario(SCENARIO)
        doc = {"scenario": sc.model_dump(mode="json"), "base_dir": sc.base_dir, "scale": 2.0}
        (tmp / "run.json").write_text(json.dumps(doc))
    return tmp


def test_the_fit_recovers_the_costs_that_made_the_batches() -> None:
    f = fit_batches(_batches())
    assert f["c"] == pytest.approx(C, rel=1e-9)
    assert f["t0"] == pytest.approx(T0, abs=1e-9)
    assert f["o"] == pytest.approx(OVER, abs=1e-9)
    assert f["r2"] == pytest.approx(1.0)


def test_busy_time_that_falls_with_rows_is_refused_with_what_to_do() -> None:
    """A run too short to fit (a noisy batch or two) can make busy time fall as rows grow: the
    fit says so, with the batch count and the remedy, and writes no negative cost."""
    batches = _batches(n=2)
    for b in batches:
        b.busy_s = 0.5 - C * b.rows
    with pytest.raises(ValueError, match=r"not positive .* over 2 batch\(es\).*longer run"):
        fit_batches(batches)


def test_capacity_is_planned_with_the_fixed_cost_nine_batches_in_ten_fit() -> None:
    """Three batches in twelve pay 0.6 s more (a commit, a snapshot): the batch model keeps the
    median fixed cost, and capacity plans with the 90th percentile, so a plan that fills a
    partition still fits nine batches in ten."""
    batches = _batches()
    for b in batches[::4]:
        b.duration_s += 0.6
    f = fit_batches(batches)
    assert f["o"] == pytest.approx(OVER, abs=1e-9)
    assert f["o90"] == pytest.approx(OVER + 0.6, abs=1e-9)
    bm = BatchModel(task_overhead_s=T0, batch_overhead_s=f["o"], planning_overhead_s=f["o90"])
    assert bm.capacity(2.0) == pytest.approx((2.0 - OVER - 0.6 - T0) / 2.0)


def test_calibrate_writes_costs_scale_and_batch_model(tmp_path: Path) -> None:
    ov = calibrate(_workdir(tmp_path, _batches()), skip=1)
    assert ov.calibration.batches == 11
    assert ov.operators["count"].cost_us == pytest.approx(250.0)  # 200 us modelled x 1.25
    assert ov.simulator.rate_scale == pytest.approx(2.0, rel=1e-9)
    assert ov.simulator.batch_model.batch_overhead_s == pytest.approx(OVER)
    # the batch model turns a tick's busiest node work into a batch duration
    p = predicted_batches(
        np.array([[0.0, 0.0], [0.5, 0.25], [0.25, 0.75]]),
        2.0,
        BatchModel(task_overhead_s=T0, batch_overhead_s=OVER),
    )
    assert p["predicted_batch_duration_p50"] == pytest.approx(OVER + T0 + 1.25)


def test_a_live_runs_batches_of_several_segments_and_drops_keep_the_rate(tmp_path: Path) -> None:
    """A live batch that caught up 3 segments read 3 ticks of input, and a shed batch's rows
    are what its keep let through: the rate the run saw is still the one the writer wrote."""
    from dataclasses import replace

    live = []
    for i, b in enumerate(_batches(12)):
        lo = (3 * i) << 32  # ticks 3i .. 3i + 2, three times the rows
        st = replace(b, stream_rows={"s": 3 * b.stream_rows["s"]}, event_range=(lo, lo + (2 << 32)))
        if i % 2:  # half the batches shed: 40% kept
            st = replace(st, stream_rows={"s": int(0.4 * st.stream_rows["s"])})
            st.info["stream_keep"] = {"s": 0.4}
        live.append(st)
    ov = calibrate(_workdir(tmp_path, live), skip=1)
    assert ov.simulator.rate_scale == pytest.approx(2.0, rel=1e-3)


def test_calibrated_replay_and_validate(tmp_path: Path) -> None:
    work = _workdir(tmp_path / "w", _batches())
    out = tmp_path / "cal.yaml"
    runner = CliRunner()
    r = runner.invoke(app, ["calibrate", str(work), "--out", str(out)])
    assert r.exit_code == 0 and "rough" not in r.stderr, r.output  # an exact fit: no note
    assert runner.invoke(app, ["validate", str(out), "--scenario", str(SCENARIO)]).exit_code == 0
    r = runner.invoke(
        app, ["replay", str(SCENARIO), "--calibration", str(out), "--ticks", "20", "--json"]
    )
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    # 1000 x 2 tuples/s x 250 us on two partitions: busiest partition about 0.5-0.9 s a tick
    assert OVER + T0 + 0.4 < got["predicted_batch_duration_p50"] < OVER + T0 + 1.0
    # run live, the batches keep up (under the 2 s trigger): one segment each, as in a replay
    assert got["predicted_live_backlog_max"] == 1
    assert got["predicted_live_batches"] == 20
    assert got["predicted_live_batch_duration_p50"] == pytest.approx(
        got["predicted_batch_duration_p50"], rel=0.1
    )
    assert got["predicted_live_latency_p50_s"] > got["predicted_live_batch_duration_p50"]
    # the table a user reads shows the same predictions
    r = runner.invoke(app, ["replay", str(SCENARIO), "--calibration", str(out), "--ticks", "20"])
    rows = {ln.split()[1]: ln.split()[-2] for ln in r.stdout.splitlines() if "predicted_" in ln}
    assert float(rows["predicted_batch_duration_p50"]) == pytest.approx(
        got["predicted_batch_duration_p50"], rel=1e-3
    )
    assert rows["predicted_live_batches"] == "20" and len(rows) == 9, r.stdout


def test_a_rough_fit_is_written_with_a_note_that_says_so(tmp_path: Path) -> None:
    """Busy time that the rows explain only in part (noise as large as the per-row cost):
    the overlay is still written, and stderr names the fit and the remedy."""
    batches = _batches()
    noise = np.random.default_rng(1).uniform(0.0, 0.6, size=(len(batches), 2))
    for b, e in zip(batches, noise, strict=True):
        b.busy_s = b.busy_s + e
    out = tmp_path / "cal.yaml"
    r = CliRunner().invoke(
        app, ["calibrate", str(_workdir(tmp_path / "w", batches)), "--out", str(out)]
    )
    assert r.exit_code == 0 and out.is_file(), r.output
    r2 = load_overlay(out).calibration.busy_fit_r2
    assert r2 < 0.8, r2
    assert f"r^2 {r2:.2f}" in r.stderr and "over 11 batch(es)" in r.stderr, r.stderr
    assert "calibrate a longer run" in r.stderr, r.stderr


def test_a_fit_on_too_few_batches_says_so(tmp_path: Path) -> None:
    """One batch on two partitions is two points: the line through them fitted exactly (r^2
    1.0) and the overlay was written without a word, its p50 and p99 the one batch's."""
    out = tmp_path / "cal.yaml"
    for n, rough in ((2, True), (3, True), (4, False)):  # the first is skipped (--skip 1)
        work = _workdir(tmp_path / f"w{n}", _batches(n))
        r = CliRunner().invoke(app, ["calibrate", str(work), "--out", str(out)])
        assert r.exit_code == 0 and out.is_file(), r.output
        assert load_overlay(out).calibration.busy_fit_r2 == pytest.approx(1.0)
        said = f"fitted on {n - 1} batch(es), fewer than 3" in r.stderr
        assert said == rough and ("calibrate a longer run" in r.stderr) == rough, r.stderr


def _one_line_error(r, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert r.exit_code == 2, r.output
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_bad_calibration_input_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(runner.invoke(app, ["calibrate", str(empty)]), "no batch statistics")
    nope = tmp_path / "nope"
    _one_line_error(runner.invoke(app, ["calibrate", str(nope)]), f"WORKDIR: {nope} does not")
    (tmp_path / "f").write_text("")
    _one_line_error(runner.invoke(app, ["calibrate", str(tmp_path / "f")]), "a file, not a dir")
    bare = _workdir(tmp_path / "bare", _batches(), run_json=False)
    _one_line_error(runner.invoke(app, ["calibrate", str(bare)]), "--scenario")
    good = _workdir(tmp_path / "good", _batches())
    _one_line_error(runner.invoke(app, ["calibrate", str(good), "--skip", "50"]), "skipping")
    # a batch file or run record that is not trimtab's is named (exit 1 with a KeyError, or a
    # JSON error that named no file)
    cut = _workdir(tmp_path / "cut", _batches())
    third = sorted((cut / "metrics").iterdir())[3]
    third.write_text(third.read_text()[:50])
    _one_line_error(runner.invoke(app, ["calibrate", str(cut)]), f"{third.name}: not JSON")
    third.write_text('{"batch_id": 3}')
    _one_line_error(
        runner.invoke(app, ["calibrate", str(cut)]), "not a trimtab batch file (no 'plan_version')"
    )
    # another pipeline's scenario: its streams read no row of the run (a ZeroDivisionError)
    wrong = SCENARIO.parent / "zipf-moderate.yaml"
    _one_line_error(
        runner.invoke(app, ["calibrate", str(good), "--scenario", str(wrong)]),
        "--scenario: the run in",
        "read stream(s) s, which 'zipf-moderate' does not have",
    )
    # a query the pipeline cannot run: named as the flag's (it said only "operators: ...")
    plain = SCENARIO.parent / "overload-ramp.yaml"
    _one_line_error(
        runner.invoke(app, ["calibrate", str(good), "--scenario", str(plain)]),
        f"--scenario: {plain}: operators: the Spark pipeline needs",
    )
    idle = _batches()
    for b in idle:
        b.stream_rows["s"] = 0
    idle_dir = _workdir(tmp_path / "idle", idle)
    _one_line_error(runner.invoke(app, ["calibrate", str(idle_dir)]), "no batch read a row")
    (good / "run.json").write_text("{}")
    _one_line_error(runner.invoke(app, ["calibrate", str(good)]), "run.json: not the run record")
    good = _workdir(tmp_path / "good2", _batches())
    out = tmp_path / "cal.yaml"
    assert runner.invoke(app, ["calibrate", str(good), "--out", str(out)]).exit_code == 0
    # --out naming a file that is not a calibration (the scenario, by a slip) is refused before
    # the fit and the file is left as it was; an earlier calibration or an empty file is
    # replaced, and the first says so
    mine = tmp_path / "my-scenario.yaml"
    mine.write_text(SCENARIO.read_text())
    _one_line_error(
        runner.invoke(app, ["calibrate", str(good), "--out", str(mine)]),
        f"--out: {mine} exists and is not a trimtab calibration",
    )
    assert mine.read_text() == SCENARIO.read_text()
    r = runner.invoke(app, ["calibrate", str(good), "--out", str(out)])
    assert r.exit_code == 0 and "earlier calibration, now replaced" in r.stdout, r.stdout
    empty_out = tmp_path / "empty.yaml"
    empty_out.write_text("")
    r = runner.invoke(app, ["calibrate", str(good), "--out", str(empty_out)])
    assert r.exit_code == 0 and "replaced" not in r.stdout, r.stdout
    assert empty_out.read_text() == out.read_text()
    other = SCENARIO.parent / "seed-groupby-window.yaml"
    _one_line_error(
        runner.invoke(app, ["replay", str(other), "--calibration", str(out)]),
        "spark-anticorrelated",
    )
    _one_line_error(
        runner.invoke(
            app, ["replay", str(other), "--calibration", str(out), "--substrate", "spark"]
        ),
        "--calibration",
    )
    doc = yaml.safe_load(out.read_text())
    doc["simulator"]["rate_scale"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    _one_line_error(
        runner.invoke(app, ["replay", str(SCENARIO), "--calibration", str(bad)]),
        "simulator.rate_scale",
    )
    before = bad.read_bytes()
    assert runner.invoke(app, ["validate", str(bad)]).exit_code == 2
    assert bad.read_bytes() == before


def test_a_calibration_sets_the_controllers_spark_model(tmp_path: Path) -> None:
    """Calibrated, a row costs the measured seconds and a partition is the share of a core a
    batch leaves for work, so LP shedding starts where batches stop keeping up."""
    from controller.calibration import load_overlay
    from controller.wiring import spark_context
    from core.batch_model import BatchModel
    from spark_adapter.query import compile_query

    work = _workdir(tmp_path / "w", _batches())
    out = tmp_path / "cal.yaml"
    assert CliRunner().invoke(app, ["calibrate", str(work), "--out", str(out)]).exit_code == 0
    sc = load_scenario(SCENARIO)
    q = compile_query(sc)
    plain = spark_context(sc, q, 2, 1.0)
    cal = spark_context(sc, q, 2, 1.0, load_overlay(out))
    assert plain.cluster.capacities().tolist() == [1.0, 1.0]
    expected = (2.0 - OVER - T0) / 2.0  # the scenario's 2 s ticks
    assert cal.cluster.capacities() == pytest.approx([expected, expected])
    assert BatchModel(task_overhead_s=T0, batch_overhead_s=OVER).capacity(2.0) == pytest.approx(
        expected
    )
    ratio = cal.units.coeff.sum() / plain.units.coeff.sum()
    assert ratio == pytest.approx(250.0 / 200.0)  # measured 250 us a row against 200 modelled


def test_the_calibrated_simulator_plans_with_the_engines_capacity(tmp_path: Path) -> None:
    """``apply_overlay`` gives each simulated node what a batch leaves for work, the capacity
    Spark's calibrated controller plans with; the costs and rate scale are the overlay's."""
    from controller.calibration import apply_overlay

    sc = load_scenario(SCENARIO)
    ov = calibrate(_workdir(tmp_path, _batches()), skip=1)
    cal = apply_overlay(sc, ov)
    share = (sc.tick_s - OVER - T0) / sc.tick_s
    assert [n.capacity for n in cal.cluster.nodes] == pytest.approx(
        [n.capacity * share for n in sc.cluster.nodes]
    )
    assert cal.operators[0].cost_us == pytest.approx(250.0)
    assert cal.simulator.batch_model == ov.simulator.batch_model


def test_the_daemon_refuses_a_calibration_of_another_scenario(tmp_path: Path) -> None:
    from controller.config import load_settings, path_problems
    from controller.wiring import make_daemon_wiring

    work = _workdir(tmp_path / "w", _batches())
    out = tmp_path / "cal.yaml"
    assert CliRunner().invoke(app, ["calibrate", str(work), "--out", str(out)]).exit_code == 0
    base = {
        "substrate": {
            "kind": "spark-external",
            "workdir": str(tmp_path / "pipe"),
            "scenario": str(SCENARIO.parent / "zipf-hotkey-shift.yaml"),
            "calibration": str(out),
        },
        "metrics": {"port": 0},
        "decision_log": str(tmp_path / "d.sqlite"),
        "state_dir": str(tmp_path / "state"),
    }
    with pytest.raises(ValueError, match="substrate.calibration: .*spark-anticorrelated"):
        make_daemon_wiring(load_settings(None, **base))
    base["substrate"]["calibration"] = str(tmp_path / "missing.yaml")
    assert any("substrate.calibration" in p for p in path_problems(load_settings(None, **base)))


def test_a_fixed_cost_that_falls_as_the_driver_runs_is_fitted_as_a_warm_up(tmp_path: Path) -> None:
    """Batches whose fixed cost falls 0.3 s per e-fold of batches run: the fit recovers the
    slope, anchors it at the median batch and floors it; predictions charge an early batch
    more than a late one. Constant fixed costs fit no warm-up (the other tests' batches)."""
    batches = _batches(24)
    for b in batches:
        b.duration_s += 0.3 * (np.log1p(12.0) - np.log1p(b.batch_id))
    f = fit_batches(batches[1:])
    assert f["warm_slope"] == pytest.approx(0.3, abs=1e-9)
    assert f["warm_at"] == 12.0 and f["o"] == pytest.approx(OVER, abs=1e-9)
    assert f["warm_floor"] < OVER
    ov = calibrate(_workdir(tmp_path, batches), skip=1)
    (tmp_path / "o.yaml").write_text(overlay_yaml(ov))  # the file round-trips with it
    bm = load_overlay(tmp_path / "o.yaml").simulator.batch_model
    assert bm.warmup is not None and bm.warmup.slope_s == pytest.approx(0.3, abs=1e-9)
    flat = np.full((24, 2), 0.25)  # the same work every tick: only the fixed cost differs
    early = bm.fixed_s(1)
    assert early == pytest.approx(OVER + T0 + 0.3 * (np.log1p(12.0) - np.log1p(1.0)), abs=1e-9)
    p = predicted_batches(flat, 2.0, bm, skip=1)  # batches 1..23: the median is batch 12
    assert p["predicted_batch_duration_p50"] == pytest.approx(OVER + T0 + 0.5, abs=1e-9)
    assert p["predicted_batch_duration_p99"] > OVER + T0 + 0.5 + 0.2
    assert bm.fixed_s(23) < bm.batch_overhead_s + T0 < early
    assert fit_batches(_batches())["warm_slope"] == 0.0
    assert (
        calibrate(_workdir(tmp_path / "flat", _batches()), skip=1).simulator.batch_model.warmup
        is None
    )
