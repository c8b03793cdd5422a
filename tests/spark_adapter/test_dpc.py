"""DPC on Spark: a silent input stream, tentative results and their corrections (local[2])."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from controller.cli import app
from controller.scenario import load_scenario
from controller.testing import assert_matches_reference
from spark_adapter import operators as ops
from spark_adapter.dpc import latest_view, read_view, segment_meta
from spark_adapter.pipeline import PipelineOptions, SparkPipeline
from spark_adapter.query import compile_query
from spark_adapter.source import InputLog
from tests.conftest import SCENARIOS

SEGMENTS = 12
SILENCE = ("S", 3, 8)  # S holds back ticks 3..7; its backlog arrives before tick 8


def small_dpc_scenario(tmp: Path):  # type: ignore[no-untyped-def]
    """input-partition-dpc with 4 s windows sliding by 2 s, S silent for 5 s from 3 s."""
    raw = yaml.safe_load((SCENARIOS / "input-partition-dpc.yaml").read_text())
    raw["duration_s"] = SEGMENTS
    for op in raw["operators"]:
        if "window" in op:
            op["window"] = {"size_s": 4, "slide_s": 2}
    raw["faults"] = [{"at_s": 3.0, "kind": "partition", "stream": "S", "duration_s": 5.0}]
    path = tmp / "dpc.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_scenario(path)


def test_a_held_stream_arrives_later_as_one_backlog_segment(tmp_path: Path) -> None:
    sc = small_dpc_scenario(tmp_path)
    assert sc.input_outages() == [SILENCE]
    held, whole = InputLog(tmp_path / "held"), InputLog(tmp_path / "whole")
    held.generate(sc, SEGMENTS, scale=0.05, silence=sc.input_outages())
    whole.generate(sc, SEGMENTS, scale=0.05)
    assert held.segments() == list(range(SEGMENTS + 1)) and held.shift() == 1
    for i in range(3, 8):  # the silent ticks: R only, and the metadata says so
        covers, streams = segment_meta(held.path(i))  # type: ignore[misc]
        assert set(covers) == {"R"} and streams == ("R", "S")
        assert set(held.read([i])["stream"]) == {"R"}
    backlog = held.read([8])
    assert set(backlog["stream"]) == {"S"} and segment_meta(held.path(8))[0] == {"S": 8.0}  # type: ignore[index]
    assert backlog["ts"].between(3.0, 8.0).all() and backlog["ts"].is_monotonic_increasing
    cols = ["stream", "ts", "key", "v", "c"]
    a = held.read().sort_values(["stream", "ts"])[cols].reset_index(drop=True)
    b = whole.read().sort_values(["stream", "ts"])[cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)  # the same rows: only their arrival differs
    assert held.read()["event_id"].is_unique
    assert held.next_tick() == SEGMENTS
    assert held.silences() == [SILENCE]  # the journal: the log can be written again exactly
    again = InputLog(tmp_path / "again")
    again.generate(sc, SEGMENTS, scale=0.05, silence=held.silences())
    pd.testing.assert_frame_equal(again.read(), held.read())


def test_the_fold_emits_tentative_windows_once_and_keeps_their_panes() -> None:
    q = compile_query(load_scenario(SCENARIOS / "seed-groupby-window.yaml"))
    size, slide = q.size_s, q.slide_s
    pane = lambda t: int(t // slide)  # noqa: E731
    rows = pd.DataFrame(
        {
            "tag": "I",
            "key": [1, 1],
            "kg": 0,
            "side": 0,
            "pane": [pane(0.5), pane(size + 0.5)],
            "cnt": 1.0,
            "sum": 2.0,
            "mn": 2.0,
            "mx": 2.0,
        }
    )
    wm_stable = -math.inf
    out = ops.update_partition(rows, q, 0, -math.inf, wm_stable, {}, (-math.inf, size + 1.0))
    tentative = out[out["tag"] == "P"]
    assert len(tentative) >= 1 and (out["tag"] == "O").sum() == 0  # nothing is final yet
    assert 0 in set(tentative["pane"])  # the first window went out tentatively
    state = out[out["tag"] == "S"]
    assert set(state["pane"]) == set(rows["pane"])  # its panes stay for the correction
    again = ops.update_partition(
        state.assign(tag="S"), q, 0, wm_stable, wm_stable, {}, (size + 1.0, size + 1.0)
    )
    assert (again["tag"] == "P").sum() == 0  # each window is tentative once


def run(spark, tmp: Path, sc, mode: str) -> SparkPipeline:  # type: ignore[no-untyped-def]
    from controller.testing import key_group_plan

    q = compile_query(sc)
    opts = PipelineOptions(2, dpc_mode=mode, dpc_max_delay_s=1.5)
    pipe = SparkPipeline(spark, q, tmp, opts)
    pipe.plans.publish(key_group_plan(q, [i % 2 for i in range(q.key_groups)], 0, 2))
    pipe.input.generate(sc, SEGMENTS, scale=0.05, silence=sc.input_outages())
    pipe.run_available()
    pipe.flush()
    return pipe


@pytest.mark.spark
def test_dpc_on_spark_corrects_every_tentative_window_once_and_ends_exact(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sc = small_dpc_scenario(tmp_path)
    tent = run(spark, tmp_path / "tentative", sc, "tentative")
    block = run(spark, tmp_path / "block", sc, "block")
    for pipe in (tent, block):
        exp, _ = pipe.reference()
        # the stable view: nothing late, nothing lost (the reference counts every row, and the
        # rows are those of a run where S never went silent)
        assert_matches_reference(pipe.output(), exp)
        assert sum(st.late for st in pipe.stats.values()) == 0
    assert not (block.dir / "tentative").exists()  # block mode waits: nothing tentative
    committed = tent.log.committed()
    shown = read_view(tent.dir / "tentative", committed)
    assert len(shown) > 0, "no window went out tentatively during S's silence"
    stable = read_view(tent.dir / "output", committed)
    pairs = stable.groupby(["key", "window_start"]).size()
    per_tentative = pairs.reindex(pd.MultiIndex.from_frame(shown[["key", "window_start"]]))
    assert (per_tentative == 1).all()  # every tentative result has exactly one stable version
    first = shown.groupby(["key", "window_start"])["batch"].min()
    final = stable.set_index(["key", "window_start"])["batch"].reindex(first.index)
    assert (final > first).all()  # ... and it came later: a correction
    assert shown.duplicated(["key", "window_start"]).sum() == 0  # tentative once
    corrections = sum(st.info.get("corrections", 0) for st in tent.stats.values())
    assert corrections >= len(shown)  # (keys that first came with S's backlog add some)
    # tentative results came out while S was silent; block mode held every window back
    silent_batches = range(4, 9)  # pinned while S's coverage stood at 3 s
    assert shown["batch"].isin(silent_batches).any()
    held = read_view(block.dir / "output", block.log.committed())
    assert not (held["batch"].isin(silent_batches) & (held["window_start"] >= 0.0)).any()
    mid = latest_view(tent.dir, [b for b in committed if b <= int(shown["batch"].max())])
    assert (mid["status"] == "TENTATIVE").sum() > 0  # in the silence readers see them tentative
    latest = latest_view(tent.dir, committed)
    assert (latest["status"] == "STABLE").all()  # every tentative row was replaced
    # the same views through the command line (read-only)
    csv = tmp_path / "latest.csv"
    r = CliRunner().invoke(
        app, ["pipeline", "results", "--workdir", str(tent.dir), "--out", str(csv)]
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["by_status"] == {"STABLE": len(latest)}
    assert len(pd.read_csv(csv)) == len(latest)
    pq = tmp_path / "latest.parquet"  # a Parquet name gets Parquet, not CSV text
    r = CliRunner().invoke(
        app, ["pipeline", "results", "--workdir", str(tent.dir), "--out", str(pq)]
    )
    assert r.exit_code == 0 and pd.read_parquet(pq).equals(pd.read_csv(csv)), r.output
    for name, lines in (("latest.json", False), ("latest.jsonl", True)):  # were CSV text
        r = CliRunner().invoke(
            app, ["pipeline", "results", "--workdir", str(tent.dir), "--out", str(tmp_path / name)]
        )
        assert r.exit_code == 0, (name, r.output)
        got = pd.read_json(tmp_path / name, lines=lines)  # (JSON reads -2.0 back as -2)
        pd.testing.assert_frame_equal(got, pd.read_parquet(pq), check_dtype=False)
    r = CliRunner().invoke(app, ["pipeline", "results", "--workdir", str(tmp_path), "--view", "x"])
    assert r.exit_code == 2 and "--view" in r.output
    np.testing.assert_array_equal(
        latest.sort_values(["key", "window_start"])["value"].to_numpy(),
        tent.output().sort_values(["key", "window_start"])["value"].to_numpy(),
    )
