"""trimtab publish-operator: a new plan version with an operator's parameters (a filter's
predicate, an aggregate from the set its partials give); a change the state cannot take, an unknown operator or bad JSON is one line with exit 2 and publishes
nothing; a controller publishing afterwards keeps the user's parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controller.cli import app
from controller.scenario import load_scenario
from controller.testing import key_group_plan
from spark_adapter.actuator import PlanStore
from spark_adapter.query import compile_query
from tests.conftest import SCENARIOS

SCENARIO = SCENARIOS / "seed-groupby-window.yaml"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    q = compile_query(load_scenario(SCENARIO))
    PlanStore(tmp_path / "plans").publish(key_group_plan(q, [0] * q.key_groups, 0, 2))
    return tmp_path


def _publish(work: Path, op: str, params: str) -> object:
    args = ["publish-operator", op, "--params", params, "--workdir", str(work)]
    return CliRunner().invoke(app, [*args, "--scenario", str(SCENARIO)])


def test_a_filter_change_is_the_next_plan_version(work: Path) -> None:
    r = _publish(work, "filter_v", '{"value": 50}')
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    assert json.loads(r.stdout)["plan_version"] == 1  # type: ignore[attr-defined]
    cur = PlanStore(work / "plans").load_current()
    assert cur.version == 1 and cur.operators == {"filter_v": {"value": 50}}
    assert _publish(work, "filter_v", '{"op": "<"}').exit_code == 0  # type: ignore[attr-defined]
    assert PlanStore(work / "plans").load_current().operators == {
        "filter_v": {"value": 50, "op": "<"}
    }


@pytest.mark.parametrize(
    ("op", "params", "words"),
    [
        ("count_k", '{"agg": "median"}', ["operators.count_k.params.agg", "partials"]),
        ("count_k", '{"window": 5}', ["operators.count_k.params.window", "cannot change"]),
        ("nope", '{"value": 1}', ["operators.nope", "can change", "filter_v, count_k)"]),
        ("filter_v", '{"value": "high"}', ["operators.filter_v.params.value", "not a number"]),
        ("filter_v", '{"op": "~"}', ["operators.filter_v.params.op", "'~'"]),
        ("filter_v", '{"column": "key"}', ["operators.filter_v.params.column", "'key'"]),
        ("filter_v", '{"size": 3}', ["operators.filter_v.params.size"]),
        ("filter_v", "{value: 1}", ["--params", "not JSON"]),
        ("filter_v", "[1]", ["--params", "JSON object"]),
        ("filter_v", '{"value": 1, "value": 2}', ["--params: 'value' is given twice"]),
    ],
)
def test_what_cannot_apply_is_refused_and_nothing_is_published(
    work: Path, op: str, params: str, words: list[str]
) -> None:
    r = _publish(work, op, params)
    assert r.exit_code == 2, r.output  # type: ignore[attr-defined]
    lines = [x for x in r.stderr.splitlines() if x.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    for w in words:
        assert w in lines[0], lines[0]
    assert PlanStore(work / "plans").current_version() == 0


def test_an_aggregate_the_partials_give_is_accepted(work: Path) -> None:
    r = _publish(work, "count_k", '{"agg": "max"}')
    assert r.exit_code == 0, r.output  # type: ignore[attr-defined]
    assert PlanStore(work / "plans").load_current().operators == {"count_k": {"agg": "max"}}


def test_a_workdir_without_plans_is_named(tmp_path: Path) -> None:
    r = _publish(tmp_path, "filter_v", '{"value": 1}')
    assert r.exit_code == 2 and "--workdir" in r.stderr  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []  # refused: nothing made there


def test_the_controller_keeps_the_users_operator_parameters(work: Path) -> None:
    """A controller publishing after the user renumbers past the user's version and carries the
    operator parameters instead of reverting them."""
    store = PlanStore(work / "plans")
    controller_plan = store.load(0)  # the controller still holds version 0
    assert _publish(work, "filter_v", '{"value": 70}').exit_code == 0  # type: ignore[attr-defined]
    mine = controller_plan.next(reason="controller round")  # would be version 1 again
    applied = store.publish_next(mine)
    assert applied.version == 2 and applied.operators == {"filter_v": {"value": 70}}
    assert store.load_current() == applied


@pytest.fixture
def mapped(tmp_path: Path) -> tuple[Path, Path]:
    """seed-groupby-window with an identity map ``scale_v`` in front of its filter."""
    import yaml

    doc = yaml.safe_load(SCENARIO.read_text())
    doc["operators"][0]["inputs"] = ["scale_v"]
    doc["operators"].insert(
        0, {"id": "scale_v", "kind": "map", "inputs": ["s"], "cost_us": 0, "params": {"expr": "v"}}
    )
    sc = tmp_path / "mapped.yaml"
    sc.write_text(yaml.safe_dump(doc))
    q = compile_query(load_scenario(sc))
    PlanStore(tmp_path / "plans").publish(key_group_plan(q, [0] * q.key_groups, 0, 2))
    return tmp_path, sc


@pytest.mark.parametrize(
    ("params", "ok", "words"),
    [
        ('{"expr": "abs(v - 50) * 2 + c"}', True, []),
        ('{"expr": "v ** 2"}', False, ["operators.scale_v.params.expr", "'**' is not allowed"]),
        ('{"expr": "key * 2"}', False, ["operators.scale_v.params.expr", "unknown column 'key'"]),
        ('{"expr": "__import__(1)"}', False, ["operators.scale_v.params.expr", "not allowed"]),
        ('{"fn": "v"}', False, ["operators.scale_v.params.fn", "a map takes expr"]),
    ],
)
def test_a_map_expression_is_checked_before_it_is_published(
    mapped: tuple[Path, Path], params: str, ok: bool, words: list[str]
) -> None:
    work, sc = mapped
    args = ["publish-operator", "scale_v", "--params", params, "--workdir", str(work)]
    r = CliRunner().invoke(app, [*args, "--scenario", str(sc)])
    store = PlanStore(work / "plans")
    if ok:
        assert r.exit_code == 0, r.output
        assert store.load_current().operators == {"scale_v": json.loads(params)}
        return
    assert r.exit_code == 2, r.output
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
    assert store.current_version() == 0
