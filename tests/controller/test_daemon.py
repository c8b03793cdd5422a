"""The controller daemon against the simulator."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import yaml

from controller.config import ConfigError, load_settings
from controller.daemon import Daemon
from controller.decisionlog import DecisionLog
from controller.gates import in_blackout
from tests.conftest import ROOT, SCENARIOS

if TYPE_CHECKING:
    from spark_adapter.batchstats import BatchStats

EXE = str(Path(sys.executable).parent / "trimtab")


def settings(tmp: Path, **over):  # type: ignore[no-untyped-def]
    base = {
        "control": {"interval_s": 0.05, "window_samples": 5},
        "placement": {"method": "correlation-oneway"},
        "substrate": {
            "kind": "sim",
            "scenario": str(SCENARIOS / "anticorrelated-diurnal.yaml"),
            "ticks_per_round": 10,
        },
        "metrics": {"port": 0},
        "decision_log": str(tmp / "decisions.sqlite"),
        "state_dir": str(tmp / "state"),
    }
    if over.get("substrate", {}).get("kind") == "spark-external":
        del base["substrate"]["ticks_per_round"]  # the simulator's: refused on Spark
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return load_settings(None, **base)


def test_daemon_runs_rounds_and_logs_explained_decisions(tmp_path: Path) -> None:
    d = Daemon(settings(tmp_path))
    for _ in range(12):
        d.tick()
    rows = DecisionLog(tmp_path / "decisions.sqlite").last(50)
    assert len(rows) == 12
    assert all(r["reason"] for r in rows)
    placed = [r for r in rows if r["kind"].startswith("place")]
    assert placed, "correlation placement should act after the warm-up"
    assert "expected_gain" in placed[0]["details"] and "before" in placed[0]["details"]
    assert rows[-1]["observation"]["node_load"]
    assert d.loop.plan.version >= 1


def test_dry_run_applies_nothing(tmp_path: Path) -> None:
    d = Daemon(settings(tmp_path, control={"dry_run": True}))
    applied = []
    real = d.substrate.apply
    d.substrate.apply = lambda p: (applied.append(p), real(p))  # type: ignore[method-assign]
    for _ in range(12):
        d.tick()
    rows = DecisionLog(tmp_path / "decisions.sqlite").last(50)
    assert not applied
    assert not any(r["applied"] for r in rows)
    assert any(r["kind"].startswith("place") for r in rows)  # recommended, not applied
    assert d.loop.plan.version == 0
    # the log says which plan is in effect (0) and what was recommended
    assert all(r["plan_version"] == 0 for r in rows)
    assert any(r["details"].get("recommended_plan_version") == 1 for r in rows)


def test_restart_resumes_at_the_logged_plan_version(tmp_path: Path) -> None:
    d = Daemon(settings(tmp_path))
    for _ in range(12):
        d.tick()
    v = d.loop.plan.version
    assert v >= 1
    # status names the newest round that decided something, not only the last (a hold)
    changes = DecisionLog.read_only(tmp_path / "decisions.sqlite").last(1, {"place", "shed"})
    change = {k: changes[0][k] for k in ("round", "time", "kind", "reason")}
    assert d.status()["last_change"] == change and d.status()["last_round"]["kind"] == "hold"
    d.lead.close()  # a clean stop releases the lease
    d.log.close()
    again = Daemon(settings(tmp_path))
    assert again.resumed_from == v
    assert again.status()["last_change"] == change  # read from the log, before any round
    # the resumed plan is published as the next version, under the new controller epoch
    assert again.loop.plan.version == v + 1 and again.loop.plan.epoch == d.loop.plan.epoch + 1
    assert again.loop.plan.placement == d.loop.plan.placement
    assert again.substrate.plan is not None and again.substrate.plan.version == v + 1  # type: ignore[attr-defined]
    again.tick()
    assert again.loop.plan.version >= v + 1
    # round numbers go on across the restart, and every round has an ISO-8601 UTC time
    rows = DecisionLog.read_only(tmp_path / "decisions.sqlite").last(50)
    rounds = [r["round"] for r in rows]
    assert rounds == list(range(1, 14)), rounds
    assert all(r["time"].endswith("Z") and r["time"][10] == "T" for r in rows)


def test_prometheus_endpoint_serves_metrics_on_loopback(tmp_path: Path) -> None:
    d = Daemon(settings(tmp_path))
    port = d.telemetry.serve("127.0.0.1", 0)
    try:
        for _ in range(3):
            d.tick()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for name in (
            "trimtab_control_tick_duration_seconds_bucket",
            "trimtab_decisions_total",
            "trimtab_node_load_cores",
            "trimtab_node_load_variance_cores_squared",
            "trimtab_node_load_correlation",
            "trimtab_scheduler_jobs_skipped_total",
            "trimtab_shed_ratio",
            "trimtab_migrations_total",
            "trimtab_plan_version",
            "trimtab_scheduler_jobs_missed_total",
            "trimtab_failures_detected_total",
        ):
            assert name in body, name
        # no pipeline is steered: its metrics are absent, not zeros a stall alert would read
        assert "trimtab_pipeline_" not in body
        sock = [s for s in d.telemetry.server.socket.getsockname()[:1]]
        assert sock == ["127.0.0.1"]
        other = [
            a
            for a in {
                i[4][0] for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
            }
            if not a.startswith("127.")
        ]
        for addr in other:  # not reachable on any other interface
            with pytest.raises(OSError), socket.create_connection((addr, port), timeout=1):
                pass
    finally:
        d.telemetry.stop()
    with pytest.raises(ValueError, match="loopback"):
        d.telemetry.serve("0.0.0.0", 0)


def test_migrations_are_exported_by_the_rule_that_moved_them(tmp_path: Path) -> None:
    """On `diurnal-phase-flip` the daemon's first global step and the stale trigger's
    re-placement after the flip both move units: the endpoint counts each under its cause,
    as the decision log's applied decisions name them, and every cause is exported from the
    start (at 0: no pair-wise move here, a phase flip changes no node's mean)."""
    from prometheus_client.parser import text_string_to_metric_families

    sc = str(SCENARIOS / "diurnal-phase-flip.yaml")
    d = Daemon(
        settings(
            tmp_path,
            control={"interval_s": 0.05, "window_samples": 20},
            placement={"method": "correlation-twoway"},
            substrate={"kind": "sim", "scenario": sc, "ticks_per_round": 10},
        )
    )
    port = d.telemetry.serve("127.0.0.1", 0)
    try:
        for _ in range(70):  # past the flip at 600 s and the trigger's re-placement
            d.tick()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        d.telemetry.stop()
    family = next(f for f in text_string_to_metric_families(body) if f.name == "trimtab_migrations")
    got = {s.labels["cause"]: s.value for s in family.samples if s.name.endswith("_total")}
    logged: dict[str, float] = {}
    for r in DecisionLog(tmp_path / "decisions.sqlite").last(100):
        if r["applied"] and r["details"].get("moved"):
            cause = r["details"]["cause"]
            logged[cause] = logged.get(cause, 0.0) + r["details"]["moved"]
    assert logged.keys() == {"global-step", "stale-trigger"}, logged
    assert {c: v for c, v in got.items() if v} == logged
    assert got["pairwise"] == 0.0 and got["failover"] == 0.0  # there from the start


def test_a_check_that_names_the_value_is_not_followed_by_its_type(tmp_path: Path) -> None:
    """Our own checks name the bad value; a list handed to one is not then named as 'list'
    (the line ended '... is not HH:MM-HH:MM (got list)')."""
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"control": {"blackout_windows_utc": ["22:00-23:00", "25:00-1"]}}))
    with pytest.raises(ConfigError) as ei:
        load_settings(f)
    assert str(ei.value).endswith(
        "control.blackout_windows_utc: blackout window '25:00-1' is not HH:MM-HH:MM"
    ), str(ei.value)
    # a window that starts where it ends held nothing back and said nothing; a whole day
    # is written to 24:00
    f.write_text(yaml.safe_dump({"control": {"blackout_windows_utc": ["01:00-01:00"]}}))
    with pytest.raises(ConfigError, match="'01:00-01:00' is empty: it ends where it starts"):
        load_settings(f)
    f.write_text(yaml.safe_dump({"control": {"blackout_windows_utc": ["00:00-24:00"]}}))
    windows = load_settings(f).control.blackout_windows_utc
    at = [datetime(2026, 1, 1, h, m, tzinfo=UTC) for h, m in ((0, 0), (12, 0), (23, 59))]
    assert all(in_blackout(windows, t) for t in at)
    f.write_text(yaml.safe_dump({"control": {"interval_s": [1, 2]}}))  # pydantic's own: typed
    with pytest.raises(ConfigError, match=r"control.interval_s: .* \(got list\)"):
        load_settings(f)
    f.write_text(yaml.safe_dump({"control": {"interval_s": []}}))  # empty: shown as it is
    with pytest.raises(ConfigError, match=r"control.interval_s: .* \(got \[\]\)"):
        load_settings(f)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"control": {"interval_s": 0}}, "control.interval_s"),
        (  # the scheduler ran it once a second, not as asked
            {"control": {"interval_s": 1e-9}},
            "control.interval_s: Input should be greater than or equal to 0.01 (got 1e-09)",
        ),
        ({"control": {"interval_s": "soon"}}, "control.interval_s"),
        ({"control": {"bogus": 1}}, "control.bogus"),
        ({"control": {"blackout_windows_utc": ["25:00-26:00"]}}, "control.blackout_windows_utc"),
        ({"control": {"interval_s": 1, "misfire_grace_s": 5}}, "misfire_grace_s"),
        ({"placement": {"max_moves": -1}}, "placement.max_moves"),
        ({"placement": {"initial": "bogus"}}, "placement.initial: unknown method 'bogus'"),
        ({"shedding": {"method": "magic"}}, "shedding.method"),
        ({"shedding": {"headroom": 1.5}}, "shedding.headroom"),
        (
            {"availability": {"heartbeat_timeout_s": 10, "failure_timeout_s": 5}},
            "failure_timeout_s",
        ),
        ({"substrate": {"kind": "k8s"}}, "substrate.kind"),
        ({"metrics": {"host": "0.0.0.0"}}, "metrics.host"),
        ({"metrics": {"port": 70000}}, "metrics.port"),
        ({"nonsense": True}, "nonsense"),
    ],
)
def test_every_config_error_names_key_and_value(tmp_path: Path, doc: dict, expected: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as ei:
        load_settings(f)
    assert expected in str(ei.value)
    r = subprocess.run(
        [EXE, "run", "--config", str(f)], capture_output=True, text=True, cwd=tmp_path
    )
    assert r.returncode == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("TRIMTAB_CONTROL_INTERVAL_S", "two underscores (TRIMTAB_CONTROL__INTERVAL_S)"),
        ("TRIMTAB_CONTROLL__INTERVAL_S", "no setting 'controll'"),
        ("TRIMTAB_DECISIONLOG", "no setting 'decisionlog'"),
    ],
)
def test_a_misspelt_environment_variable_is_refused_not_ignored(
    tmp_path: Path, name: str, expected: str
) -> None:
    """The settings read only their own fields' names: a misspelt TRIMTAB_ variable set
    nothing, and the daemon ran as if it were not there."""
    _env_refused(tmp_path, name, "7", f"environment {name}: not a setting: ", expected)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        (
            "TRIMTAB_CONTROL__BLACKOUT_WINDOWS_UTC",
            "23:00-01:00",
            'control.blackout_windows_utc: a list is given as JSON, e.g. \'["a", "b"]\'',
        ),
        ("TRIMTAB_PLACEMENT__PARAMS", "stale_trigger=0", "placement.params: a mapping is given"),
        ("TRIMTAB_AVAILABILITY__DPC", "tentative", "availability.dpc: a mapping is given as JSON"),
    ],
)
def test_a_list_or_mapping_variable_not_in_json_is_named(
    tmp_path: Path, name: str, value: str, expected: str
) -> None:
    """The settings read a list or a mapping from the environment as JSON; other text stopped
    them with 'SettingsError: error parsing value for field "control" from source
    "EnvSettingsSource"', which names no variable."""
    _env_refused(tmp_path, name, value, f"environment {name}: {expected}", f"(got {value!r})")


def _env_refused(tmp_path: Path, name: str, value: str, *expected: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"control": {"interval_s": 3}}))
    env = {**os.environ, name: value}
    for cmd in (["validate", str(f)], ["run", "--config", str(f)]):
        r = subprocess.run(
            [EXE, *cmd], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
        )
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (cmd, r.stderr)
        assert all(e in lines[0] for e in expected), lines
    assert not (tmp_path / ".trimtab").exists()  # refused before anything was made


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ({"params": {"stale_trigerr": 0}}, "placement.params.stale_trigerr: least-loaded reads no"),
        ({"method": "rod", "fixed": {"c0_0": "n0"}}, "placement.fixed: pins are placed by"),
        # a pin to a node the scenario lacks crashed the daemon ("tuple.index(x): x not in
        # tuple"); one of an operator it lacks was ignored
        ({"method": "fixed", "fixed": {"c0_0": "n99"}}, "placement.fixed.c0_0: unknown node"),
        ({"method": "fixed", "fixed": {"nope": "n0"}}, "placement.fixed: unknown operator 'nope'"),
    ],
)
def test_run_refuses_a_placement_setting_its_method_would_ignore(
    tmp_path: Path, placement: dict, expected: str
) -> None:
    """The daemon ran with a misspelt parameter's default, or without the pins it was given;
    now it stops before anything is made (the config's method, or its scenario's)."""
    _refused_at_validate_and_run(tmp_path, {"placement": placement}, expected)


def _refused_at_validate_and_run(tmp_path: Path, doc: dict, expected: str) -> None:
    f = tmp_path / "c.yaml"
    sub = {"kind": "sim", "scenario": str(SCENARIOS / "anticorrelated-diurnal.yaml")}
    f.write_text(yaml.safe_dump({"substrate": sub, "metrics": {"port": 0}, **doc}))
    for cmd in (["validate", str(f)], ["run", "--config", str(f)]):
        r = subprocess.run([EXE, *cmd], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (cmd, r.stderr)
        assert lines[0].startswith(f"error: {f}: ") and expected in lines[0], (cmd, lines)
    assert not (tmp_path / ".trimtab").exists()


def test_scaling_bounds_above_the_scenarios_nodes_are_refused_at_validate(tmp_path: Path) -> None:
    """validate said ok and run refused (without naming the file)."""
    _refused_at_validate_and_run(
        tmp_path,
        {"scaling": {"enabled": True, "max_nodes": 12}},
        "scaling.max_nodes: 12 exceeds the cluster's 8 nodes",
    )


def test_every_trimtab_variable_the_code_reads_is_a_setting_or_named() -> None:
    """A TRIMTAB_ variable the code reads outside the settings must be in OTHER_ENV, or setting
    it would stop the daemon as a misspelt setting."""
    import re

    from controller.config import Settings
    from controller.settings_env import env_problem

    names = {
        m
        for d in ("controller", "spark_adapter", "core", "simulator")
        for f in (ROOT / d).rglob("*.py")
        if f.name != "settings_env.py"  # its doctests spell names wrong on purpose
        for m in re.findall(r"TRIMTAB_[A-Z][A-Z0-9_]*", f.read_text())
    }
    assert "TRIMTAB_EXECUTOR_SLOWDOWN" in names and "TRIMTAB_NO_PROGRESS" in names
    assert [n for n in sorted(names) if env_problem({n: "1"}, Settings) is not None] == []


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"control": {"interval_s": 3}, "metrics": {"port": 1234}}))
    monkeypatch.setenv("TRIMTAB_CONTROL__INTERVAL_S", "7")
    s = load_settings(f)
    assert s.control.interval_s == 7 and s.metrics.port == 1234
    monkeypatch.setenv("TRIMTAB_METRICS__HOST", "10.1.2.3")
    with pytest.raises(ConfigError, match="metrics.host"):
        load_settings(f)
    with pytest.raises(ConfigError, match="file not found"):
        load_settings(tmp_path / "missing.yaml")


def test_hysteresis_prevents_ping_pong(tmp_path: Path) -> None:
    """Loads that oscillate around the pair threshold must not bounce operators back and forth."""
    from controller.loop import ControlLoop
    from controller.placements import Correlation
    from controller.policy import ControlPolicy
    from controller.scenario import load_scenario
    from controller.wiring import make_context
    from core.cluster import NodeStatus
    from core.observation import Observation

    sc = load_scenario(SCENARIOS / "anticorrelated-diurnal.yaml")
    ctl = sc.controller.model_copy(
        update={
            "placement": sc.controller.placement.model_copy(
                update={"cooldown_rounds": 1, "ineffective_hold_rounds": 5}
            )
        }
    )
    ctx = make_context(sc.model_copy(update={"controller": ctl}))
    m, n = ctx.units.m, ctx.cluster.n
    rng = np.random.default_rng(0)

    class Flip:
        """Each round the unit loads swap which half of the operators is heavy."""

        def __init__(self) -> None:
            self.r = 0

        def observe(self) -> Observation:
            self.r += 1
            base = np.where((np.arange(m) % 2 == self.r % 2), 0.16, 0.04)[:, None] + rng.normal(
                0, 0.002, (m, 5)
            )
            node = np.zeros((n, 5))
            return Observation(
                float(self.r), base, node, np.zeros((5, 5)), tuple([NodeStatus.UP] * n), np.zeros(n)
            )

        def apply(self, plan: object) -> None:
            pass

    method = Correlation("oneway", {})
    method.global_done = True
    loop = ControlLoop(Flip(), ControlPolicy(ctx, method), window_k=5)
    loop.start()
    moves_per_unit = np.zeros(m, dtype=int)
    prev = loop.plan.placement.as_array()
    for _ in range(30):
        loop.tick()
        cur = loop.plan.placement.as_array()
        moves_per_unit += cur != prev
        prev = cur
    changes = sum(1 for r in loop.records if r.applied)
    assert changes <= 15  # the cooldown alone halves the rounds that may act
    assert moves_per_unit.max() <= 6  # no operator ping-pongs every round


def test_daemon_process_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "control": {"interval_s": 0.2},
                "placement": {"method": "correlation-oneway"},
                "substrate": {
                    "kind": "sim",
                    "scenario": str(SCENARIOS / "anticorrelated-diurnal.yaml"),
                },
                "metrics": {"port": 0},
                "decision_log": str(tmp_path / "d.sqlite"),
                "state_dir": str(tmp_path / "st"),
            }
        )
    )
    p = subprocess.Popen(
        [EXE, "run", "--config", str(f)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = tmp_path / "st" / "status.json"
            if (
                st.exists()
                and (json.loads(st.read_text()).get("last_round") or {}).get("round", 0) >= 3
            ):
                break
            time.sleep(0.2)
        status = subprocess.run(
            [EXE, "status", "--state-dir", str(tmp_path / "st"), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        s = json.loads(status.stdout)
        assert (
            s["running"]
            and s["plan_version"] >= 0
            and s["policies"]["placement"] == "correlation-oneway"
        )
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
    assert p.returncode == 0, err
    assert '"event": "stopped"' in err
    # the first line says where the decisions and the status go, so `decisions` and `status`
    # can be pointed there
    starting = json.loads(err.splitlines()[0])
    assert starting["event"] == "starting", starting
    assert starting["decision_log"] == str((tmp_path / "d.sqlite").resolve())
    assert starting["state_dir"] == str((tmp_path / "st").resolve())
    dec = subprocess.run(
        [EXE, "decisions", "--decision-log", str(tmp_path / "d.sqlite"), "--last", "3", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(dec.stdout)
    assert len(rows) == 3 and all(r["reason"] for r in rows)
    # the table in an 80-column terminal: the reasons get the width the other columns leave
    env = {**os.environ, "COLUMNS": "80"}
    table = subprocess.run(
        [EXE, "decisions", "--decision-log", str(tmp_path / "d.sqlite"), "--last", "3"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.splitlines()
    head = next(ln for ln in table if "reason" in ln)
    assert max(map(len, table)) <= 80 and len(head.split("┃")[-2]) >= 20, "\n".join(table)
    assert rows[-1]["time"][11:19] in "\n".join(table)  # the time of day, the date above


def test_report_renders_from_a_small_run(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            EXE,
            "replay",
            str(SCENARIOS / "failure-storm.yaml"),
            "--ticks",
            "200",
            "--report",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    for png in (
        "heatmap.png",
        "correlation_first_half.png",
        "correlation_second_half.png",
        "placement.png",
        "shed.png",
        "recovery.png",
    ):
        (tmp_path / "run" / png).unlink()
    r = subprocess.run([EXE, "report", str(tmp_path / "run")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for png in (
        "heatmap.png",
        "correlation_first_half.png",
        "correlation_second_half.png",
        "placement.png",
        "shed.png",
        "recovery.png",
    ):
        assert (tmp_path / "run" / png).stat().st_size > 1000
    html = (tmp_path / "run" / "report.html").read_text()
    assert html.count("data:image/png;base64") >= 6
    bad = subprocess.run([EXE, "report", str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "nope: no such directory" in bad.stderr, bad.stderr
    html_file = tmp_path / "run" / "report.html"
    bad = subprocess.run([EXE, "report", str(html_file)], capture_output=True, text=True)
    assert bad.returncode == 2 and "report.html: not a directory" in bad.stderr, bad.stderr


def test_a_report_written_over_another_runs_shows_only_its_own_run(tmp_path: Path) -> None:
    """A run with no fault, placement or shed series (a Spark run's) written into the report
    directory of one that had them: the other run's files stayed, and its report showed the
    other run's fault and placements as its own."""
    import dataclasses

    from controller.replay import replay_sim
    from controller.report import write_report
    from controller.scenario import load_scenario

    first = replay_sim(load_scenario(SCENARIOS / "failure-storm.yaml"), ticks=120)
    write_report(first, tmp_path, comparison=[first.summary, first.summary])
    assert {"events.csv", "placement.csv", "comparison.json"} <= {
        p.name for p in tmp_path.iterdir()
    }
    bare = dataclasses.replace(first.series, shed=None, placement=None, events=None, nodes=None)
    write_report(dataclasses.replace(first, series=bare), tmp_path)
    left = {"comparison.json", "nodes.csv", "shed.csv", "placement.csv", "events.csv"}
    assert not left & {p.name for p in tmp_path.iterdir()}
    page = (tmp_path / "report.html").read_text()
    assert "Side by side" not in page
    from controller.report import _figures

    figs = {n: f for n, f, _ in _figures(tmp_path, pd_read(tmp_path / "node_load.csv"), [])}
    notes = [t.get_text() for ax in figs["recovery.png"].axes for t in ax.texts]
    assert any("No faults" in t for t in notes), notes


def test_plot_functions_return_figures() -> None:
    import pandas as pd

    from controller.report import plot_correlation, plot_heatmap, plot_placement, plot_recovery

    df = pd.DataFrame(np.random.default_rng(0).random((20, 3)), columns=["a", "b", "c"])
    assert len(plot_heatmap(df).axes) == 2  # the plot and its colour bar
    assert plot_correlation(df).axes[0].get_title() == "Node load correlation"
    assert len(plot_placement(df.round()).axes[0].collections) == 3
    ev = pd.DataFrame({"time_s": [1.0], "kind": ["kill"], "node": ["b"]})
    assert (
        plot_recovery(ev, [{"kind": "recover", "time_s": 2.0}], ["a", "b", "c"]).axes[0].get_title()
        == "Recovery timeline"
    )


def test_a_spark_runs_plots_count_whole_micro_batches() -> None:
    """A Spark run's series are indexed by micro-batch: its axis ticks are whole batches (a
    3-batch run was ticked 0, 0.25, 0.5, ...), a simulator run's are seconds."""
    import pandas as pd

    from controller.report import plot_node_load, plot_shed

    by_batch = pd.DataFrame({"p0": [0.1, 0.3, 0.2]}, index=pd.Index([0, 1, 2], name="batch"))
    for fig in (plot_node_load(by_batch), plot_shed(by_batch.clip(upper=1.0))):
        ax = fig.axes[0]
        fig.canvas.draw()
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ax.get_xlabel() == "micro-batch" and ticks == [0, 1, 2], ticks
    by_time = by_batch.rename_axis("time_s")
    assert plot_node_load(by_time).axes[0].get_xlabel() == "time (s)"


def test_validate_checks_configs_scenarios_and_plans(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "placement": {"units": ["a"], "nodes": ["n0"], "assignment": [3]}}
        )
    )
    r = subprocess.run(
        [
            EXE,
            "validate",
            str(ROOT / "examples/controller.yaml"),
            str(SCENARIOS / "bursty-rod.yaml"),
            str(plan),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "ok: " in r.stdout and "(config)" in r.stdout and "(scenario)" in r.stdout
    assert "assignment" in r.stderr


def test_a_config_naming_no_scenario_steers_the_shipped_one_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config without ``substrate`` steers the shipped anticorrelated-diurnal; its default
    path was relative, looked for in the current directory: outside the repository
    ``validate`` said "substrate.scenario: file not found: scenarios/..." of a field the file
    does not set, and ``run`` refused to start."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("control:\n  interval_s: 5\n")
    r = subprocess.run([EXE, "validate", str(cfg)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"ok: {cfg} (config)", r.stderr
    monkeypatch.chdir(tmp_path)
    s = load_settings(cfg)
    assert Path(s.substrate.scenario) == SCENARIOS / "anticorrelated-diurnal.yaml"
    d = Daemon(s)
    d.tick()
    assert d.loop.round == 1


def _external_pipe(tmp_path: Path) -> tuple[Path, int, Path]:
    """A pipeline's working directory for a daemon in external mode: (scenario, key groups of
    its keyed stage, workdir with an empty metrics directory)."""
    from core.scenario import load_scenario
    from spark_adapter.query import compile_query

    sc = SCENARIOS / "zipf-hotkey-shift.yaml"
    work = tmp_path / "pipe"
    (work / "metrics").mkdir(parents=True)
    return sc, compile_query(load_scenario(sc)).key_groups, work


def _batch(b: int, kg_rows: np.ndarray, key_rows: dict[int, int]) -> BatchStats:
    """Batch ``b``'s statistics file as a 2-partition pipeline writes it: 400 rows of stream
    ``events``, ``key_rows`` counted per key (side 0)."""
    import pandas as pd

    from spark_adapter.batchstats import BatchStats

    return BatchStats(
        b,
        0,
        False,
        1.0,
        np.array([300, 100]),
        np.array([0.6, 0.2]),
        kg_rows,
        pd.DataFrame({"key": list(key_rows), "side": 0, "rows": list(key_rows.values())}),
        {"events": 400},
        10,
        0,
        0,
        5,
        (b * 400, b * 400 + 399),
        float(b),
    )


def test_daemon_steers_a_spark_pipeline_through_its_files(tmp_path: Path) -> None:
    """External mode: batch metrics files in, plans out to the pipeline's plan store."""
    from spark_adapter.batchstats import write_batch_stats

    sc, groups, work = _external_pipe(tmp_path)
    s = settings(
        tmp_path,
        substrate={
            "kind": "spark-external",
            "scenario": str(sc),
            "workdir": str(work),
            "partitions": 2,
        },
        placement={"method": "least-loaded"},
        shedding={"method": "none"},
    )
    d = Daemon(s)
    assert (work / "plans" / "current").exists()  # the initial plan is published for the pipeline
    rng = np.random.default_rng(0)
    for b in range(6):
        st = _batch(b, rng.integers(100, 200, groups), {1: 250, 2: 30, 3: 20})
        st.info["partials_merged"] = 3  # partials of split keys the driver merged
        write_batch_stats(st, work / "metrics")
        d.tick()
    rows = DecisionLog(tmp_path / "decisions.sqlite").last(10)
    assert rows[0]["observation"]["node_load"]["p0"] > rows[0]["observation"]["node_load"]["p1"]
    assert any(r["kind"].endswith("reroute") for r in rows)  # the hot key is split by the routing
    from spark_adapter.actuator import PlanStore

    plan = PlanStore(work / "plans").load_current()
    assert plan.version == d.loop.plan.version and 1 in plan.routing.hot
    reg = d.telemetry.registry  # the pipeline's own health, from its batch files
    assert reg.get_sample_value("trimtab_pipeline_batch_duration_seconds_count") == 6
    assert reg.get_sample_value("trimtab_pipeline_last_batch_id") == 5
    assert reg.get_sample_value("trimtab_pipeline_rows_total") == 6 * 400
    assert reg.get_sample_value("trimtab_pipeline_partials_merged_total") == 6 * 3


def test_a_daemon_steers_only_the_pipeline_it_was_configured_for(tmp_path: Path) -> None:
    """A daemon whose scenario or partitions are not the driver's. With that pipeline's
    batches in the workdir, it stops at start before anything is written. A pipeline found
    to differ in a round (started later, or restarted) gets no decision and no plan until it
    is fixed; the status names the problem. A plan the driver refused is named in the next
    round's reason and counted."""
    from spark_adapter.batchstats import write_batch_stats
    from spark_adapter.external import PipelineMismatch

    sc, groups, work = _external_pipe(tmp_path)
    ext = {"kind": "spark-external", "scenario": str(sc), "workdir": str(work)}
    conf = {"placement": {"method": "least-loaded"}, "shedding": {"method": "none"}}
    other = _batch(0, np.full(groups + 1, 10), {1: 5})  # another query's key groups
    write_batch_stats(other, work / "metrics")
    with pytest.raises(
        PipelineMismatch, match=rf"has {groups} key groups, but the pipeline in .* has {groups + 1}"
    ):
        Daemon(settings(tmp_path, substrate=ext, **conf))
    assert not (tmp_path / "decisions.sqlite").exists() and not (work / "plans").exists()
    (work / "metrics" / "batch-00000000.json").unlink()
    d = Daemon(settings(tmp_path, substrate={**ext, "partitions": 3}, **conf))
    d.tick()
    version, rounds = d.loop.plan.version, d.loop.round
    write_batch_stats(_batch(1, np.full(groups, 10), {1: 5}), work / "metrics")  # 2 partitions
    d.tick()
    d.tick()
    assert (d.loop.plan.version, d.loop.round) == (version, rounds)  # nothing decided
    assert d.status()["health"]["pipeline_mismatch"].startswith(
        f"substrate.partitions: 3, but the pipeline in {work}"
    )
    d = Daemon(settings(tmp_path / "fixed", substrate=ext, **conf))
    refused = _batch(2, np.full(groups, 10), {1: 5})
    refused.info["plan_refused"] = {"version": 9, "problem": "placement: unit 'x#0' missing"}
    write_batch_stats(refused, work / "metrics")
    d.tick()
    assert d.status()["health"]["pipeline_mismatch"] is None
    reason = d.loop.records[-1].reason
    assert (
        "the pipeline refused plan v9 and ran the plan before it: placement: unit 'x#0'" in reason
    )
    assert d.telemetry.registry.get_sample_value("trimtab_pipeline_plans_refused_total") == 1


def test_a_daemon_whose_pipeline_ends_says_so_once_and_publishes_no_more(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The pipeline's last batch closed every window (its log closed): the round that reads it
    decides as ever; the rounds after it decide nothing and publish no plan that no batch would
    run, and the daemon says once that the pipeline has ended (status, log)."""
    import logging

    from spark_adapter.actuator import PlanLog, PlanStore
    from spark_adapter.batchstats import write_batch_stats

    sc, groups, work = _external_pipe(tmp_path)
    ext = {"kind": "spark-external", "scenario": str(sc), "workdir": str(work)}
    d = Daemon(settings(tmp_path, substrate=ext, placement={"method": "least-loaded"}))
    log = PlanLog(work / "planlog.sqlite")
    rng = np.random.default_rng(1)
    for b in range(3):  # the last batch closes every window: its watermark is infinite
        log.copy_pin(b, 0, float(b), float("inf") if b == 2 else float(b + 1), float(b + 1))
        write_batch_stats(_batch(b, rng.integers(100, 200, groups), {1: 250}), work / "metrics")
        log.commit(b, 10)
        d.tick()
    rounds, plans = d.loop.round, PlanStore(work / "plans").current_version()
    assert d.status()["health"]["pipeline_ended"] is None  # the last batch was read, as ever
    ended = "trimtab_pipeline_ended"  # the stall alert's exception
    assert d.telemetry.registry.get_sample_value(ended) == 0
    with caplog.at_level(logging.INFO, logger="trimtab.daemon"):
        for _ in range(3):
            d.tick()
    assert d.loop.round == rounds and PlanStore(work / "plans").current_version() == plans
    health = d.status()["health"]
    assert health["pipeline_mismatch"] is None
    assert health["pipeline_ended"].startswith(
        f"substrate.workdir: the pipeline in {work} has ended: batch 2 closed every window"
    )
    assert d.telemetry.registry.get_sample_value(ended) == 1
    said = [r for r in caplog.records if r.getMessage() == "pipeline_ended"]
    assert len(said) == 1 and said[0].levelno == logging.INFO, caplog.records


def test_a_dry_run_never_publishes_to_the_pipeline_it_watches(tmp_path: Path) -> None:
    """`trimtab run --dry-run` on a spark-external workdir: the plan store is left as it was
    (no initial plan, no resumed plan, no round's plan, not even a directory), and its rounds
    judge the pipeline's own current plan."""
    from spark_adapter.actuator import PlanStore
    from spark_adapter.batchstats import write_batch_stats

    sc, groups, work = _external_pipe(tmp_path)
    ext = {"kind": "spark-external", "scenario": str(sc), "workdir": str(work)}
    conf = {"placement": {"method": "least-loaded"}, "shedding": {"method": "none"}}
    dry = {"interval_s": 0.05, "window_samples": 5, "dry_run": True}
    d = Daemon(settings(tmp_path / "a", substrate=ext, control=dry, **conf))
    assert not (work / "plans").exists()  # the pipeline had no plan; none is made for it
    assert d.loop.plan.version == 0
    # a real controller publishes (versions 0..2); a dry run started now adopts v2
    real = Daemon(settings(tmp_path / "real", substrate=ext, **conf))
    store = PlanStore(work / "plans")
    for i in range(2):
        store.publish_next(real.loop.plan.next(reason=f"round {i} of the real controller"))
    before = sorted(p.name for p in (work / "plans").iterdir())
    d = Daemon(settings(tmp_path / "b", substrate=ext, control=dry, **conf))
    assert d.loop.plan.version == 2
    rng = np.random.default_rng(0)
    for b in range(6):
        write_batch_stats(_batch(b, rng.integers(100, 200, groups), {1: 250}), work / "metrics")
        d.tick()
    assert sorted(p.name for p in (work / "plans").iterdir()) == before
    assert store.current_version() == 2
    recs = d.loop.records
    assert all(r.plan_version == 2 and not r.applied for r in recs)
    assert any(r.details.get("recommended_plan_version") == 3 for r in recs)  # it did decide
    # restarted on its own decision log, it resumes and still publishes nothing
    Daemon(settings(tmp_path / "b", substrate=ext, control=dry, **conf))
    assert sorted(p.name for p in (work / "plans").iterdir()) == before


def test_a_controller_with_a_new_decision_log_is_told_another_one_steers_the_pipeline(
    tmp_path: Path,
) -> None:
    """The pipeline runs plans of controller epoch 3, made under a decision log that is gone.
    A daemon on a fresh decision log (its epoch would be 1, which the plan store refuses) is
    stopped by `validate` and `run` with exit 3 and one line, before anything is written;
    `run --take-over` leads at epoch 4 and its plans are taken; a restart then needs no flag."""
    from typer.testing import CliRunner

    from controller.cli import app
    from spark_adapter.actuator import PlanStore

    sc, _, work = _external_pipe(tmp_path)
    ext = {"kind": "spark-external", "scenario": str(sc), "workdir": str(work)}
    conf = {"placement": {"method": "least-loaded"}, "shedding": {"method": "none"}}
    old = Daemon(settings(tmp_path / "lost", substrate=ext, **conf))
    store = PlanStore(work / "plans")
    store.publish_next(old.loop.plan.next(epoch=3, reason="a controller of epoch 3"))
    published = sorted(p.name for p in (work / "plans").iterdir())
    cfg = tmp_path / "new.yaml"
    new = {"substrate": ext, **conf, "metrics": {"port": 0}, "control": {"interval_s": 0.05}}
    new |= {"decision_log": str(tmp_path / "new.sqlite"), "state_dir": str(tmp_path / "st")}
    cfg.write_text(yaml.safe_dump(new))
    runner = CliRunner()
    for argv in (["validate", str(cfg)], ["run", "--config", str(cfg), "--rounds", "1"]):
        r = runner.invoke(app, argv)
        assert r.exit_code == 3, r.output
        line = r.output.strip()
        assert len(line.splitlines()) == 1 and "runs plan v1 of controller epoch 3" in line, line
        assert "leads at epoch 1" in line and "--take-over" in line, line
    assert not (tmp_path / "new.sqlite").exists() and not (tmp_path / "st").exists()
    assert sorted(p.name for p in (work / "plans").iterdir()) == published
    r = runner.invoke(app, ["run", "--config", str(cfg), "--rounds", "1", "--take-over"])
    assert r.exit_code == 0, r.output
    assert store.load_current().epoch == 4 and store.current_version() >= 2
    r = runner.invoke(app, ["validate", str(cfg)])
    assert r.exit_code == 0, r.output  # the next start leads at 5


def _metric_names(expr: str) -> set[str]:
    import re

    words = set(re.findall(r"\btrimtab_[a-z0-9_]+", expr))
    # histogram/counter sample suffixes belong to their family
    return {re.sub(r"_(bucket|count|sum|total)$", "", w) for w in words}


def test_shipped_rules_and_dashboard_use_exported_metrics(tmp_path: Path) -> None:
    """Every metric the alert rules and the dashboard name exists in a pipeline-steering
    daemon's registry."""
    import yaml

    from controller.telemetry import Telemetry

    reg = Telemetry(pipeline=True).registry
    families = {m.name for m in reg.collect()}
    rules = yaml.safe_load((ROOT / "examples" / "prometheus-rules.yaml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert any("last_batch_end" in e for e in exprs) and any("shed_ratio" in e for e in exprs)
    dash = json.loads((ROOT / "examples" / "grafana-dashboard.json").read_text())
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used and used <= families, used - families


def test_shipped_rules_pass_promtool() -> None:
    import shutil

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: the rule syntax was checked as YAML only")
    r = subprocess.run(
        [promtool, "check", "rules", str(ROOT / "examples" / "prometheus-rules.yaml")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def _run_dir(tmp: Path, moved: bool, shed: bool) -> Path:
    import pandas as pd

    out = tmp / ("run-moved" if moved else "run-still")
    out.mkdir()
    idx = pd.Index(np.arange(10.0), name="time_s")
    pd.DataFrame(np.random.default_rng(0).random((10, 2)), index=idx, columns=["A", "B"]).to_csv(
        out / "node_load.csv"
    )
    place = pd.DataFrame(
        {"A": [3, 2 if moved else 3], "B": [1, 2 if moved else 1]}, index=[0.0, 4.0]
    )
    place.index.name = "time_s"
    place.to_csv(out / "placement.csv")
    keep = pd.DataFrame({"s0": [1.0, 0.6 if shed else 1.0]}, index=[0.0, 5.0])
    keep.index.name = "time_s"
    keep.to_csv(out / "shed.csv")
    summary = {"scenario": "tiny", "throughput": 1234.5, "mean_latency": 0.25, "migrations": 2}
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "decisions.json").write_text(
        json.dumps(
            [
                {
                    "round": 1,
                    "time_s": 1.0,
                    "kind": "hold",
                    "reason": "warming up",
                    "plan_version": 0,
                },
                {
                    "round": 2,
                    "time_s": 4.0,
                    "kind": "place",
                    "reason": "pair A/B",
                    "plan_version": 1,
                },
            ]
        )
    )
    return out


def test_report_says_what_did_not_happen_and_reads_as_a_page(tmp_path: Path) -> None:
    from controller.report import _figures, render_run_dir

    still = _run_dir(tmp_path, moved=False, shed=False)
    notes = {
        name: [t.get_text() for ax in fig.axes for t in ax.texts]
        for name, fig, _ in _figures(still, pd_read(still / "node_load.csv"), [])
    }
    assert any("Nothing moved" in t for t in notes["placement.png"])
    assert any("No shedding" in t for t in notes["shed.png"])
    assert any("No faults" in t for t in notes["recovery.png"])
    moved = _run_dir(tmp_path, moved=True, shed=True)
    figs = {name: fig for name, fig, _ in _figures(moved, pd_read(moved / "node_load.csv"), [])}
    assert not figs["placement.png"].axes[0].texts and not figs["shed.png"].axes[0].texts
    # the step series reach the run's end (time 9), not their last change (4 and 5)
    assert figs["shed.png"].axes[0].get_xlim()[1] >= 9.0
    (moved / "comparison.json").write_text(
        json.dumps(
            [{"run": "hash", "throughput": 1000.0}, {"run": "trimtab", "throughput": 1234.5}]
        )
    )
    render_run_dir(moved)
    page = (moved / "report.html").read_text()
    assert "tuples completed per second (tuples/s)" in page and "1,234" in page
    assert "Side by side" in page and "<th>hash</th>" in page and "<th>trimtab</th>" in page
    assert "pair A/B" in page and "warming up" not in page  # the timeline: plan changes only
    assert "first half of the run" in page and "before" not in page.lower().split("<img")[0]
    assert page.count("<img") == 7


def test_a_report_of_a_run_that_measured_no_load_says_so(tmp_path: Path) -> None:
    """A Spark run whose batches read no row (a stream of rate 0) saves an empty load table:
    the report draws a note for it instead of failing on the heat map."""
    from controller.report import render_run_dir

    run = _run_dir(tmp_path, moved=False, shed=False)
    (run / "node_load.csv").write_text("batch,p0,p1\n")
    render_run_dir(run)
    page = (run / "report.html").read_text()
    assert "heatmap.png" not in page and (run / "node_load.png").exists()
    assert page.count("<img") == 4  # the load note, placement, shedding, recovery


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("summary.json", "{bad", "summary.json: not JSON"),  # said no file name
        ("decisions.json", '"x"', "decisions.json: not a trimtab run's decisions"),
        ("node_load.csv", "a,b\n", "node_load.csv: not a trimtab run's series"),  # rendered
        ("node_load.csv", "time_s,A,B\n0.0,1.0,2.0\n1.0,3", "node_load.csv: row 3 is not all"),
        ("shed.csv", "time_s,s0\n0.0,x\n", "shed.csv: row 2 is not all numbers"),
    ],
)
def test_a_report_of_a_damaged_run_names_the_file_and_writes_nothing(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    """Every file is read and checked before anything is rendered: a run directory with a
    file cut short or not trimtab's was rendered from it, or failed half-way with an error
    that named no file."""
    from controller.report import render_run_dir

    run = _run_dir(tmp_path, moved=True, shed=True)
    (run / name).write_text(text)
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        render_run_dir(run)
    assert not list(run.glob("*.png")) and not (run / "report.html").exists()


def pd_read(p: Path):  # type: ignore[no-untyped-def]
    import pandas as pd

    return pd.read_csv(p, index_col=0)


def test_report_loads_in_a_headless_browser(tmp_path: Path) -> None:
    """Skipped, not failed, when no Chromium-family browser is installed."""
    import shutil

    from controller.report import render_run_dir

    browser = next(
        (b for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)),
        None,
    )
    if browser is None:
        pytest.skip("no headless browser installed")
    run = _run_dir(tmp_path, moved=True, shed=True)
    render_run_dir(run)
    r = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            (run / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.count("<img") == 7 and "data:image/png;base64" in r.stdout
    assert "Uncaught" not in r.stderr and "ERROR:CONSOLE" not in r.stderr


def test_config_paths_resolve_against_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative paths in a config resolve against its directory (from any working directory);
    the same paths from the environment or the command line resolve against the current one."""
    import shutil

    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    shutil.copy(SCENARIOS / "seed-shedding-2node.yaml", conf_dir / "s.yaml")
    cfg = conf_dir / "c.yaml"
    cfg.write_text(
        "substrate: {kind: sim, scenario: s.yaml}\ndecision_log: state/d.sqlite\nstate_dir: state\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = load_settings(cfg)
    assert Path(s.substrate.scenario).resolve() == (conf_dir / "s.yaml").resolve()
    assert Path(s.state_dir).resolve() == (conf_dir / "state").resolve()
    assert load_settings(cfg, decision_log="mine.sqlite").decision_log == "mine.sqlite"
    monkeypatch.setenv("TRIMTAB_STATE_DIR", "from-env")
    assert load_settings(cfg).state_dir == "from-env"
    r = subprocess.run([EXE, "validate", str(cfg)], capture_output=True, text=True, cwd=elsewhere)
    assert r.returncode == 0, r.stderr


def test_a_long_running_daemon_keeps_a_bounded_history(tmp_path: Path) -> None:
    """Every round's record used to stay in memory (about 9 KB a round); the daemon keeps the
    newest KEEP_RECORDS, its decision log the rest up to its retention."""
    from controller.daemon import KEEP_RECORDS

    d = Daemon(
        settings(
            tmp_path,
            decision_retention_rounds=50,
            substrate={"scenario": str(SCENARIOS / "overload-ramp.yaml"), "ticks_per_round": 5},
            shedding={"method": "lp"},  # the ramp changes the shed plan: many plan versions
            placement={"method": "least-loaded"},
        )
    )
    for _ in range(KEEP_RECORDS + 30):
        d.tick()
    assert d.loop.round == KEEP_RECORDS + 30
    assert len(d.loop.records) == KEEP_RECORDS
    assert d.loop.records[-1].round == KEEP_RECORDS + 30
    assert d.status()["last_round"]["round"] == KEEP_RECORDS + 30
    log = DecisionLog(tmp_path / "decisions.sqlite")
    rows = log.last(1000)
    assert len(rows) == 50
    import sqlite3

    with sqlite3.connect(tmp_path / "decisions.sqlite") as db:
        kept = [v for (v,) in db.execute("SELECT version FROM plans")]
    oldest = min(r["plan_version"] for r in rows)
    assert d.loop.plan.version > len(kept) >= 1  # plans were published, and trimmed
    assert min(kept) >= oldest
    assert log.last_plan() is not None and log.last_plan().version == d.loop.plan.version


@pytest.mark.parametrize("on_batch", [True, False])
def test_on_batch_rounds_follow_the_pipelines_batches(tmp_path: Path, on_batch: bool) -> None:
    """``control.on_batch``: a round runs within a poll of a new batch file, though the
    timer's interval (60 s) has not come round; without it the batches wait for the timer."""
    import threading

    from spark_adapter.batchstats import write_batch_stats

    sc, groups, work = _external_pipe(tmp_path)
    s = settings(
        tmp_path,
        control={"interval_s": 60, "on_batch": on_batch},
        substrate={"kind": "spark-external", "scenario": str(sc), "workdir": str(work)},
        placement={"method": "least-loaded"},
        shedding={"method": "none"},
    )
    d = Daemon(s)
    seen: list[int] = []

    def write() -> None:  # the pipeline's side: a batch file every half second
        try:
            for b in range(3):
                time.sleep(0.5)
                write_batch_stats(_batch(b, np.full(groups, 100), {1: 400}), work / "metrics")
                deadline = time.monotonic() + 3.0
                while d.loop.round < b + 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                seen.append(d.loop.round)
        finally:
            d.stop_event.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert d.run() == 0  # signal handlers: the daemon runs in the main thread
    writer.join(30)
    if on_batch:  # the timer's first round at start, then one per batch
        assert seen == [2, 3, 4], seen
        assert d.substrate.unseen_mtime() == 0  # every batch file was read by a round
    else:
        assert seen == [1, 1, 1], seen


def test_on_batch_needs_a_pipeline(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="control.on_batch"):
        settings(tmp_path, control={"on_batch": True})


def test_read_only_commands_leave_a_stopped_daemons_files_as_they_were(tmp_path: Path) -> None:
    """``status``, ``decisions`` and ``validate`` read the decision log and its lease: opened
    read-only the usual way, SQLite created each one's -wal and -shm files beside it."""
    from typer.testing import CliRunner

    from controller.cli import app

    f = tmp_path / "c.yaml"
    doc = {
        "control": {"interval_s": 0.05},
        "substrate": {"kind": "sim", "scenario": str(SCENARIOS / "anticorrelated-diurnal.yaml")},
        "metrics": {"port": 0},
        "decision_log": str(tmp_path / "st" / "d.sqlite"),
        "state_dir": str(tmp_path / "st"),
    }
    f.write_text(yaml.safe_dump(doc))
    r = subprocess.run([EXE, "run", "--config", str(f), "--rounds", "2"], capture_output=True)
    assert r.returncode == 0, r.stderr
    before = sorted(p.name for p in (tmp_path / "st").iterdir())
    assert {"d.sqlite", "d.sqlite.lease"} <= set(before), before  # what the reads open
    assert not [n for n in before if n.endswith(("-wal", "-shm"))], before  # closed: at rest
    runner = CliRunner()
    for argv in (
        ["status", "--state-dir", str(tmp_path / "st")],
        ["decisions", "--decision-log", doc["decision_log"], "--json"],
        ["validate", str(f)],
    ):
        r2 = runner.invoke(app, argv)
        assert r2.exit_code == 0, (argv, r2.output)
        assert sorted(p.name for p in (tmp_path / "st").iterdir()) == before, argv
        if argv[0] == "decisions":  # read through: both rounds, not an empty view
            assert len(json.loads(r2.stdout)) == 2, r2.stdout


def test_a_port_a_stopped_daemon_was_scraped_on_is_free_to_restart_on(tmp_path: Path) -> None:
    """A daemon stopped after a Prometheus scrape leaves the scrape's connection in TIME_WAIT
    on its port for a minute. The metrics server binds over it (SO_REUSEADDR), but the check
    before it did not: a restart within that minute exited 3, "address already in use"."""
    import socket

    from controller.config import port_problem

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        listener.listen()
        settings = load_settings(None, metrics={"host": "127.0.0.1", "port": port})
        assert "address already in use" in (port_problem(settings) or "")  # a listener
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server closes first, as the metrics server does: TIME_WAIT
        client.recv(1)
        client.close()
    # the case this test is about: a socket on the port in TIME_WAIT (state 06)
    rows = [ln.split() for ln in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    assert any(r[1].endswith(f":{port:04X}") and r[3] == "06" for r in rows)
    assert port_problem(settings) is None


def test_sighup_stops_the_daemon_cleanly_and_lets_the_lease_go(tmp_path: Path) -> None:
    """A daemon run in a terminal gets SIGHUP when the terminal closes. It died by the signal:
    no "stopped" line, the status left "running" and the lease held until it ran out, so a
    standby waited for it. It stops as on SIGTERM."""
    from controller.decisionlog import lease_file
    from core.lease import read_lease

    f = tmp_path / "c.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "control": {"interval_s": 0.2},
                "substrate": {"kind": "sim", "scenario": str(SCENARIOS / "zipf-moderate.yaml")},
                "metrics": {"enabled": False},
                "decision_log": str(tmp_path / "d.sqlite"),
                "state_dir": str(tmp_path / "st"),
            }
        )
    )
    p = subprocess.Popen(
        [EXE, "run", "--config", str(f)], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        st = tmp_path / "st" / "status.json"
        deadline = time.monotonic() + 60
        while not (st.exists() and json.loads(st.read_text()).get("last_round")):
            assert time.monotonic() < deadline and p.poll() is None, "no round ran"
            time.sleep(0.2)
        p.send_signal(signal.SIGHUP)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
    assert p.returncode == 0, err
    assert '"event": "stopped"' in err, err[-2000:]
    assert json.loads(st.read_text())["stopped"] is True
    lease = read_lease(lease_file(tmp_path / "d.sqlite"))
    assert lease is not None and lease.expires < time.time(), lease


def test_decisions_shows_the_kinds_asked_for(tmp_path: Path) -> None:
    """A long-running daemon's log is mostly holds: `decisions --kind` and `--changes` show
    the rounds that did something (a joined kind, place+shed, is each of its parts), the
    newest --last of them; an unknown kind is named before the log is read."""
    from typer.testing import CliRunner

    from controller.cli import app
    from controller.cli.daemon import KINDS
    from controller.decisionlog import DecisionLog
    from controller.gates import DecisionKind

    assert set(KINDS) == {k.value for k in DecisionKind}  # the command line lists them all
    path = tmp_path / "d.sqlite"
    log = DecisionLog(path)
    kinds = ["hold", "place", "hold", "place+shed", "reroute", "hold", "hold"]
    for i, k in enumerate(kinds, start=1):
        log.record(1e9 + i, i, k, f"why {i}", 1, k != "hold", 0.01, {}, {})
    log.close()

    def rounds(*args: str) -> list[int]:
        r = CliRunner().invoke(app, ["decisions", "--decision-log", str(path), "--json", *args])
        assert r.exit_code == 0, r.output
        return [d["round"] for d in json.loads(r.stdout)]

    assert rounds() == [1, 2, 3, 4, 5, 6, 7]
    assert rounds("--kind", "shed") == [4]
    assert rounds("--kind", "place") == [2, 4]
    assert rounds("--kind", "reroute, shed") == [4, 5]
    assert rounds("--changes") == [2, 4, 5]
    assert rounds("--changes", "--last", "2") == [4, 5]  # the newest of those asked for
    assert rounds("--changes", "--kind", "place") == [2, 4]
    assert rounds("--kind", "hold", "--last", "3") == [3, 6, 7]
    assert rounds("--kind", "scale") == []
    table = CliRunner().invoke(app, ["decisions", "--decision-log", str(path), "--kind", "scale"])
    assert "decisions (scale), none (UTC)" in table.stdout, table.stdout
    for bad, said in [
        ("plac", "error: --kind: 'plac' is not a decision kind (hold, place, recover,"),
        (",", "error: --kind: no kind named"),
    ]:
        missing = str(tmp_path / "none.sqlite")  # the flag is checked before the log is read
        r = CliRunner().invoke(app, ["decisions", "--decision-log", missing, "--kind", bad])
        assert r.exit_code == 2 and r.stderr.startswith(said), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = CliRunner().invoke(
        app, ["decisions", "--decision-log", str(path), "--changes", "--kind", "hold"]
    )
    assert r.exit_code == 2 and "'hold' with --changes" in r.stderr, r.stderr


def test_decisions_reads_a_replays_report(tmp_path: Path) -> None:
    """`decisions --report DIR` shows a replay's rounds (replay --report's decisions.json) with
    the filters a daemon's log has, the time in the scenario's seconds: on diurnal-phase-flip
    the global step after the warm-up and the stale-placement trigger after the flip, both
    the method's own reasons. A directory that is not a replay's report, or --report with
    --decision-log on the command line, is one line, exit 2."""
    from typer.testing import CliRunner

    from controller.cli import app

    rep = tmp_path / "rep"
    r = CliRunner().invoke(
        app, ["replay", str(SCENARIOS / "diurnal-phase-flip.yaml"), "--report", str(rep)]
    )
    assert r.exit_code == 0, r.output
    saved = json.loads((rep / "decisions.json").read_text())

    def rounds(*args: str) -> list[dict[str, Any]]:
        r = CliRunner().invoke(app, ["decisions", "--report", str(rep), "--json", *args])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    assert len(saved) > 20 and rounds("--last", "20") == saved[-20:]
    placed = rounds("--kind", "place")
    assert placed == [d for d in saved if d["kind"] == "place"] and len(placed) >= 2, placed
    assert placed[0]["reason"].startswith("global correlation placement after warm-up")
    after = [d for d in placed if d["time_s"] > 600]
    assert after and after[0]["reason"].startswith("stale placement"), placed
    assert rounds("--changes") == [d for d in saved if d["kind"] != "hold"]
    assert rounds("--kind", "scale") == []
    table = CliRunner().invoke(app, ["decisions", "--report", str(rep), "--kind", "place"])
    assert table.exit_code == 0 and "t (s)" in table.stdout, table.stdout
    assert "decisions (place) of the replay in" in table.stdout, table.stdout  # then the path
    assert "stale placement" in table.stdout
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "decisions.json").write_text(json.dumps([{"round": 1}]))
    for argv, said in [
        (["--report", str(tmp_path / "none")], "no such directory"),
        (["--report", str(tmp_path)], "holds no decisions.json"),
        (["--report", str(tmp_path / "cut")], "not a replay's decisions"),
        (["--report", str(rep), "--decision-log", "d.sqlite"], "not both (--decision-log)"),
    ]:
        r = CliRunner().invoke(app, ["decisions", *argv])
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --report:"), r.stderr
        assert said in lines[0], lines[0]


def _twoway_scenario(tmp_path: Path) -> Path:
    """anticorrelated-diurnal set up for two-way, with a ``pair_threshold`` of its own."""
    doc = yaml.safe_load((SCENARIOS / "anticorrelated-diurnal.yaml").read_text())
    doc["controller"]["placement"] = {
        "method": "correlation-twoway",
        "params": {"pair_threshold": 0.3},
    }
    sc = tmp_path / "sc.yaml"
    sc.write_text(yaml.safe_dump(doc))
    return sc


def test_a_config_method_that_reads_none_of_the_scenario_s_params_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A config naming another placement method keeps the scenario's params (a key left out
    keeps the scenario's value); llf reads none of correlation's, so the daemon starts with a
    warning naming them; rod with a ``seed`` of its own (params merge) names the same one. A
    method that reads them starts without one."""
    import logging

    sc = _twoway_scenario(tmp_path)
    sub = {"scenario": str(sc)}

    def left_out(placement: dict) -> list[dict]:
        caplog.clear()
        run = tmp_path / placement["method"]  # its own decision log: each one the primary
        with caplog.at_level(logging.INFO, logger="trimtab.daemon"):
            Daemon(settings(run, substrate=sub, placement=placement))
        said = [r for r in caplog.records if r.getMessage() == "placement_params_left_out"]
        assert all(r.levelno == logging.WARNING for r in said)
        return [r.fields for r in said]  # type: ignore[attr-defined]

    assert left_out({"method": "llf"}) == [
        {
            "method": "llf",
            "params_left_out": {"pair_threshold": 0.3},
            "set_for": "correlation-twoway",
        }
    ]
    assert left_out({"method": "correlation-oneway"}) == []
    assert left_out({"method": "rod", "params": {"seed": 2}}) == [
        {
            "method": "rod",
            "params_left_out": {"pair_threshold": 0.3},
            "set_for": "correlation-twoway",
        }
    ]


def test_validate_notes_the_scenario_s_params_a_config_s_method_leaves_out(tmp_path: Path) -> None:
    """validate said only "ok" of a config naming llf for a scenario set up for two-way with
    ``pair_threshold``, which the daemon then leaves out (its start-up warning). Now it adds
    one note on stderr, still exits 0 and writes nothing; a method reading them gets none."""
    sc = _twoway_scenario(tmp_path)

    def validate(method: str) -> tuple[int, str, str]:
        f = tmp_path / f"{method}.yaml"
        conf = {"substrate": {"scenario": str(sc)}, "placement": {"method": method}}
        f.write_text(yaml.safe_dump({**conf, "metrics": {"port": 0}}))
        r = subprocess.run(
            [EXE, "validate", str(f)], capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    f = tmp_path / "llf.yaml"
    assert validate("llf") == (
        0,
        f"ok: {f} (config)",
        f"note: {f}: placement.method llf does not read the scenario's "
        "controller.placement.params pair_threshold 0.3 (set for correlation-twoway): "
        "the daemon leaves it out",
    )
    code, out, err = validate("correlation-oneway")
    assert (code, err) == (0, "") and out.endswith("(config)")
    assert not (tmp_path / ".trimtab").exists()  # read-only
