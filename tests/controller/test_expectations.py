"""A scenario's ``expect:`` block is checked: replay exits 4 naming the unmet expectation, and
every shipped scenario meets its own block on the simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.expectations import check_expectations, unmet
from controller.replay import replay_sim
from controller.scenario import ScenarioFile, load_scenario
from tests.conftest import ROOT, SCENARIOS

EXE = str(Path(sys.executable).parent / "trimtab")


def _copy(tmp_path: Path, name: str, ha: str | None = None, **expect: object) -> Path:
    doc = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    doc["expect"] = expect
    if ha is not None:
        doc.setdefault("controller", {}).setdefault("ha", {})["policy"] = ha
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_unmet_expectation_exits_4_naming_it(tmp_path: Path) -> None:
    path = _copy(tmp_path, "chain-arrival", max_mean_latency_s=1e-6, zero_lost_tuples=True)
    r = subprocess.run(
        [EXE, "replay", str(path), "--ticks", "60", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 4, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "max_mean_latency_s: mean_latency" in err[0]
    assert "zero_lost_tuples" not in err[0]  # that one holds
    checks = {c["expectation"]: c for c in json.loads(r.stdout)["expectations"]}
    assert checks["max_mean_latency_s"]["met"] is False
    assert checks["max_mean_latency_s"]["measured"] > 1e-6
    assert checks["zero_lost_tuples"]["met"] is True


def test_lost_tuples_fail_zero_lost_tuples(tmp_path: Path) -> None:
    """failure-storm without an availability policy loses tuples at its node failures."""
    sc = ScenarioFile.model_validate(
        yaml.safe_load(_copy(tmp_path, "failure-storm", "none", zero_lost_tuples=True).read_text())
    )
    res = replay_sim(sc, ticks=200)
    failed = unmet(check_expectations(sc.expect, res.summary))
    assert res.summary["lost_tuples"] > 0
    assert failed and failed[0].startswith("zero_lost_tuples: lost_tuples")


def test_a_met_expectation_exits_0(tmp_path: Path) -> None:
    path = _copy(tmp_path, "chain-arrival", max_mean_latency_s=10.0)
    r = subprocess.run(
        [EXE, "replay", str(path), "--ticks", "60"], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert "expectations met: max_mean_latency_s" in r.stderr


@pytest.mark.parametrize(
    "path",
    sorted(p for p in SCENARIOS.glob("*.yaml") if "expect:" in p.read_text()),
    ids=lambda p: p.stem,
)
def test_every_shipped_scenario_meets_its_expectations(path: Path) -> None:
    sc = load_scenario(path)
    checks = check_expectations(sc.expect, replay_sim(sc).summary)
    assert checks and all(c["met"] for c in checks), checks


def test_an_expectation_the_run_did_not_measure_is_not_met(spark, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A Spark run whose stream is silent times no batch: its p99 is None, and the replay
    said 'expectations met: max_p99_latency_s' with exit 0. It exits 4 naming the figure that
    was not measured; the check it could make still counts."""
    import typer

    from controller.cli.replays import _finish
    from controller.spark_replay import replay_spark

    doc = yaml.safe_load((SCENARIOS / "seed-groupby-window.yaml").read_text())
    doc["streams"][0]["rate"] = {"kind": "constant", "rate": 0}
    doc["expect"] = {"max_p99_latency_s": 1.0, "zero_lost_tuples": True}
    sc = ScenarioFile.model_validate(doc)
    res = replay_spark(sc, batches=2, workdir=tmp_path / "w", spark=spark)
    assert res.summary["p99_latency"] is None and res.summary["lost_tuples"] == 0
    with pytest.raises(typer.Exit) as e:
        _finish(res, None, True, sc)
    assert e.value.exit_code == 4
    err = capsys.readouterr().err
    assert "max_p99_latency_s: p99_latency was not measured" in err, err
    assert "zero_lost_tuples" not in err, err  # measured and met
