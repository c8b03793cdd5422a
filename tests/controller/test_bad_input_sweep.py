"""The bad-input sweep: every input a user gives is checked before anything runs, and a bad
one gets exit 2 (or 3 for the environment), one line naming where and what, no traceback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from controller.cli import app
from tests.conftest import ROOT, SCENARIOS

BASE = SCENARIOS / "seed-shedding-2node.yaml"
GW = SCENARIOS / "seed-groupby-window.yaml"  # a scenario the Spark pipeline runs


def _scenario(tmp: Path, name: str, edit, base: Path = BASE) -> str:  # type: ignore[no-untyped-def]
    d = yaml.safe_load(base.read_text())
    edit(d)
    f = tmp / f"{name}.yaml"
    f.write_text(yaml.safe_dump(d))
    return str(f)


def _config(tmp: Path, name: str, edit) -> str:  # type: ignore[no-untyped-def]
    d = yaml.safe_load((ROOT / "examples" / "controller.yaml").read_text())
    d["substrate"]["scenario"] = str(BASE)
    d["decision_log"] = str(tmp / "d.sqlite")
    d["state_dir"] = str(tmp / "state")
    edit(d)
    f = tmp / f"{name}.yaml"
    f.write_text(yaml.safe_dump(d))
    return str(f)


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def cases(tmp: Path, port: int) -> list[tuple[str, list[str], int, str]]:
    """(name, argv, exit code, text the one line must contain)."""
    (tmp / "empty.csv").write_text("t_s,rate\n")
    (tmp / "header.csv").write_text("a,b\n0,1\n10,2\n")
    (tmp / "broken.yaml").write_text("name: x\nstreams: [a, b\n  - c: 1\n")
    (tmp / "plan.json").write_text("{not json")
    for d, text in (("cl-cut", '{"master_url": "spark://'), ("cl-other", '{"master_pid": "7"}')):
        (tmp / d).mkdir()
        (tmp / d / "cluster.json").write_text(text)
    (tmp / "binary.yaml").write_bytes(b"name: \xf0\x28\x8c\x28\n")  # not UTF-8: exited 1
    (tmp / "keys-only.csv").write_text("key\n1\n2\n")
    (tmp / "neg.csv").write_text("ts,key\n0,1\n1,-2\n")
    (tmp / "nokey.csv").write_text("ts,k\n0,1\n")
    (tmp / "empty-trace.csv").write_text("ts,key\n")
    (tmp / "notdb.sqlite").write_text("hello, not a database")
    for d, name, text in (
        ("p-app", "app.json", "{bad"),
        ("p-cur", "plans/current", "garbage"),
        ("p-plan", "plans/current", "0"),
        ("p-plan", "plans/v000000.json", '{"x": 1}'),
        ("p-lease", "d.sqlite.lease", "garbage"),
        ("p-log", "planlog.sqlite", "garbage"),
    ):
        (tmp / d / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / d / name).write_text(text)
    (tmp / "far.csv").write_text("ts,key\n0,a\n1e308,b\n")  # a stray row's time
    (tmp / "far7.csv").write_text("ts,key\n0,a\n1e7,b\n")  # ten million empty windows
    (tmp / "afile").write_text("x")
    (tmp / "st").mkdir()
    (tmp / "res").mkdir()
    (tmp / "res" / "planlog.sqlite").write_bytes(b"")  # a workdir, as far as results checks
    (tmp / "st" / "status.json").write_text("[1, 2]")
    (tmp / "events.csv").write_text("ts,key\n0,1\nx,2\ny,3\n")
    (tmp / "span.csv").write_text("ts,key\n0,1\n3000000000,2\n")  # a row 95 years on
    good = str(BASE)
    # a key given twice: YAML kept the later without a word (a second controller: block)
    (tmp / "dup-scenario.yaml").write_text(BASE.read_text() + "name: again\n")
    (tmp / "dup-config.yaml").write_text("metrics: {port: 1}\nmetrics:\n  port: 99999\n")
    (tmp / "dup-overlay.yaml").write_text("calibration: {scenario: a}\ncalibration: {}\n")
    from controller.scenario import load_scenario
    from controller.wiring import make_context
    from core.plans import Placement, Plan

    ctx = make_context(load_scenario(BASE))
    units, nodes = ctx.units.ids, ctx.cluster.ids
    zero = tuple(0 for _ in units)
    (tmp / "plan-node.json").write_text(
        Plan(placement=Placement(units=units, nodes=(nodes[0], "n9"), assignment=zero)).to_json()
    )
    (tmp / "plan-unit.json").write_text(
        Plan(
            placement=Placement(units=(*units[:-1], "ghost"), nodes=nodes, assignment=zero)
        ).to_json()
    )
    torn, foreign = _bad_logs(tmp)
    other_plan = _plan_workdirs(tmp)
    sc = lambda name, edit: _scenario(tmp, name, edit)  # noqa: E731
    gw = lambda name, edit: _scenario(tmp, name, edit, GW)  # noqa: E731
    ramp = lambda name, edit: _scenario(tmp, name, edit, SCENARIOS / "spark-overload-ramp.yaml")  # noqa: E731

    def params(i: int, **p):  # type: ignore[no-untyped-def]
        return lambda d: d["operators"][i]["params"].update(p)

    def drop(i: int, key: str):  # type: ignore[no-untyped-def]
        return lambda d: d["operators"][i]["params"].pop(key)

    cf = lambda name, edit: _config(tmp, name, edit)  # noqa: E731
    ext = _other_pipeline_config(tmp, cf)
    mismatch = "substrate.scenario: its keyed operator has 16 key groups, but the pipeline in "

    def rate(v):  # type: ignore[no-untyped-def]
        return lambda d: d["streams"][0].__setitem__("rate", v)

    out = [
        # scenario files
        (  # a parameter least-loaded does not read was ignored without a word
            "scenario param of another method",
            [
                "validate",
                sc(
                    "t40",
                    lambda d: d["controller"].update(
                        placement={"method": "least-loaded", "params": {"stale_trigger": 0}}
                    ),
                ),
            ],
            2,
            "controller.placement.params.stale_trigger: least-loaded reads no params",
        ),
        (  # a factor below 1 fired the stale-placement trigger on a placement that was better
            "scenario param out of its range",
            [
                "replay",
                sc(
                    "t42",
                    lambda d: d["controller"].update(
                        placement={"method": "correlation-twoway", "params": {"stale_factor": -1}}
                    ),
                ),
            ],
            2,
            "controller.placement.params.stale_factor: must lie in [1, inf) (got -1)",
        ),
        (  # pair_threshold beside the method, as the shorthand: named under params
            "scenario pair threshold out of range",
            [
                "validate",
                sc(
                    "t43",
                    lambda d: d["controller"].update(
                        placement={"method": "correlation-oneway", "pair_threshold": -5}
                    ),
                ),
            ],
            2,
            "controller.placement.params.pair_threshold: must lie in (0, 1] (got -5)",
        ),
        (
            "config param not a whole number",
            [
                "run",
                "--config",
                cf("c42", lambda d: d["placement"].update(params={"stale_rounds": 2.5})),
            ],
            2,
            "placement.params.stale_rounds: must be a whole number of at least 1 (got 2.5)",
        ),
        (  # "no daemon status in FILE (is 'trimtab run' running ...?)", exit 1
            "status of a file",
            ["status", "--state-dir", str(tmp / "empty.csv")],
            2,
            f"--state-dir: {tmp / 'empty.csv'} is a file, not a daemon's state directory",
        ),
        (  # at 0.01 s a lone daemon lost and retook its lease 55 times in 12 s, a new
            # epoch and plan version each time
            "a lease shorter than its renewals",
            ["run", "--config", cf("c45", lambda d: d["control"].update(lease_timeout_s=0.1))],
            2,
            "control.lease_timeout_s: at least 0.5 s: the primary renews its lease every quarter",
        ),
        (  # rounded to 2 ticks without a word
            "scenario interval between ticks",
            ["replay", sc("t44", lambda d: d["controller"].update(interval_s=2.5))],
            2,
            "controller.interval_s: 2.5 s is not a whole number of ticks (tick_s 1 s)",
        ),
        (  # two-way with 2 samples a window placed exactly as LLF, saying nothing
            "scenario window too short for correlations",
            [
                "validate",
                sc(
                    "t45",
                    lambda d: d["controller"].update(
                        window_k=2, placement={"method": "correlation-twoway"}
                    ),
                ),
            ],
            2,
            "controller.window_k: 2 samples a window, fewer than correlation-twoway needs "
            "(min_samples 3): it would place by load alone",
        ),
        (
            "config window too short for its min_samples",
            [
                "run",
                "--config",
                cf("c43", lambda d: d["placement"].update(params={"min_samples": 20})),
            ],
            2,
            "control.window_samples: 10 samples a window, fewer than correlation-oneway needs "
            "(min_samples 20)",
        ),
        (  # pins with a method that ignores them
            "scenario pins without fixed",
            [
                "validate",
                sc("t41", lambda d: d["controller"]["placement"].__setitem__("method", "llf")),
            ],
            2,
            "controller.placement.fixed: pins are placed by method 'fixed' alone (method is 'llf')",
        ),
        ("scenario missing", ["validate", str(tmp / "nope.yaml")], 2, "nope.yaml"),
        ("yaml syntax", ["validate", str(tmp / "broken.yaml")], 2, "line"),
        ("binary validate", ["validate", str(tmp / "binary.yaml")], 2, "not a UTF-8 text file"),
        (
            "scenario key twice",
            ["replay", str(tmp / "dup-scenario.yaml")],
            2,
            "dup-scenario.yaml: not valid YAML: line ",
        ),
        (
            "scenario key twice, validate",
            ["validate", str(tmp / "dup-scenario.yaml")],
            2,
            "the key 'name' is given twice in one mapping (first on line 2)",
        ),
        (  # validate said ok and run then refused it
            "config whose scenario is invalid",
            [
                "validate",
                cf(
                    "c-dup",
                    lambda d: d["substrate"].__setitem__(
                        "scenario", str(tmp / "dup-scenario.yaml")
                    ),
                ),
            ],
            2,
            "c-dup.yaml: substrate.scenario: ",
        ),
        (  # validate said ok and run then refused it
            "config whose calibration is not an overlay",
            [
                "validate",
                cf(
                    "c-cal",
                    lambda d: d["substrate"].update(
                        kind="spark-external",
                        scenario=str(GW),
                        workdir=str(tmp / "no-work"),
                        calibration=str(tmp / "dup-overlay.yaml"),
                    ),
                ),
            ],
            2,
            "c-cal.yaml: substrate.calibration: ",
        ),
        (  # validate said ok for both; run refused them
            "spark-external config on a query Spark cannot run",
            [
                "validate",
                cf(
                    "c-q",
                    lambda d: d["substrate"].update(
                        kind="spark-external", workdir=str(tmp / "no-work")
                    ),
                ),
            ],
            2,
            "c-q.yaml: substrate.scenario: ",
        ),
        (
            "spark-external config without a workdir",
            [
                "validate",
                cf(
                    "c-w",
                    lambda d: d["substrate"].update(kind="spark-external", scenario=str(GW)),
                ),
            ],
            2,
            "c-w.yaml: substrate.workdir: spark-external needs the pipeline's working directory",
        ),
        (
            "config key twice",
            ["run", "--config", str(tmp / "dup-config.yaml")],
            2,
            "line 2, column 1: the key 'metrics' is given twice in one mapping (first on line 1)",
        ),
        (
            "overlay key twice",
            ["replay", good, "--calibration", str(tmp / "dup-overlay.yaml")],
            2,
            "the key 'calibration' is given twice in one mapping (first on line 1)",
        ),
        ("binary replay", ["replay", str(tmp / "binary.yaml")], 2, "not a UTF-8 text file"),
        (
            "binary config",
            ["run", "--config", str(tmp / "binary.yaml")],
            2,
            "binary.yaml: not a UTF-8 text file (byte 6 is not UTF-8)",
        ),
        ("device scenario", ["replay", "/dev/null"], 2, "/dev/null: not a regular file"),
        (  # both said "no such file"
            "decision log a directory",
            ["decisions", "--decision-log", str(tmp / "st")],
            2,
            "st: a directory, not a file",
        ),
        (
            "decision log a device",
            ["decisions", "--decision-log", "/dev/zero"],
            2,
            "--decision-log: /dev/zero: not a regular file (a device or a pipe)",
        ),
        (  # its key probabilities filled the machine's 24 GB
            "a key space too large to model",
            ["partition", str(SCENARIOS / "zipf-moderate.yaml"), "--keys", "1000000000"],
            2,
            "--keys: 1,000,000,000 keys at 64 bytes each",
        ),
        (  # 4,096 sources peaked at 13.3 GB; 100,000 is refused on any machine below 1 TiB
            "partitioner tables too large",
            [
                "partition",
                str(SCENARIOS / "zipf-moderate.yaml"),
                "--seconds",
                "2",
                "--sources",
                "100000",
            ],
            2,
            "--sources: 100000 source instances of capa, ecapa, dalton",
        ),
        (  # a Python loop over 10^8 workers, gigabytes a minute
            "too many partition workers",
            ["partition", str(SCENARIOS / "zipf-moderate.yaml"), "--workers", "100000000"],
            2,
            "--workers",
        ),
        (  # a MemoryError at 10^10 tuples; gigabytes allocated below it
            "a key stream too long to hold",
            ["partition", sc("t-rate", rate({"kind": "constant", "rate": 1e10})), "--seconds", "2"],
            2,
            "--seconds: 20,000,000,000 tuples of the key stream",
        ),
        (  # a MemoryError after the log's directory was made
            "an input segment too large",
            ["input", "generate", str(GW), "--workdir", str(tmp / "w-seg"), "--scale", "1e7"],
            2,
            "--scale: the busiest tick's segment: 40,000,000,000 rows",
        ),
        (  # wrote segment files until the disk was full
            "an input log larger than the free disk",
            [
                "input",
                "generate",
                str(GW),
                "--workdir",
                str(tmp / "w-seg"),
                "--segments",
                "1000000000",
            ],
            2,
            "--segments: 1,000,000,000 segments of",
        ),
        (
            "a Spark replay's log larger than the free disk",
            ["replay", str(GW), "--substrate", "spark", "--batches", "1000000000"],
            2,
            "--batches: 1,000,000,000 segments of",
        ),
        (
            "a Spark replay's segments too large",
            ["replay", str(GW), "--substrate", "spark", "--scale", "1e7"],
            2,
            "--scale: the busiest tick's segment",
        ),
        (  # exited 1: "DatabaseError: file is not a database"
            "a pipeline's plan log damaged",
            ["pipeline", "results", "--workdir", str(tmp / "p-log")],
            2,
            "p-log/planlog.sqlite: not a trimtab plan log (file is not a database)",
        ),
        (
            "a pipeline's plan log damaged, verified",
            ["pipeline", "verify", str(GW), "--workdir", str(tmp / "p-log")],
            2,
            "p-log/planlog.sqlite: not a trimtab plan log",
        ),
        (  # a JSON error naming no file
            "a driver's app record damaged",
            ["inject", "kill-executor", "1", "--workdir", str(tmp / "p-app")],
            2,
            "p-app/app.json: not the app record a trimtab driver writes",
        ),
        (  # exited 1: "invalid literal for int()"
            "a workdir's current plan pointer damaged",
            ["publish-operator", "f", "--params", '{"value": 1}', "--workdir", str(tmp / "p-cur")],
            2,
            "p-cur/plans/current: not a plan version (it reads 'garbage')",
        ),
        (  # a multi-line pydantic error naming no file
            "a workdir's plan damaged",
            [
                "publish-operator",
                "f",
                "--params",
                '{"value": 1}',
                "--workdir",
                str(tmp / "p-plan"),
                "--scenario",
                str(GW),
            ],
            2,
            "p-plan/plans/v000000.json: not a trimtab plan (placement: Field required",
        ),
        *(  # JSON's true ran the filter as v > 1; NaN and 1e999 failed the plan's own check
            # (exit 1, a pydantic dump)
            (
                f"publish-operator value {text}",
                [
                    "publish-operator",
                    "filter_v",
                    "--params",
                    f'{{"value": {text}}}',
                    "--workdir",
                    str(tmp / "planned"),
                    "--scenario",
                    str(GW),
                ],
                2,
                f"operators.filter_v.params.value: {needle}",
            )
            for text, needle in (
                ("true", "a number is needed, not a boolean"),
                ("NaN", "nan is not a finite number"),
                ("1e999", "inf is not a finite number"),
            )
        ),
        *(  # the parameters the Spark pipeline reads, checked on reading the scenario: a
            # misspelt value or expr ran the filter or map as a no-op, a boolean as 1, a bad
            # column failed in Spark; validate said ok to all
            (
                f"scenario operator params ({needle})",
                ["validate", edited],
                2,
                needle,
            )
            for edited, needle in (
                (gw("fp1", drop(0, "value")), "operators.filter_v.params.value: missing"),
                (
                    gw("fp2", params(0, vlaue=10)),
                    "operators.filter_v.params.vlaue: a filter takes column, op, value",
                ),
                (
                    gw("fp3", params(0, value=True)),
                    "operators.filter_v.params.value: a number is needed, not a boolean",
                ),
                (gw("fp4", params(0, column="zz")), "params.column: 'zz' is not one of"),
                (gw("fp5", params(0, op="=~")), "params.op: unknown comparison '=~'"),
                (gw("fp6", params(1, agg="median")), "count_k.params.agg: unknown aggregate"),
                (ramp("fp7", params(1, exp="v * 2")), "enrich.params.exp: a map takes expr"),
                (  # a shift of a whole key space, or of a ranking a uniform draw lacks,
                    # changed nothing, unsaid
                    gw(
                        "ks1",
                        lambda d: d["streams"][0]["keys"].update(
                            shifts=[{"at_s": 5, "rotate": 2000}]
                        ),
                    ),
                    "streams.0.keys.shifts.0.rotate: 2000 is a whole number of key spaces",
                ),
                (
                    gw(
                        "ks2",
                        lambda d: d["streams"][0]["keys"].update(
                            distribution="uniform", shifts=[{"at_s": 5, "rotate": 3}]
                        ),
                    ),
                    "streams.0.keys.shifts: a uniform key distribution",
                ),
                (  # a fault's setting its kind does not read: ignored without a word
                    sc(
                        "fa1",
                        lambda d: d.update(
                            faults=[{"at_s": 5, "kind": "kill", "node": "B", "factor": 3}]
                        ),
                    ),
                    "faults.0.factor: only a slow fault has one",
                ),
                (
                    sc(
                        "fa2",
                        lambda d: d.update(
                            faults=[{"at_s": 5, "kind": "lose", "node": "B", "duration_s": 9}]
                        ),
                    ),
                    "faults.0.duration_s: a lose fault is permanent",
                ),
                (  # the shedding LP weighs the query outputs alone: ignored without a word
                    sc("fp9", lambda d: d["operators"][0].update(weight=5)),
                    "operators.0.weight: 'a1' feeds other operators",
                ),
                (  # 9 for 0.9: the simulator's filter made 9 rows of each one it read
                    gw("fp8", lambda d: d["operators"][0].update(selectivity=9)),
                    "operators.0.selectivity: a filter passes at most every row",
                ),
            )
        ),
        (  # exited 1: "'list' argument must have no negative elements"
            "a profile's windows past any machine",
            ["input", "profile", str(tmp / "far.csv")],
            2,
            "ts: the events span 1e+308 s",
        ),
        (  # a Python loop over ten million windows for each partitioner
            "a trace's windows too many to route",
            ["partition", good, "--trace", str(tmp / "far7.csv")],
            2,
            "--trace: ts: the events span 1e+07 s, 1e+07 windows",
        ),
        (  # its rates alone filled 19 GB within 15 s
            "a replay too long for the machine",
            ["replay", sc("t-long", lambda d: d.__setitem__("duration_s", 1e9))],
            2,
            "duration_s: 1e+09 s at tick_s 1.0 is 1,000,000,000 ticks",
        ),
        (
            "wrong type",
            ["validate", sc("t1", lambda d: d.__setitem__("duration_s", "abc"))],
            2,
            "duration_s",
        ),
        (
            "negative rate",
            ["validate", sc("t2", rate({"kind": "constant", "rate": -5}))],
            2,
            "streams.0.rate",
        ),
        (
            "infinite rate",
            ["replay", sc("t3", rate({"kind": "constant", "rate": float("inf")})), "--json"],
            2,
            "streams.0.rate.rate",
        ),
        (
            "nan cost",
            [
                "validate",
                sc("t4", lambda d: d["operators"][0].__setitem__("cost_us", float("nan"))),
            ],
            2,
            "cost_us",
        ),
        (
            "unknown input",
            ["validate", sc("t5", lambda d: d["operators"][0].__setitem__("inputs", ["ghost"]))],
            2,
            "ghost",
        ),
        *(  # YAML's yes/true/on read as 1: a node of capacity 1, a 1 s scenario, no word
            (
                f"a boolean for a number ({where})",
                ["validate", sc(f"tb{i}", edit)],
                2,
                f"{where}: a number is needed, not a boolean",
            )
            for i, (where, edit) in enumerate(
                (
                    (
                        "cluster.nodes.0.capacity",
                        lambda d: d["cluster"]["nodes"][0].update(capacity=True),
                    ),
                    ("duration_s", lambda d: d.update(duration_s=True)),
                    ("streams.0.rate.rate", lambda d: d["streams"][0]["rate"].update(rate=False)),
                    ("controller.interval_s", lambda d: d["controller"].update(interval_s=True)),
                )
            )
        ),
        (
            "a boolean for a number in a config",
            ["validate", cf("cb", lambda d: d["control"].update(window_samples=True))],
            2,
            "control.window_samples: a number is needed, not a boolean",
        ),
        (  # the node correlation of 100,000 partitions wanted 75 GiB: a MemoryError mid-run
            "more partitions than a keyed stage can have",
            ["replay", str(GW), "--substrate", "spark", "--partitions", "100000"],
            2,
            "'--partitions': Input should be less than or equal to 4096",
        ),
        (
            "more partitions than a keyed stage can have, a driver",
            ["pipeline", "run", str(GW), "--workdir", str(tmp / "p5k"), "--partitions", "5000"],
            2,
            "'--partitions': Input should be less than or equal to 4096",
        ),
        (  # a 7 s window sliding by 2 s ran as 8 s windows, on Spark and in its reference
            "a window that is no whole number of slides",
            [
                "validate",
                gw("win7", lambda d: d["operators"][1].update(window={"size_s": 7, "slide_s": 2})),
            ],
            2,
            "operators.1.window.size_s: 7 is not a whole multiple of slide_s 2 (a window's "
            "state is kept in panes of one slide); size_s 6 or 8 would be",
        ),
        (  # one shorter than its slide ran as a window of one slide
            "a window shorter than its slide",
            [
                "validate",
                gw("win2", lambda d: d["operators"][1].update(window={"size_s": 2, "slide_s": 5})),
            ],
            2,
            "size_s: 2 is not a whole multiple of slide_s 5",
        ),
        (
            "duplicate operator",
            ["validate", sc("t6", lambda d: d["operators"].append(dict(d["operators"][0])))],
            2,
            d_op(BASE),
        ),
        (
            "duplicate node",
            [
                "validate",
                sc("t7", lambda d: d["cluster"]["nodes"].append(dict(d["cluster"]["nodes"][0]))),
            ],
            2,
            d_node(BASE),
        ),
        (
            "trace missing",
            ["validate", sc("t8", rate({"kind": "trace", "path": "nope.csv"}))],
            2,
            "trace file not found",
        ),
        (
            "trace empty",
            ["replay", sc("t9", rate({"kind": "trace", "path": str(tmp / "empty.csv")})), "--json"],
            2,
            "at least two rows",
        ),
        (
            "trace header",
            ["validate", sc("t10", rate({"kind": "trace", "path": str(tmp / "header.csv")}))],
            2,
            "t_s,rate",
        ),
        (
            "unknown partitioner",
            [
                "validate",
                sc(
                    "t11",
                    lambda d: d.setdefault("controller", {}).__setitem__("partitioner", "nosuch"),
                ),
            ],
            2,
            "nosuch",
        ),
        (
            "unknown placement",
            [
                "validate",
                sc(
                    "t12",
                    lambda d: d.setdefault("controller", {}).__setitem__(
                        "placement", {"method": "magic"}
                    ),
                ),
            ],
            2,
            "magic",
        ),
        (
            "executor speed 0",
            ["validate", sc("t13", lambda d: d.__setitem__("spark", {"executor_speeds": [0, 1]}))],
            2,
            "spark.executor_speeds.0",
        ),
        (
            "unknown key",
            ["validate", sc("t14", lambda d: d.__setitem__("colour", "red"))],
            2,
            "colour",
        ),
        (
            "shorter than a tick",
            ["validate", sc("t16", lambda d: d.__setitem__("duration_s", d["tick_s"] / 2))],
            2,
            "duration_s: ",
        ),
        (
            "a fault past the end",
            [
                "validate",
                sc(
                    "t17",
                    lambda d: d.__setitem__(
                        "faults",
                        [{"kind": "kill", "node": d["cluster"]["nodes"][0]["id"], "at_s": 1e6}],
                    ),
                ),
            ],
            2,
            "faults.0.at_s: 1000000.0 is past the scenario's end",
        ),
        (
            "a piece past the end",
            [
                "validate",
                sc(
                    "t18",
                    rate(
                        {
                            "kind": "piecewise",
                            "pieces": [
                                {"from_s": 0, "rate": {"kind": "constant", "rate": 5}},
                                {"from_s": 1e6, "rate": {"kind": "constant", "rate": 9}},
                            ],
                        }
                    ),
                ),
            ],
            2,
            "streams.0.rate.pieces.1.from_s: 1000000.0 is past",
        ),
        (
            "negative seed",
            ["validate", sc("t15", lambda d: d.__setitem__("seed", -3))],
            2,
            "seed",
        ),
        ("negative --seed", ["replay", good, "--seed", "-1", "--json"], 2, "--seed"),
        (
            "validate a file of no kind",
            ["validate", str(ROOT / "examples" / "grafana-dashboard.json")],
            2,
            "not a trimtab scenario, config, plan or calibration file (its top-level keys: ",
        ),
        (
            "validate plain text",
            ["validate", str(tmp / "events.csv")],
            2,
            "not a trimtab scenario, config, plan or calibration file (plain text",
        ),
        (
            "replay a config",
            ["replay", str(ROOT / "examples" / "controller.yaml")],
            2,
            "not a scenario: it is a controller config (trimtab run --config takes it)",
        ),
        (
            "run a scenario",
            ["run", "--config", good],
            2,
            "not a controller config: it is a scenario",
        ),
        (
            "results --out a directory",
            ["pipeline", "results", "--workdir", str(tmp / "res"), "--out", str(tmp / "st")],
            2,
            "--out: " + str(tmp / "st") + " is a directory",
        ),
        (  # an empty file (or another SQLite file): "OperationalError: no such table", exit 1
            "results of a plan log without its tables",
            ["pipeline", "results", "--workdir", str(tmp / "res")],
            2,
            f"{tmp / 'res' / 'planlog.sqlite'}: not a trimtab plan log (no commits table)",
        ),
        (
            "verify a plan log without its tables",
            ["pipeline", "verify", str(GW), "--workdir", str(tmp / "res")],
            2,
            f"{tmp / 'res' / 'planlog.sqlite'}: not a trimtab plan log (no commits table)",
        ),
        (  # a Parquet file there was read as committed output: verify found twice the rows
            "results --out into the pipeline's output",
            [
                "pipeline",
                "results",
                "--workdir",
                str(tmp / "res"),
                "--out",
                str(tmp / "res" / "out.parquet"),
            ],
            2,
            f"--out: {tmp / 'res' / 'out.parquet'} is inside the working directory {tmp / 'res'}",
        ),
        (
            "calibrate --out over the run's own file",
            ["calibrate", str(tmp / "res"), "--out", str(tmp / "res" / "planlog.sqlite")],
            2,
            f"--out: {tmp / 'res' / 'planlog.sqlite'} is inside the working directory",
        ),
        (
            "profile --plot a directory",
            [
                "input",
                "profile",
                str(ROOT / "examples" / "events-sample.csv"),
                "--plot",
                str(tmp / "st"),
            ],
            2,
            "--plot: " + str(tmp / "st") + " is a directory",
        ),
        (  # it failed with matplotlib's ValueError once the profile had run (exit 1)
            "profile --plot of no image format",
            [
                *("input", "profile", str(ROOT / "examples" / "events-sample.csv")),
                *("--key-col", "user", "--plot", str(tmp / "rate.txt")),
            ],
            2,
            "--plot: rate.txt: 'txt' is not an image format",
        ),
        ("demo substrate", ["demo", "--substrate", "flink"], 2, "--substrate: 'flink'"),
        (
            "demo spark flag on sim",
            ["demo", "--substrate", "sim", "--batches", "3"],
            2,
            "--batches: ",
        ),
        (
            "shed --at and --peak",
            ["shed", good, "--at", "5", "--peak"],
            2,
            "--at or --peak, not both",
        ),
        ("scenario is a directory", ["place", str(tmp / "st")], 2, "st: a directory, not a file"),
        (
            "trace flag, no trace",
            ["partition", good, "--key-col", "uid"],
            2,
            "--key-col: reads a --trace",
        ),
        ("a method twice", ["compare", good, "--placement", "llf,llf"], 2, "'llf' is named twice"),
        ("no method", ["compare", good, "--placement", " , "], 2, "--placement: no name given"),
        (
            "compare: a Spark option on the simulator",
            ["compare", good, "--batches", "4"],
            2,
            "--batches: a Spark replay's option (add --substrate spark)",
        ),
        (
            "compare: imported events on the simulator",
            ["compare", good, "--input", str(tmp)],
            2,
            "--input: imported events replay on Spark only",
        ),
        (
            "compare: seeds over imported events",
            [*("compare", str(GW), "--substrate", "spark", "--seeds", "3"), "--input", str(tmp)],
            2,
            "--seeds: draws generated inputs; --input replays the imported events",
        ),
        (
            "compare: availability policies on Spark",
            ["compare", str(GW), "--substrate", "spark", "--ha", "upstream"],
            2,
            "--ha: the simulator's comparison of availability policies",
        ),
        (
            "compare: a substrate",
            ["compare", str(GW), "--substrate", "flink"],
            2,
            "--substrate: 'flink' is not a substrate",
        ),
        (
            "compare on Spark: a simulator-only scenario",
            ["compare", good, "--substrate", "spark", "--placement", "llf"],
            2,
            "the Spark pipeline needs a keyed windowed aggregate or join",
        ),
        (
            "compare on Spark: warm-up batches",
            [
                *("compare", str(GW), "--substrate", "spark", "--batches", "3"),
                "--warmup-batches",
                "2",
            ],
            2,
            "--warmup-batches: 2 of --batches 3 leaves fewer than 2 batches to time",
        ),
        (
            "compare on Spark: a partitioner",
            ["compare", str(GW), "--substrate", "spark", "--partitioner", "hash,pkg"],
            2,
            "--partitioner: unknown name 'hash,pkg'",
        ),
        ("no algorithm", ["place", good, "--algorithm", ","], 2, "--algorithm: no name given"),
        (
            "an unknown algorithm after a known one",
            ["place", good, "--algorithm", "rod,ROD"],
            2,
            "--algorithm: unknown placement 'ROD'",
        ),
        (
            "a billion QMC points (ran out of memory)",
            ["place", good, "--points", "1000000000"],
            2,
            "--points: 1,000,000,000 points over 2 streams and 2 nodes",
        ),
        (
            "--ha with --shedding",
            ["compare", good, "--ha", "upstream", "--shedding", "lp"],
            2,
            "--shedding: not with --ha",
        ),
        (
            "--ha with two placements",
            ["compare", good, "--ha", "upstream", "--placement", "rod,llf"],
            2,
            "with --ha, one method",
        ),
        (
            "cluster memory",
            ["cluster", "up", "--memory", "1.5g", "--state-dir", str(tmp / "cl")],
            2,
            "--memory: '1.5g'",
        ),
        (  # Spark reads it as 512 bytes: the workers died at start
            "cluster memory without a unit",
            ["cluster", "up", "--memory", "512", "--state-dir", str(tmp / "cl")],
            2,
            "--memory: '512' has no unit",
        ),
        (  # the workers started, and no replay ever got an executor on them
            "cluster memory below an executor's",
            ["cluster", "up", "--memory", "256m", "--state-dir", str(tmp / "cl")],
            2,
            "--memory: 256m is less than the 512m",
        ),
        (
            "cluster memory beyond the machine",
            ["cluster", "up", "--memory", "4t", "--state-dir", str(tmp / "cl")],
            2,
            "--memory: 2 workers x 4t = 8192.0 GiB is more than this machine's",
        ),
        *(  # a file for the state dir: up exited 1 (NotADirectoryError), down and status
            # said nothing was up
            (
                f"cluster {action} with a file for --state-dir",
                ["cluster", action, "--state-dir", str(tmp / "plan.json")],
                2,
                f"--state-dir: {tmp / 'plan.json'} is not a directory",
            )
            for action in ("up", "down", "status")
        ),
        *(  # a damaged state file: status and down exited 1 (JSONDecodeError); its pids
            # are not trusted, so nothing is stopped
            (
                f"cluster {action} with a damaged state file ({d})",
                ["cluster", action, "--state-dir", str(tmp / d)],
                2,
                f"--state-dir: {tmp / d / 'cluster.json'}: not",
            )
            for action in ("up", "down", "status")
            for d in ("cl-cut", "cl-other")
        ),
        # config files
        (
            "config scenario missing",
            [
                "validate",
                cf("c1", lambda d: d["substrate"].__setitem__("scenario", "missing.yaml")),
            ],
            2,
            "missing.yaml",
        ),
        (  # exited 1: "DatabaseError: file is not a database"
            "the controllers' lease damaged",
            [
                "run",
                "--config",
                cf(
                    "c-lease",
                    lambda d: d.__setitem__("decision_log", str(tmp / "p-lease" / "d.sqlite")),
                ),
            ],
            2,
            "decision_log: its lease",
        ),
        (
            "config placement",
            ["validate", cf("c2", lambda d: d["placement"].__setitem__("method", "magic"))],
            2,
            "magic",
        ),
        (  # a misspelt parameter was ignored, the method's default run
            "config param misspelt",
            [
                "validate",
                cf("c31", lambda d: d["placement"].update(params={"stale_trigerr": 0})),
            ],
            2,
            "placement.params.stale_trigerr: not a parameter of correlation-oneway",
        ),
        (  # the config sets no method: the scenario's (fixed) reads no params
            "config param of another method",
            [
                "validate",
                cf(
                    "c32",
                    lambda d: d.update(placement={"params": {"search_rounds": 0}, "max_moves": 5}),
                ),
            ],
            2,
            "placement.params.search_rounds: fixed reads no params (search_rounds is a parameter of rod)",
        ),
        (
            "config pins without fixed",
            ["validate", cf("c33", lambda d: d["placement"].update(fixed={"a1": "A"}))],
            2,
            "placement.fixed: pins are placed by method 'fixed' alone (method is 'correlation-oneway')",
        ),
        (
            "config port range",
            ["validate", cf("c3", lambda d: d["metrics"].__setitem__("port", 70000))],
            2,
            "metrics.port",
        ),
        (
            "config host",
            ["validate", cf("c4", lambda d: d["metrics"].__setitem__("host", "0.0.0.0"))],
            2,
            "metrics.host",
        ),
        (
            "config log unwritable",
            [
                "validate",
                cf("c5", lambda d: d.__setitem__("decision_log", str(tmp / "afile" / "d.sqlite"))),
            ],
            2,
            "decision_log",
        ),
        (
            "validate: port in use",
            ["validate", cf("c8", lambda d: d["metrics"].__setitem__("port", port))],
            3,
            "metrics.port",
        ),
        (
            "decision log not a log",
            ["run", "--config", cf("c9", lambda d: d.__setitem__("decision_log", good))],
            2,
            "decision_log: " + good + ": not a trimtab decision log (not an SQLite file)",
        ),
        (
            "validate: decision log a directory",
            ["validate", cf("c10", lambda d: d.__setitem__("decision_log", str(tmp / "st")))],
            2,
            "is a directory, not a file",
        ),
        (
            "state dir under a file",
            ["run", "--config", cf("c11", lambda d: d.__setitem__("state_dir", good + "/x"))],
            3,
            "state_dir: ",
        ),
        (  # as root the permission check passes /proc: the daemon's mkdir is what fails
            "state dir under /proc",
            ["run", "--config", cf("c12", lambda d: d.__setitem__("state_dir", "/proc/tt-x"))],
            3,
            "state_dir: ",
        ),
        (
            "a Spark setting on the simulator",
            ["validate", cf("c13", lambda d: d["substrate"].__setitem__("workdir", "w"))],
            2,
            "substrate.workdir: steers a spark-external pipeline",
        ),
        (
            "--take-over on the simulator",
            ["run", "--config", cf("c14", lambda d: None), "--take-over"],
            2,
            "control.take_over: ",
        ),
        (
            "config port in use",
            ["run", "--config", cf("c6", lambda d: d["metrics"].__setitem__("port", port))],
            3,
            "metrics.port",
        ),
        (
            "config interval",
            ["validate", cf("c7", lambda d: d["control"].__setitem__("interval_s", -1))],
            2,
            "interval_s",
        ),
        # plans
        ("plan not json", ["validate", str(tmp / "plan.json")], 2, "plan.json"),
        (
            "plan unknown node",
            ["validate", "--scenario", good, str(tmp / "plan-node.json")],
            2,
            "'n9'",
        ),
        (
            "plan unknown unit",
            ["validate", "--scenario", good, str(tmp / "plan-unit.json")],
            2,
            "'ghost'",
        ),
        *(  # a plan's operator parameters, as the pipeline would apply them: true read as 1
            (
                f"plan operator parameters {ops}",
                ["validate", "--scenario", str(GW), _plan_with(tmp, i, ops)],
                2,
                needle,
            )
            for i, (ops, needle) in enumerate(
                (
                    (
                        {"filter_v": {"value": True}},
                        "operators.filter_v.value: a number is needed, not a boolean",
                    ),
                    (
                        {"filter_v": {"vlaue": 3}},
                        "operators.filter_v.params.vlaue: a filter takes column, op, value",
                    ),
                )
            )
        ),
        # flags
        ("ticks 0", ["replay", good, "--ticks", "0"], 2, "ticks"),
        ("ticks -1", ["replay", good, "--ticks", "-1"], 2, "ticks"),
        ("substrate", ["replay", good, "--substrate", "flink"], 2, "--substrate"),
        ("spark flag on sim", ["replay", good, "--batches", "3"], 2, "--batches: a Spark replay's"),
        ("spark flag 2", ["replay", good, "--warmup-batches", "0"], 2, "--warmup-batches: a Spark"),
        (
            "sim flag on spark",
            ["replay", str(GW), "--substrate", "spark", "--ticks", "5"],
            2,
            "--ticks: the simulator's",
        ),
        ("replay partitioner", ["replay", good, "--partitioner", "nosuch"], 2, "nosuch"),
        ("replay placement", ["replay", good, "--placement", "magic"], 2, "magic"),
        ("replay shedding", ["replay", good, "--shedding", "magic"], 2, "magic"),
        (
            "replay report path",
            ["replay", good, "--ticks", "5", "--report", str(tmp / "afile" / "r")],
            2,
            "--report",
        ),
        (
            "replay input missing",
            ["replay", str(GW), "--substrate", "spark", "--input", str(tmp / "nodir")],
            2,
            "--input",
        ),
        (  # the imported events are the input: --batches, --scale and --seed were ignored
            "replay input with batches",
            ["replay", str(GW), "--substrate", "spark", "--input", str(torn), "--batches", "3"],
            2,
            "--batches: shapes a generated input; --input replays the imported events",
        ),
        (
            "replay input with seed",
            ["replay", str(GW), "--substrate", "spark", "--input", str(torn), "--seed", "3"],
            2,
            "--seed: shapes a generated input",
        ),
        (
            "replay input torn segment",
            ["replay", str(GW), "--substrate", "spark", "--input", str(torn)],
            2,
            "--input: input log: " + str(torn / "input" / "seg-000001.parquet") + " is not",
        ),
        (
            "pipeline run torn segment",
            ["pipeline", "run", str(GW), "--workdir", str(torn), "--default-plan"],
            2,
            "--workdir: input log: " + str(torn / "input" / "seg-000001.parquet"),
        ),
        (
            "pipeline run another scenario's plan",
            ["pipeline", "run", str(GW), "--workdir", str(other_plan)],
            2,
            str(other_plan / "plans" / "v000000.json") + ": placement: unit 'count_k#0' missing",
        ),
        (
            "pipeline run other partitions",
            ["pipeline", "run", str(GW), "--workdir", str(tmp / "planned"), "--partitions", "3"],
            2,
            "placement.nodes: the plan places key groups on 2 partitions; the pipeline runs 3",
        ),
        ("validate another pipeline's workdir", ["validate", ext], 2, mismatch),
        ("run on another pipeline's workdir", ["run", "--config", ext], 2, mismatch),
        (
            "verify input foreign parquet",
            ["pipeline", "verify", good, "--workdir", str(torn), "--input", str(foreign)],
            2,
            "seg-000000.parquet lacks the input column(s) event_id, stream, ts, key, v, c",
        ),
        ("partition names", ["partition", good, "--partitioners", "magic"], 2, "magic"),
        (
            "partition trace missing",
            ["partition", good, "--trace", str(tmp / "none.csv")],
            2,
            "not found",
        ),
        (
            "partition trace no ts",
            ["partition", good, "--trace", str(tmp / "keys-only.csv")],
            2,
            "--window-rows",
        ),
        (
            "partition trace negative key",
            ["partition", good, "--trace", str(tmp / "neg.csv")],
            2,
            "non-negative",
        ),
        (
            "partition trace no key",
            ["partition", good, "--trace", str(tmp / "nokey.csv")],
            2,
            "'key'",
        ),
        (
            "partition trace empty",
            ["partition", good, "--trace", str(tmp / "empty-trace.csv")],
            2,
            "no rows",
        ),
        ("status not ours", ["status", "--state-dir", str(tmp / "st")], 2, "not a trimtab status"),
        (
            "decisions not a db",
            ["decisions", "--decision-log", str(tmp / "notdb.sqlite")],
            2,
            "notdb.sqlite",
        ),
        (
            "decisions missing",
            ["decisions", "--decision-log", str(tmp / "none.sqlite")],
            2,
            "none.sqlite",
        ),
        (
            "import bad column",
            [
                "input",
                "import",
                str(tmp / "events.csv"),
                "--workdir",
                str(tmp / "w1"),
                "--stream",
                "s",
                "--key-col",
                "user",
            ],
            2,
            "--key-col",
        ),
        (
            "import format",
            [
                "input",
                "import",
                str(tmp / "events.csv"),
                "--workdir",
                str(tmp / "w2"),
                "--stream",
                "s",
                "--format",
                "xml",
            ],
            2,
            "--format",
        ),
        (
            "import bad rows",
            [
                "input",
                "import",
                str(tmp / "events.csv"),
                "--workdir",
                str(tmp / "w3"),
                "--stream",
                "s",
            ],
            2,
            "rows are bad",
        ),
        (  # a log under a blank stream name, which no scenario can have, was written
            "import blank stream",
            [
                "input",
                "import",
                str(tmp / "events.csv"),
                "--workdir",
                str(tmp / "w4b"),
                "--stream",
                " ",
            ],
            2,
            "--stream: an id must not be blank (got ' ')",
        ),
        (
            "replay master not loopback",
            ["replay", str(GW), "--substrate", "spark", "--master", "spark://10.0.0.1:7077"],
            2,
            "--master: 'spark://10.0.0.1:7077' is not local, local[N]",
        ),
        (
            "pipeline run master",
            ["pipeline", "run", str(GW), "--workdir", str(tmp / "w6"), "--master", "yarn"],
            2,
            "--master: 'yarn' is not local",
        ),
        (
            "replay master not listening",
            [
                "replay",
                str(GW),
                "--substrate",
                "spark",
                "--master",
                f"spark://127.0.0.1:{_free_port()}",
            ],
            3,
            "environment not ready: --master: nothing listens at spark://127.0.0.1:",
        ),
        (
            "import a span past the log",
            [
                "input",
                "import",
                str(tmp / "span.csv"),
                "--workdir",
                str(tmp / "w5"),
                "--stream",
                "s",
            ],
            2,
            "ts: the events span 3e+09 s (from 0 to 3e+09)",
        ),
        (
            "import missing file",
            [
                "input",
                "import",
                str(tmp / "none.csv"),
                "--workdir",
                str(tmp / "w4"),
                "--stream",
                "s",
            ],
            2,
            "not found",
        ),
        (
            "generate lead without pace",
            ["input", "generate", good, "--workdir", str(tmp / "g1"), "--lead-s", "1"],
            2,
            "--lead-s",
        ),
        (
            "generate lead not below pace",
            [
                *("input", "generate", good, "--workdir", str(tmp / "g2")),
                *("--pace-s", "2"),
                *("--lead-s", "2"),
            ],
            2,
            "--lead-s",
        ),
        ("inject fault name", ["inject", "explode", "1", "--workdir", str(tmp)], 2, "explode"),
        # an option or a target the fault would ignore: a kill for --seconds, a target the
        # driver kill has no use for, the controller faults' log on an executor and back
        (
            "inject kill for seconds",
            ["inject", "kill-executor", "1", "--seconds", "5", "--workdir", str(tmp)],
            2,
            "--seconds: kill-executor does not use it",
        ),
        (
            "inject driver target",
            ["inject", "kill-driver", "1", "--workdir", str(tmp)],
            2,
            "target",
        ),
        (
            "inject executor with log",
            [*("inject", "stop-executor", "1", "--workdir", str(tmp)), "--decision-log", good],
            2,
            "--decision-log: stop-executor does not use it",
        ),
        (
            "inject controller in workdir",
            ["inject", "kill-controller", "--workdir", str(tmp), "--decision-log", good],
            2,
            "--workdir: kill-controller does not use it",
        ),
        (
            "cluster status of workers",
            ["cluster", "status", "--workers", "3", "--state-dir", str(tmp / "cl")],
            2,
            "--workers: shapes what cluster up starts",
        ),
        ("compare methods", ["compare", good, "--placement", "magic"], 2, "magic"),
        # a method flag's names, checked before the first method runs: a Spark replay refused
        # a misspelt placement after Spark started, demo after its whole hash run, and a
        # correlation method whose window is too short for it ran (as LLF) and tied with LLF
        (
            "spark replay placement",
            [*("replay", str(GW), "--substrate", "spark", "--placement", "magic")],
            2,
            "--placement: unknown method 'magic'",
        ),
        ("replay placements", ["replay", good, "--placement", "llf,rod"], 2, "one method"),
        (  # named the field ("shedding: unknown method 'lp,none'") and not the flag
            "replay shedding methods",
            ["replay", good, "--shedding", "lp,none"],
            2,
            "--shedding: one method, got 'lp,none'",
        ),
        (
            "spark replay shedding",
            ["replay", str(GW), "--substrate", "spark", "--shedding", "magic"],
            2,
            "--shedding: unknown name 'magic'",
        ),
        (
            "spark replay partitioners",
            ["replay", str(GW), "--substrate", "spark", "--partitioner", "hash,pkg"],
            2,
            "--partitioner: unknown name 'hash,pkg'",
        ),
        (
            "compare window",
            ["compare", _short_window(tmp), "--placement", "llf,correlation-twoway"],
            2,
            "--placement: 2 samples a window, fewer than correlation-twoway needs",
        ),
        (
            "demo placement",
            ["demo", "--placement", "magic", "--report", str(tmp / "demo-report")],
            2,
            "--placement: unknown method 'magic'",
        ),
        (
            "compare shedding",
            [*("compare", good, "--placement", "llf", "--shedding", "lp,magic")],
            2,
            "--shedding: unknown name 'magic'",
        ),
        ("compare ha", ["compare", good, "--ha", "upstream,magic"], 2, "--ha: unknown name"),
        ("shed methods", ["shed", good, "--method", "lp,magic"], 2, "--method: unknown name"),
        (
            "partitioners",
            ["partition", good, "--partitioners", "hash,magic"],
            2,
            "--partitioners: unknown name 'magic'",
        ),
        # a --workdir that is a file, or that cannot be made: one line naming it, where a
        # pipeline run ended in a FileNotFoundError (exit 1), an import in NotADirectoryError,
        # and a generated log read the unmakeable directory's disk as one with 0 bytes free
        *(
            (f"{' '.join(cmd[:2])} workdir {why}", [*cmd, "--workdir", str(w)], 2, said)
            for cmd in (
                ["pipeline", "run", str(GW), "--default-plan"],
                ["input", "generate", str(GW)],
                ["input", "import", str(ROOT / "examples" / "events-sample.csv"), "--stream", "s"],
                ["replay", str(GW), "--substrate", "spark"],
            )
            for why, w, said in (
                ("file", _a_file(tmp), f"--workdir: {_a_file(tmp)} is a file, not a directory"),
                ("unmakeable", _unmakeable(tmp), f"--workdir: cannot create {_unmakeable(tmp)}: "),
            )
        ),
        (
            "warm-up batches",
            ["replay", str(GW), "--substrate", "spark", "--batches", "4", "--warmup-batches", "3"],
            2,
            "--warmup-batches: 3 of --batches 4 leaves fewer than 2 batches to time; give "
            "--batches 5 or more",
        ),
    ]
    return out


def _unmakeable(tmp: Path) -> Path:
    return tmp / "plan.json" / "w"  # under a file: it cannot be made


def _a_file(tmp: Path) -> Path:
    (tmp / "a-file").write_text("not a directory")
    return tmp / "a-file"


def _short_window(tmp: Path) -> str:
    """diurnal-phase-flip on LLF with a window of 2 samples: too few for a correlation."""

    def edit(d):  # type: ignore[no-untyped-def]
        d["controller"]["window_k"] = 2
        d["controller"]["placement"] = {"method": "llf"}

    return _scenario(tmp, "short-window", edit, SCENARIOS / "diurnal-phase-flip.yaml")


def _bad_logs(tmp: Path) -> tuple[Path, Path]:
    """A workdir whose input log's segment 1 was cut short by a copy, and a log holding a
    Parquet file that is not a segment."""
    import pandas as pd

    from controller.scenario import load_scenario
    from spark_adapter.source import InputLog

    torn = tmp / "torn"
    log = InputLog(torn / "input")
    log.generate(load_scenario(BASE), 3, scale=0.05)
    data = log.path(1).read_bytes()
    log.path(1).write_bytes(data[: len(data) // 2])
    foreign = tmp / "foreign"
    foreign.mkdir()
    pd.DataFrame({"a": [1, 2]}).to_parquet(foreign / "seg-000000.parquet")
    return torn, foreign


def _free_port() -> int:
    """A loopback port nothing listens on (bound and released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plan_workdirs(tmp: Path) -> Path:
    """Workdirs with an input log and a published plan: ``other`` holds a plan made for
    another scenario (spark-anticorrelated's key groups), ``planned`` one for 2 partitions."""
    from controller.scenario import load_scenario
    from controller.testing import key_group_plan
    from spark_adapter.actuator import PlanStore
    from spark_adapter.query import compile_query
    from spark_adapter.source import InputLog

    for name, sc in (("other", "spark-anticorrelated.yaml"), ("planned", GW.name)):
        InputLog(tmp / name / "input").generate(load_scenario(GW), 2, scale=0.05)
        q = compile_query(load_scenario(SCENARIOS / sc))
        PlanStore(tmp / name / "plans").publish(key_group_plan(q, [0] * q.key_groups))
    return tmp / "other"


def _plan_with(tmp: Path, i: int, operators: dict) -> str:  # type: ignore[type-arg]
    """The ``planned`` workdir's plan (``_plan_workdirs``) with these operator parameters."""
    import json

    plan = json.loads((tmp / "planned" / "plans" / "v000000.json").read_text())
    out = tmp / f"plan-ops{i}.json"
    out.write_text(json.dumps(plan | {"operators": operators}))
    return str(out)


def _other_pipeline_config(tmp: Path, cf) -> str:  # type: ignore[no-untyped-def]
    """A daemon config steering spark-anticorrelated (16 key groups) in a workdir whose batch
    file is seed-groupby-window's (8)."""
    from spark_adapter.batchstats import BatchStats, write_batch_stats

    work = tmp / "gw-pipe"
    import numpy as np
    import pandas as pd

    rows, busy, kg = np.array([5, 5]), np.array([0.1, 0.1]), np.full(8, 1)
    keys = pd.DataFrame({"key": [1], "side": [0], "rows": [10]})
    st = BatchStats(0, 0, False, 1.0, rows, busy, kg, keys, {"s": 10}, 0, 0, 0, 1, (0, 9), 1.0)
    write_batch_stats(st, work / "metrics")
    sub = {"kind": "spark-external", "scenario": str(SCENARIOS / "spark-anticorrelated.yaml")}

    def edit(d):  # type: ignore[no-untyped-def]
        d["substrate"] = {**sub, "workdir": str(work)}
        d["metrics"]["port"] = 0

    return cf("ext-other", edit)


def d_op(path: Path) -> str:
    return yaml.safe_load(path.read_text())["operators"][0]["id"]


def d_node(path: Path) -> str:
    return yaml.safe_load(path.read_text())["cluster"]["nodes"][0]["id"]


def test_bad_input_sweep(tmp_path: Path, busy_port: int) -> None:
    runner = CliRunner()
    table = cases(tmp_path, busy_port)
    assert len(table) >= 40
    failures = []
    for name, argv, code, needle in table:
        try:
            r = runner.invoke(app, argv)
        finally:  # a regressed check must not leave a started cluster running
            if (tmp_path / "cl" / "cluster.json").exists():
                from spark_adapter.cluster import cluster_down

                cluster_down(tmp_path / "cl" / "cluster.json")
        err = r.stderr.strip()
        problems = []
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            problems.append(f"raised {type(r.exception).__name__}: {r.exception}")
        if r.exit_code != code:
            problems.append(f"exit {r.exit_code}, expected {code}")
        if needle not in err:
            problems.append(f"{needle!r} not in {err!r}")
        if len(err.splitlines()) != 1:
            problems.append(f"{len(err.splitlines())} lines: {err[:300]!r}")
        if problems:
            failures.append(f"{name}: " + "; ".join(problems))
    assert not failures, "\n".join(failures)
    # refused before anything ran: the torn log's workdir holds its input and nothing else
    assert sorted(p.name for p in (tmp_path / "torn").iterdir()) == ["input"]
    assert [p.name for p in (tmp_path / "gw-pipe").iterdir()] == ["metrics"]  # no plan out
    assert not (tmp_path / "w5").exists()  # the refused import left no workdir behind
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == ["planlog.sqlite"]
    assert (tmp_path / "res" / "planlog.sqlite").read_bytes() == b""  # not written over
    assert not (tmp_path / "w4b").exists()  # nor the one under a blank stream name
    assert not (tmp_path / "w6").exists()  # the driver refused its master before any write
    assert not (tmp_path / "w-seg").exists()  # the refused segments: no log was made
    assert not (tmp_path / "cl").exists()  # no cluster was started, nor its logs written
    assert not (tmp_path / "demo-report").exists()  # the refused demo wrote no report
    for name in ("other", "planned"):  # a refused plan: nothing pinned, Spark never started
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["input", "plans"]
    # the refused operator parameters published no plan
    planned = tmp_path / "planned" / "plans"
    assert [p.name for p in planned.glob("v*.json")] == ["v000000.json"]
    assert (planned / "current").read_text() == "0"


def test_an_environment_variable_is_blamed_not_the_file(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TRIMTAB_METRICS__PORT", "abc")
    r = CliRunner().invoke(app, ["validate", str(ROOT / "examples" / "controller.yaml")])
    assert r.exit_code == 2
    assert r.stderr.startswith("error: environment TRIMTAB_METRICS__PORT: metrics.port")


def test_a_variable_named_in_a_problem_of_another_field_is_blamed(  # type: ignore[no-untyped-def]
    tmp_path: Path, monkeypatch
) -> None:
    """``failure_timeout_s ... is below heartbeat_timeout_s`` with the heartbeat from the
    environment blamed the file, whose heartbeat is 5 s. And with two problems from two
    sources, each is named with its own."""
    monkeypatch.setenv("TRIMTAB_AVAILABILITY__HEARTBEAT_TIMEOUT_S", "30")
    cfg = _config(tmp_path, "c", lambda d: None)
    r = CliRunner().invoke(app, ["validate", cfg])
    assert r.exit_code == 2
    assert r.stderr == (
        "error: environment TRIMTAB_AVAILABILITY__HEARTBEAT_TIMEOUT_S: "
        "availability.failure_timeout_s: 15.0 is below heartbeat_timeout_s 30.0\n"
    )
    both = _config(tmp_path, "c2", lambda d: d["control"].update(lease_timeout_s=0.1))
    r = CliRunner().invoke(app, ["validate", both])
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {both}: control.lease_timeout_s: at least 0.5 s")
    assert "; environment TRIMTAB_AVAILABILITY__HEARTBEAT_TIMEOUT_S: availability." in r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "/dev/zero"],
        ["compare", "/dev/zero"],
        ["validate", "/dev/zero"],
        ["run", "--config", "/dev/zero"],
        ["replay", str(SCENARIOS / "zipf-moderate.yaml"), "--calibration", "/dev/zero"],
        ["input", "profile", "/dev/zero"],  # named "file not found" before
    ],
    ids=["replay", "compare", "validate", "run-config", "calibration", "events"],
)
def test_a_device_that_never_ends_is_refused_not_read(argv: list[str]) -> None:
    """A device given for a file is refused by name before a byte is read: `replay /dev/zero`
    and `run --config /dev/zero` read it forever (the wrong-kind hint read the file without
    the check), holding the terminal and filling memory."""
    exe = Path(sys.executable).with_name("trimtab")
    r = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=15)
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.strip()
        == "error: "
        + ("--calibration: " if "--calibration" in argv else "")
        + "/dev/zero: not a regular file (a device or a pipe)"
    ), r.stderr


def test_place_names_an_unknown_algorithm_before_it_places_any(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`place --algorithm rod,ROD` placed rod and measured its feasible-set ratio (long at
    many points) before it named ROD."""
    from controller import compare
    from controller.scenario import load_scenario

    def measured(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("a placement was measured before the names were checked")

    monkeypatch.setattr(compare, "feasible_set_ratio", measured)
    with pytest.raises(ValueError, match="--algorithm: unknown placement 'ROD'"):
        compare.place(load_scenario(BASE), ["rod", "ROD"])


WHERE = (
    "Spark master's RPC port (7077 by default; `trimtab cluster status` prints the URL, and a "
    "master's web UI shows it at its top)"
)


class _Silent(threading.Thread):
    """A TCP server that takes connections and says nothing (``close``: closes each at once)."""

    def __init__(self, close: bool) -> None:
        super().__init__(daemon=True)
        self.sock, self.close, self.held = socket.socket(), close, []
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.server_address = self.sock.getsockname()

    def run(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn = self.sock.accept()[0]
                if self.close:
                    conn.close()
                else:
                    self.held.append(conn)

    def shutdown(self) -> None:
        for c in self.held:
            c.close()

    def server_close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    ("command", "server", "said"),
    [
        ("replay", "http", f"answers as an HTTP server does, not as a {WHERE}"),
        ("pipeline", "http", f"answers as an HTTP server does, not as a {WHERE}"),
        ("replay", "silent", f"did not answer in 3 s to a Spark RPC request: not a {WHERE}"),
        ("pipeline", "silent", f"did not answer in 3 s to a Spark RPC request: not a {WHERE}"),
        ("replay", "closing", f"closed the connection at a Spark RPC request: not a {WHERE}"),
    ],
)
def test_a_master_url_at_another_servers_port_is_named_before_spark_starts(
    tmp_path: Path, command: str, server: str, said: str
) -> None:
    """A spark:// URL at a port where no Spark RPC server answers (a master's web UI or REST
    port given for its RPC port, a server that never answers, one that hangs up): Spark's
    client retried for about a minute before the run ended. The probe before Spark starts
    asks what a Spark server answers at once and names the port (exit 3); a web UI also names
    the master's URL, and a real master is taken (tests/cluster/test_standalone.py)."""
    import http.server
    import time

    srv: Any
    if server == "http":
        srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    else:
        srv = _Silent(close=server == "closing")
        srv.start()
    master = f"spark://127.0.0.1:{srv.server_address[1]}"
    work = tmp_path / "w"
    argv = {
        "replay": ["replay", str(GW), "--substrate", "spark", "--workdir", str(work)],
        "pipeline": ["pipeline", "run", str(GW), "--workdir", str(work)],
    }[command]
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [str(Path(sys.executable).parent / "trimtab"), *argv, "--master", master],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        srv.shutdown()
        srv.server_close()
    took = time.monotonic() - t0
    assert r.returncode == 3, r.stderr[-2000:]
    assert r.stderr.strip() == f"error: environment not ready: --master: {master} {said}"
    assert took < 30, took  # Spark's client took about 60 s to give up
    assert not work.exists()
