"""Checking a user's file before anything runs: which kind it is, and whether it is valid.

``file_kind`` tells a plan (``placement`` and ``version``), a daemon config (any of
``control``, ``substrate``, ``metrics``, ``decision_log``), a calibration overlay
(``calibration``) and a scenario apart by their top-level keys; ``validate_file`` loads the file as that kind, raising the kind's own error
(``ScenarioError`` or ``ConfigError``) that names the field and the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.config import (
    ConfigError,
    Settings,
    attributed,
    load_settings,
    log_problem,
    path_problems,
)
from controller.placement_params import pin_problem, placement_problem, window_problem
from controller.scenario import ScenarioFile, load_scenario
from core.files import read_text
from core.plans import Plan
from core.scenario import format_validation_error
from core.yaml_text import load_yaml

__all__ = [
    "epoch_problem",
    "file_kind",
    "other_kind",
    "pipeline_plan_epoch",
    "pipeline_problems",
    "plan_problems",
    "take_over_epoch",
    "validate_file",
]


def file_kind(data: Any) -> str:
    """``plan``, ``config``, ``calibration`` or ``scenario`` from a parsed file's top-level keys;
    ``unknown`` for a file that is none of them (most of its keys none of theirs).

    >>> file_kind({"version": 3, "placement": {}}), file_kind({"metrics": {}}), file_kind(None)
    ('plan', 'config', 'scenario')
    >>> file_kind({"calibration": {}, "simulator": {}}), file_kind({"title": "x", "panels": []})
    ('calibration', 'unknown')
    """
    if data is None:  # missing, empty or not YAML: the scenario loader says which
        return "scenario"
    if not isinstance(data, dict):
        return "unknown"
    keys = set(data)
    if "placement" in keys and "version" in keys:
        return "plan"
    if "calibration" in keys:
        return "calibration"
    if keys and _mostly(keys, set(Settings.model_fields)):  # no key is of both kinds
        return "config"
    if _mostly(keys, set(ScenarioFile.model_fields)):
        return "scenario"
    return "unknown"


KIND_USE = {  # each kind: what it is, and what takes it
    "scenario": ("a scenario", "trimtab replay and compare take it"),
    "config": ("a controller config", "trimtab run --config takes it"),
    "plan": ("a plan", "trimtab validate checks it"),
    "calibration": ("a calibration overlay", "replay --calibration takes it"),
}


def other_kind(path: Path, want: str) -> str | None:
    """What ``path`` is when it is plainly not a ``want`` file (another trimtab kind, or none),
    as one line's problem; None when it may be one (its own loader then names the fields)."""
    text, _ = read_text(path)  # checked first: a device (/dev/zero) would be read forever
    try:
        data = load_yaml(text) if text is not None else None
    except yaml.YAMLError:
        return None
    kind = file_kind(data)
    if data is None or kind == want:
        return None
    what = KIND_USE[want][0]
    if kind == "unknown":
        return f"not {what}, nor any other trimtab file{_seen(data)}"
    return f"not {what}: it is {KIND_USE[kind][0]} ({KIND_USE[kind][1]})"


_WHAT = {str: "plain text", list: "a list", int: "a number", float: "a number", bool: "a boolean"}


def _seen(data: Any) -> str:
    """What a file of no trimtab kind holds, in brackets: its first keys, or its type."""
    if not isinstance(data, dict):
        return f" ({_WHAT.get(type(data), 'a value')}, not a mapping)"
    keys = sorted(map(str, data))
    return f" (its top-level keys: {', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''})"


def _mostly(keys: set[str], known: set[str]) -> bool:
    """At least half of ``keys`` are ``known`` (a misspelt key or two still say the kind)."""
    return 2 * len(keys & known) >= len(keys)


def plan_problems(plan: Plan, scenario: ScenarioFile) -> list[str]:
    """What in ``plan`` does not fit ``scenario``, one line each (empty: it fits).

    A plan fits as the simulator places the scenario (its operators' units on its nodes) or as
    the Spark pipeline does (the keyed stage's key groups ``op#g`` on partitions ``p0..``).
    """
    from controller.wiring import make_context

    p = plan.placement
    ctx = make_context(scenario)
    sim_units, sim_nodes = set(ctx.units.ids), set(ctx.cluster.ids)
    keyed = [o for o in scenario.operators if o.kind in ("aggregate", "join")]
    spark_units = {f"{o.id}#{g}" for o in keyed for g in range(o.key_groups)}
    units = set(p.units)
    if units <= spark_units and units and all(n.startswith("p") for n in p.nodes):
        known_units, known_nodes = spark_units, {f"p{i}" for i in range(len(p.nodes))}
    else:
        known_units, known_nodes = sim_units, sim_nodes
    out = []
    for u in sorted(units - known_units)[:3]:
        out.append(f"placement.units: {u!r} is not a unit of scenario {scenario.name!r}")
    for u in sorted(known_units - units)[:3]:
        out.append(f"placement.units: the scenario's unit {u!r} is not placed")
    for n in sorted(set(p.nodes) - known_nodes)[:3]:
        out.append(
            f"placement.nodes: {n!r} is not a node of scenario {scenario.name!r} "
            f"(nodes: {', '.join(sorted(known_nodes))})"
        )
    if plan.operators:  # what the pipeline would apply from the batch that pins the plan
        from spark_adapter.query import compile_query, with_operator_params

        try:
            with_operator_params(compile_query(scenario), plan.operators)
        except ValueError as e:
            out.append(str(e))
    return out


def pipeline_problems(settings: Settings) -> list[str]:
    """A ``spark-external`` config whose workdir holds another pipeline's batches (another
    scenario's key groups or streams, other partitions) or a pipeline that has ended, one
    line; reads only."""
    sub = settings.substrate
    if sub.kind != "spark-external" or not Path(sub.scenario).is_file():
        return []
    if not sub.workdir:
        return ["substrate.workdir: spark-external needs the pipeline's working directory"]
    from spark_adapter.external import ended_problem, workdir_mismatch
    from spark_adapter.query import compile_query

    try:
        sc = load_scenario(sub.scenario)
    except ValueError:  # the scenario's own problem: scenario_problems names it
        return []
    try:
        q = compile_query(sc)
    except ValueError as e:  # a query the pipeline cannot run: validate said ok
        return [f"substrate.scenario: {sub.scenario}: {e}"]
    problem = workdir_mismatch(sub.workdir, list(q.sides), sub.partitions, q.key_groups)
    problem = problem or ended_problem(sub.workdir)
    return [problem] if problem else []


def pipeline_plan_epoch(settings: Settings) -> tuple[int, int] | None:
    """(version, controller epoch) of the plan a ``spark-external`` pipeline runs now; None
    with no plan there (or the simulator). Reads only."""
    sub = settings.substrate
    if sub.kind != "spark-external" or not sub.workdir:
        return None
    from spark_adapter.actuator import PlanStore

    store = PlanStore(Path(sub.workdir) / "plans", read_only=True)
    v = store.current_version()
    try:
        return None if v is None else (v, store.load(v).epoch)
    except (KeyError, ValueError):  # a plan the driver's own check names
        return None


def take_over_epoch(settings: Settings) -> int:
    """With ``control.take_over``, the least epoch to lead at first: one above that of the
    plan the pipeline runs (0: no floor)."""
    cur = pipeline_plan_epoch(settings) if settings.control.take_over else None
    return 0 if cur is None else cur[1] + 1


def epoch_problem(settings: Settings) -> str | None:
    """Why a daemon on this config could publish no plan to its pipeline (None: it can): the
    pipeline runs plans of a newer controller epoch than the decision log's lease will grant,
    so another controller, with another decision log, steers it. Reads only."""
    if settings.control.dry_run or settings.control.take_over:
        return None
    cur = pipeline_plan_epoch(settings)
    from controller.decisionlog import lease_file
    from core.lease import read_lease

    lease = read_lease(lease_file(settings.decision_log), leave_no_files=True)
    ours = (lease.epoch if lease is not None else 0) + 1
    if cur is None or cur[1] <= ours:
        return None
    return (
        f"decision_log: {settings.decision_log} leads at epoch {ours}, but the pipeline in "
        f"{settings.substrate.workdir} runs plan v{cur[0]} of controller epoch {cur[1]}, which "
        "refuses older epochs: another controller's decision log steers it. Run with that "
        "decision_log; if it is lost and that controller is gone, with --take-over"
    )


def scenario_problems(settings: Settings) -> list[str]:
    """What this config sets that its scenario cannot take, one line; reads only. What the
    scenario sets itself is judged when the scenario is read.

    - placement params or pins the method it runs (its own, or its scenario's) would ignore
      (``placement_params``), pins to operators or nodes the scenario lacks;
    - whatever the policy the daemon builds from the config over its scenario refuses
      (scaling bounds above the scenario's node count, ...).
    """
    if not Path(settings.substrate.scenario).is_file():
        return []
    try:
        sc = load_scenario(settings.substrate.scenario)
    except ValueError as e:  # `validate CONFIG` said ok, and `run` then refused it
        return [f"substrate.scenario: {e}"]
    mine, given = settings.placement, settings.placement.model_fields_set
    base = sc.controller.placement
    params = mine.params if "params" in given else {}
    pins = mine.fixed if "fixed" in given else {}
    method = mine.method if "method" in given else base.method
    initial = mine.initial if "initial" in given else base.initial
    bad = placement_problem(method, initial, params, pins) or pin_problem(
        pins, {o.id for o in sc.operators}, {n.id for n in sc.cluster.nodes}
    )
    if bad is not None:
        return [f"placement.{bad}"]
    from controller.wiring import make_policy

    merged = settings.controller_settings(sc.controller)
    mp = merged.placement
    if bad := window_problem(mp.method, mp.initial, mp.params, merged.window_k):
        # the scenario passed its own check: this config's window, min_samples or method did
        if "window_samples" in settings.control.model_fields_set:
            return [f"control.window_samples: {bad}"]
        field = "params.min_samples" if "min_samples" in mp.params else "method"
        return [f"placement.{field}: the scenario's window_k gives {bad}"]
    try:  # the policy the daemon builds (scaling bounds, ...): what it refuses, named here
        make_policy(sc.model_copy(update={"controller": merged}))
    except ValueError as e:
        return [str(e)]
    if (cal := settings.substrate.calibration) and Path(cal).is_file():
        from controller.calibration import apply_overlay, load_overlay

        try:  # as the daemon reads it: an overlay, of this scenario
            apply_overlay(sc, load_overlay(Path(cal)))
        except ValueError as e:
            return [f"substrate.calibration: {e}"]
    return []


def validate_file(path: Path, scenario: Path | None = None) -> str:
    """Load ``path`` as the kind it looks like; return the kind or raise its error. A plan is
    also checked against ``scenario`` when one is given."""
    text, problem = read_text(path) if path.is_file() else (None, None)
    if problem is not None:
        raise ConfigError(str(path), [problem])
    try:
        data = load_yaml(text) if text is not None else None
    except yaml.YAMLError:
        data = None  # the scenario loader reports the YAML error with its position
    kind = file_kind(data)
    if kind == "plan":
        try:
            plan = Plan.model_validate(data)
        except ValidationError as e:
            raise ConfigError(str(path), format_validation_error(e)) from None
        if scenario is not None:
            problems = plan_problems(plan, load_scenario(scenario))
            if problems:
                raise ConfigError(str(path), problems)
    elif kind == "config":
        settings = load_settings(path)
        if placed := scenario_problems(settings):
            raise ConfigError(*attributed(placed, str(path)))
        problems = path_problems(settings) + pipeline_problems(settings)
        problems += [bad] if (bad := log_problem(settings)) else []
        if problems:
            raise ConfigError(str(path), problems)
    elif kind == "calibration":
        from controller.calibration import apply_overlay, load_overlay

        try:
            overlay = load_overlay(path)
            if scenario is not None:
                apply_overlay(load_scenario(scenario), overlay)
        except ValueError as e:
            raise ConfigError(str(path), [str(e).removeprefix(f"{path}: ")]) from None
    elif kind == "unknown":
        problem = f"not a trimtab scenario, config, plan or calibration file{_seen(data)}"
        raise ConfigError(str(path), [problem])
    else:
        load_scenario(path)
    return kind
