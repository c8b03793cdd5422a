from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SCENARIOS

KEYS = {
    "scenario",
    "substrate",
    "placement",
    "ticks",
    "throughput",
    "mean_latency",
    "p99_latency",
    "node_load_variance_mean",
    "mean_pairwise_node_correlation",
    "migrations",
    "dropped_fraction",
    "lost_tuples",
    "duplicate_tuples",
}
EXE = str(Path(sys.executable).parent / "trimtab")


def test_replay_json_keys() -> None:
    r = subprocess.run(
        [
            EXE,
            "replay",
            str(SCENARIOS / "anticorrelated-diurnal.yaml"),
            "--substrate",
            "sim",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    out = json.loads(r.stdout)
    assert set(out) >= KEYS
    assert out["substrate"] == "sim" and out["ticks"] == 1200
    assert out["throughput"] > 0


def test_replay_report_and_ticks(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            EXE,
            "replay",
            str(SCENARIOS / "failure-storm.yaml"),
            "--ticks",
            "170",
            "--seed",
            "3",
            "--report",
            str(tmp_path / "rep"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    for f in (
        "node_load.csv",
        "streams.csv",
        "node_load.png",
        "heatmap.png",
        "correlation_first_half.png",
        "report.html",
    ):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    assert "failure-storm" in r.stdout
    # the page lists the fault at 100 s with its adaptation, not the one at 200 s (after the
    # run's end) nor any the run holds less than the 60 s recovery window after
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Adaptation</h2>" in html and "<td class='n'>100</td>" in html
    assert "<td class='n'>200</td>" not in html


def test_unknown_placement_is_usage_error() -> None:
    r = subprocess.run(
        [EXE, "replay", str(SCENARIOS / "bursty-rod.yaml"), "--placement", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "placement" in r.stderr


def test_replay_shedding_flag() -> None:
    base = [EXE, "replay", str(SCENARIOS / "overload-ramp.yaml"), "--json"]
    lp = json.loads(
        subprocess.run(
            [*base, "--shedding", "lp"], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    none = json.loads(
        subprocess.run(
            [*base, "--shedding", "none"], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    assert lp["dropped_fraction"] > 0 and none["dropped_fraction"] == 0
    assert lp["mean_latency"] < none["mean_latency"] / 10
    bad = subprocess.run([*base, "--shedding", "magic"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "shedding" in bad.stderr


def test_initial_method_then_pairwise_rounds() -> None:
    from controller.replay import replay_sim
    from controller.scenario import load_scenario
    from controller.wiring import make_policy
    from placement.rod import rod
    from placement.rod_search import improve_feasible_set

    sc = load_scenario(SCENARIOS / "bursty-rod.yaml")
    ctl = sc.controller.model_copy(
        update={
            "placement": sc.controller.placement.model_copy(
                update={"method": "correlation-oneway", "initial": "rod"}
            )
        }
    )
    sc = sc.model_copy(update={"controller": ctl})
    policy = make_policy(sc)
    plan = policy.initial_plan()
    ctx = policy.ctx
    cap = ctx.cluster.capacities()
    greedy = rod(ctx.units.coeff, cap, ctx.units.edges, seed=sc.seed)
    searched = improve_feasible_set(ctx.units.coeff, cap, greedy, rounds=16, seed=sc.seed)
    assert plan.placement.assignment == tuple(searched.assignment.tolist())
    assert "ROD greedy + local search" in plan.reason
    res = replay_sim(sc, ticks=60)
    assert not any(d.details.get("phase") == "global" for d in res.decisions)
    bad = sc.model_copy(
        update={
            "controller": ctl.model_copy(
                update={"placement": ctl.placement.model_copy(update={"initial": "nope"})}
            )
        }
    )
    import pytest

    with pytest.raises(ValueError, match=r"controller\.placement\.initial"):
        make_policy(bad)


def _table_cells(out: str) -> dict[str, list[str]]:
    """A rich metrics table's rows: metric -> its cells, one per run."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) > 1:
            rows[cells[0]] = cells[1:]
    return rows


def test_the_tables_show_each_drifts_adaptation_as_the_json_does() -> None:
    """compare's and replay's tables carry the latency before and after each listed change and
    its adaptation rounds, the figures of --json ("never" where it is null): LLF never comes
    back from diurnal-phase-flip, correlation does."""
    env = {**os.environ, "COLUMNS": "200"}
    flip = str(SCENARIOS / "diurnal-phase-flip.yaml")
    for cmd in (["compare", flip, "--placement", "llf,correlation-twoway"], ["replay", flip]):
        args = [EXE, *cmd]
        run = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
        js = subprocess.run([*args, "--json"], capture_output=True, text=True, cwd=ROOT, check=True)
        runs = json.loads(js.stdout)
        runs = runs if isinstance(runs, list) else [runs]
        cells = _table_cells(run.stdout)
        want = [r["adaptation"][0] for r in runs]
        assert [a["at_s"] for a in want] == [600.0] * len(runs)
        rounds = [
            "never" if a["adaptation_rounds"] is None else a["adaptation_rounds"] for a in want
        ]
        shown = [c if c == "never" else float(c) for c in cells["adaptation_rounds after 600 s"]]
        assert shown == rounds, run.stdout
        after = [float(c) for c in cells["latency after 600 s (s)"]]
        assert after == pytest.approx([a["latency_after_s"] for a in want], rel=1e-3)
        # LLF never comes back (compare's first column); correlation-twoway does (the last)
        assert (rounds[0] == "never") == (cmd[0] == "compare") and rounds[-1] != "never"


def test_node_correlation_is_of_the_nodes_whose_loads_vary() -> None:
    """An idle or down node's flat load has no correlation: the report's figure is over the
    pairs of nodes whose loads vary, and null (n/a) when no pair does, not a 0 the code set."""
    import numpy as np
    import pandas as pd

    from controller.replay import window_stats

    t = np.sin(np.linspace(0, 6, 40))
    anti = pd.DataFrame({"a": 1 + t, "b": 1 - t, "idle": np.zeros(40)})
    var, rho = window_stats(anti, 10)
    assert rho is not None and abs(rho + 1.0) < 1e-9  # not (-1 + 0 + 0) / 3
    assert var > 0
    assert window_stats(anti[["a", "idle"]], 10)[1] is None
    # one window with a varying pair and one without: the mean of the window that has one
    half = pd.DataFrame({"a": 1 + t, "b": np.r_[1 - t[:20], np.ones(20)]})
    assert abs(window_stats(half, 20)[1] + 1.0) < 1e-9


def test_a_one_node_run_reports_no_correlation(tmp_path: Path) -> None:
    """replay --json says null, and replay's and compare's tables say n/a."""
    import yaml

    d = yaml.safe_load((SCENARIOS / "seed-groupby-window.yaml").read_text())
    d["cluster"]["nodes"] = d["cluster"]["nodes"][:1]
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump(d))
    exe = str(Path(sys.executable).parent / "trimtab")
    r = subprocess.run([exe, "replay", str(one), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mean_pairwise_node_correlation"] is None
    for argv in (["replay", str(one)], ["compare", str(one), "--placement", "llf,random"]):
        r = subprocess.run([exe, *argv], capture_output=True, text=True)
        row = [ln for ln in r.stdout.splitlines() if "mean_pairwise_node_correlation" in ln]
        assert r.returncode == 0 and row and "n/a" in row[0], r.stdout + r.stderr


def test_seed_reaches_a_spark_replay(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--seed`` on Spark draws the input log with that seed (it was dropped: a Spark replay
    always ran the scenario's seed). The replay is stopped at its door: what is checked here
    is what the command hands it, not Spark."""
    from typer.testing import CliRunner

    import controller.spark_replay as spark_replay
    from controller.cli import app

    def stop_at_the_door(sc, **_kw):  # type: ignore[no-untyped-def]
        raise ValueError(f"replay_spark got seed {sc.seed}")

    monkeypatch.setattr(spark_replay, "replay_spark", stop_at_the_door)
    gw = str(SCENARIOS / "seed-groupby-window.yaml")
    r = CliRunner().invoke(app, ["replay", gw, "--substrate", "spark", "--seed", "7"])
    assert r.exit_code == 2 and "replay_spark got seed 7" in r.stderr, r.output
    r = CliRunner().invoke(app, ["replay", gw, "--substrate", "spark"])
    assert "replay_spark got seed 5" in r.stderr, r.output  # the scenario's own


def test_partitions_beyond_the_key_groups_are_noted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A key group is the unit placed: 20 partitions for the scenario's 8 key groups leave 12
    without a row. The replay still runs (stopped at its door here), with a note saying so;
    8 partitions get none."""
    from typer.testing import CliRunner

    import controller.spark_replay as spark_replay
    from controller.cli import app

    def stop_at_the_door(sc, **_kw):  # type: ignore[no-untyped-def]
        raise ValueError("stopped")

    monkeypatch.setattr(spark_replay, "replay_spark", stop_at_the_door)
    gw = str(SCENARIOS / "seed-groupby-window.yaml")
    r = CliRunner().invoke(app, ["replay", gw, "--substrate", "spark", "--partitions", "20"])
    assert "note: --partitions 20 for 8 key groups: 12 partition(s) will get no rows" in r.stderr
    r = CliRunner().invoke(app, ["replay", gw, "--substrate", "spark", "--partitions", "8"])
    assert "note:" not in r.stderr, r.stderr


def test_a_refused_run_makes_no_report_directory_and_spark_is_not_started(tmp_path: Path) -> None:
    """The report directory was made when its flag was checked: a run refused by a later
    check (here an unknown partitioner) left it behind, empty. And a query Spark cannot run
    (a keyed operator without a window) was refused only once Spark had started."""
    import yaml

    report = tmp_path / "r" / "demo"
    r = subprocess.run(
        [EXE, "demo", "--partitioner", "nope", "--report", str(report)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--partitioner: unknown name 'nope'" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()
    doc = yaml.safe_load((SCENARIOS / "seed-groupby-window.yaml").read_text())
    del doc["operators"][1]["window"]
    sc = tmp_path / "nowindow.yaml"
    sc.write_text(yaml.safe_dump(doc))
    for cmd in (
        ["replay", str(sc), "--substrate", "spark", "--batches", "2"],
        ["pipeline", "run", str(sc), "--workdir", str(tmp_path / "w"), "--default-plan"],
    ):
        r = subprocess.run([EXE, *cmd], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stderr == (
            f"error: {sc}: operators.count_k.window: a keyed operator needs a window on Spark\n"
        )  # one line: no Spark session's start-up lines before it
    assert not (tmp_path / "w").exists()
    # a misspelt --placement: refused once Spark had started (replay), or once the demo's
    # whole hash run had ended (a minute), by the controller's own check
    gw = str(SCENARIOS / "seed-groupby-window.yaml")
    for cmd in (
        ["replay", gw, "--substrate", "spark", "--placement", "magic"],
        ["demo", "--placement", "magic", "--report", str(report)],
    ):
        r = subprocess.run([EXE, *cmd], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: --placement: unknown method 'magic' (known: ")
        assert r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "r").exists()


def test_a_spark_replay_says_which_scenario_faults_it_will_not_inject(capsys) -> None:  # type: ignore[no-untyped-def]
    """failure-storm on Spark ran with no fault and said nothing: node faults are the
    simulator's. Those within the replayed batches are named; a stream's partition fault,
    which the replay does inject, is not."""
    from controller.cli.common import note_node_faults
    from controller.scenario import load_scenario

    storm = load_scenario(SCENARIOS / "failure-storm.yaml")
    note_node_faults(storm, 4)  # 4 s: before the first fault
    assert capsys.readouterr().err == ""
    note_node_faults(storm, 150)
    err = capsys.readouterr().err
    assert err.startswith("note: a Spark replay does not inject the scenario's node faults")
    assert "(kill n1 at 100 s)" in err and "slow" not in err  # the slow one is at 200 s
    note_node_faults(storm, None)  # an imported log: every node fault
    assert "kill n1 at 100 s, slow n2 at 200 s" in capsys.readouterr().err
    note_node_faults(load_scenario(SCENARIOS / "spark-silent-input.yaml"), None)
    assert capsys.readouterr().err == ""
    # and `replay --substrate spark` says it before the run
    import controller.cli.replays as rp

    rp._replay_spark_cli(lambda sc, **kw: None, False, storm, batches=150)
    assert "(kill n1 at 100 s)" in capsys.readouterr().err


def test_a_spark_run_too_short_for_the_global_step_says_so(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """spark-anticorrelated's correlation window is 20 samples, a batch each, so the global
    step's plan is pinned from batch id 20: at the default 10 batches a correlation method ran
    LLF's plan throughout and a comparison showed LLF against itself, with nothing said. Each
    Spark run (stopped at its door here) says how many timed batches run the initial plan;
    none when the warm-up covers them, for other methods, or when another method makes the
    initial plan (no global step)."""
    from typer.testing import CliRunner

    import controller.spark_compare as spark_compare
    import controller.spark_replay as spark_replay
    from controller.cli import app

    def stop_at_the_door(*_a, **_kw):  # type: ignore[no-untyped-def]
        raise ValueError("stopped")

    monkeypatch.setattr(spark_replay, "replay_spark", stop_at_the_door)
    monkeypatch.setattr(spark_compare, "compare_spark", stop_at_the_door)
    anti = str(SCENARIOS / "spark-anticorrelated.yaml")

    def said(*args: str) -> str:
        r = CliRunner().invoke(app, [*args, "--substrate", "spark"])
        assert r.exit_code == 2 and "stopped" in r.stderr, r.output
        return " ".join(r.stderr.split())

    two = ["--placement", "correlation-twoway"]
    assert (
        "note: correlation-twoway runs its initial plan (LLF's) in all 10 batches: the global "
        "step waits for a window of 20 load samples (controller.window_k), one a batch, and its "
        "plan is pinned from batch id 20; --batches 30 --warmup-batches 20 times 10 batches of it"
    ) in said("replay", anti, *two)
    assert (
        "note: correlation-oneway, correlation-twoway: 19 of the 23 timed batches run the "
        "initial plan (LLF's)"
    ) in said("compare", anti, "--placement", "hash,correlation-oneway,correlation-twoway",
              "--batches", "24")  # fmt: skip
    assert "--warmup-batches 20 times its plan only" in said(
        "replay", anti, *two, "--batches", "24"
    )
    # one batch after the step is too few to time: --warmup-batches 20 alone would be refused
    assert "--batches 30 --warmup-batches 20 times 10" in said(
        "replay", anti, *two, "--batches", "21"
    )
    assert "note:" not in said("replay", anti, *two, "--batches", "24", "--warmup-batches", "20")
    assert "note:" not in said("compare", anti, "--placement", "hash,llf,rod")
    assert "correlation-oneway, correlation-selective run their initial plan (LLF's) in all " in (
        said("compare", anti, "--placement", "correlation-oneway,correlation-selective")
    )
    # ROD named as the initial plan: a correlation method skips its global step
    import yaml

    doc = yaml.safe_load((SCENARIOS / "spark-anticorrelated.yaml").read_text())
    doc["controller"]["placement"] = {"method": "correlation-twoway", "initial": "rod"}
    (tmp_path / "rod-first.yaml").write_text(yaml.safe_dump(doc))
    assert "note:" not in said("replay", str(tmp_path / "rod-first.yaml"))


def test_the_demo_runs_from_any_directory(tmp_path: Path) -> None:
    """Its default scenario was a path relative to the directory it ran in: from anywhere but
    the repository, "scenarios/seed-groupby-window.yaml: file not found"."""
    r = subprocess.run(
        [EXE, "demo", "--substrate", "sim"], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "reports" / "demo" / "report.html").is_file()


def test_a_placement_override_says_which_of_the_scenario_s_params_it_leaves_out(
    tmp_path: Path,
) -> None:
    """The file's method reads every parameter (checked at load); ``--placement llf`` reads
    none of correlation's, so its run says it leaves ``pair_threshold`` out, and not ``seed``,
    which the file's initial method (rod) still reads. A method that reads them all is not
    noted, and a run refused by a later flag notes nothing."""
    import yaml
    from typer.testing import CliRunner

    from controller.cli import app

    d = yaml.safe_load((SCENARIOS / "anticorrelated-diurnal.yaml").read_text())
    d["controller"]["placement"] = {
        "method": "correlation-twoway",
        "initial": "rod",
        "params": {"pair_threshold": 0.3, "seed": 4},
    }
    d["duration_s"] = 120
    sc = tmp_path / "sc.yaml"
    sc.write_text(yaml.safe_dump(d))
    run = [str(sc)]

    def invoke(*args: str) -> tuple[int, str]:
        r = CliRunner().invoke(app, list(args))
        return r.exit_code, r.stderr

    note = "controller.placement.params pair_threshold 0.3 (set for correlation-twoway): "
    assert invoke("replay", *run, "--placement", "llf") == (
        0,
        f"note: --placement llf does not read {note}its run leaves it out\n",
    )
    assert invoke("replay", *run, "--placement", "correlation-oneway") == (0, "")
    code, said = invoke("compare", *run, "--placement", "llf,random,correlation-oneway")
    assert (code, said) == (
        0,
        f"note: --placement llf, random do not read {note}their runs leave it out\n",
    )
    code, said = invoke("replay", *run, "--placement", "llf", "--shedding", "bogus")
    assert code == 2 and "note:" not in said and "--shedding" in said


def test_compare_without_placement_runs_the_scenario_s_own_method_beside_the_defaults(
    tmp_path: Path,
) -> None:
    """``compare SCENARIO`` answers "does my scenario's method beat the baseline?": LLF,
    correlation-oneway and the method ``replay`` runs (the file's), that one last and once. A
    least-loaded file (LLF with failover) adds nothing; ``--placement`` is run as given."""
    import yaml
    from typer.testing import CliRunner

    from controller.cli import app

    d = yaml.safe_load((SCENARIOS / "anticorrelated-diurnal.yaml").read_text())
    d["duration_s"] = 120
    sc = tmp_path / "sc.yaml"

    def placements(method: str, *more: str) -> list[str]:
        d["controller"]["placement"] = {"method": method}
        sc.write_text(yaml.safe_dump(d))
        r = CliRunner().invoke(app, ["compare", str(sc), "--json", *more])
        assert r.exit_code == 0, r.output
        return [row["placement"] for row in json.loads(r.stdout)]

    assert placements("correlation-twoway") == ["llf", "correlation-oneway", "correlation-twoway"]
    assert placements("rod") == ["llf", "correlation-oneway", "rod"]
    assert placements("correlation-oneway") == ["llf", "correlation-oneway"]
    assert placements("least-loaded") == ["llf", "correlation-oneway"]
    assert placements("rod", "--placement", "random") == ["random"]
