"""Calibrate the simulator against a Spark run: per-row cost and fixed costs per task and per
batch, fitted from the run's batch statistics and written as a scenario overlay.

The model (one keyed stage on n partitions, one task each): partition p of batch b is busy
``t0 + c * rows_bp`` seconds, and the batch takes ``o + max_p busy_bp``. ``c`` and ``t0`` are the
least-squares line through every (batch, partition) that had rows; ``o`` is the median of
``duration_b - max_p (t0 + c * rows_bp)``. The overlay scales every operator's cost by ``c``
over the scenario's modelled cost per row, sets the simulator's rate scale to the rows the run
saw over the rows the scenario expects for the same ticks, and carries ``t0`` and ``o`` as the
simulator's ``batch_model``: a tick whose busiest node has ``w`` CPU-seconds of work is a batch
of ``o + t0 + w`` seconds (``predicted_batches``). Capacity (``BatchModel.capacity``) is planned
with the 90th percentile of those fixed costs (``planning_overhead_s``): a plan that fills what
the median leaves overruns its trigger in every other batch. A driver's fixed cost falls as it
runs batches (its JVM and Python workers warm up: on the live overload ramp about 0.9 s a batch
in its first ten batches, 0.55 s after thirty); when a run's fixed costs fall with the batch id,
the overlay carries the fall per e-fold of batches (``BatchModel.warmup``), and predictions
charge batch ``b`` ``fixed_s(b)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from controller.scenario import ScenarioFile
from controller.spark_view import spark_view
from core.batch_model import BatchModel, Warmup
from core.files import read_text
from core.model_base import STRICT, TrimtabModel
from core.workload import rates
from core.yaml_text import load_yaml, yaml_problem
from spark_adapter.batchstats import BatchStats, read_batch_stats

__all__ = [
    "CalibrationOverlay",
    "apply_overlay",
    "calibrate",
    "fit_batches",
    "load_overlay",
    "overlay_yaml",
    "predicted_batches",
    "read_batches",
    "recorded_scenario",
]

RUN_FILE = "run.json"  # what replay_spark ran: the scenario, scale and partitions


class Provenance(TrimtabModel):
    """Where the numbers came from and how well the model fits them."""

    model_config = STRICT
    scenario: str
    workdir: str
    batches: int = Field(ge=1)
    measured_us_per_row: float = Field(gt=0)
    modelled_us_per_row: float = Field(gt=0)
    busy_fit_r2: float
    batch_duration_p50_s: float = Field(ge=0)
    batch_duration_p99_s: float = Field(ge=0)


class SimulatorOverlay(TrimtabModel):
    model_config = STRICT
    rate_scale: float = Field(gt=0)
    batch_model: BatchModel


class OperatorCost(TrimtabModel):
    model_config = STRICT
    cost_us: float = Field(ge=0)


class CalibrationOverlay(TrimtabModel):
    """The file ``trimtab calibrate`` writes and ``replay --calibration`` reads."""

    model_config = STRICT
    calibration: Provenance
    simulator: SimulatorOverlay
    operators: dict[str, OperatorCost]


ROUGH_FIT_R2 = 0.8  # a per-row fit explaining less of the busy time than this is called rough
MIN_FIT_BATCHES = 3  # fewer batches: a fit (and a p99 of batch durations) too thin to trust


def rough_fit(ov: CalibrationOverlay) -> str | None:
    """What to tell the user when the fit is thin or loose: fitted on fewer than
    ``MIN_FIT_BATCHES`` batches (one batch on two partitions is two points, which a line
    always fits: r^2 1.0 by construction, not by measurement), or a per-row line that
    explains little of the partitions' busy time (a short run, or batches too alike in rows);
    None for a fit worth its figures."""
    p = ov.calibration
    if p.batches < MIN_FIT_BATCHES:
        return (
            f"the overlay is fitted on {p.batches} batch(es), fewer than {MIN_FIT_BATCHES}: "
            f"its costs are rough (an r^2 of {p.busy_fit_r2:.2f} over so few points says "
            "little) and its batch duration p99 is one of a few; calibrate a longer run"
        )
    if p.busy_fit_r2 >= ROUGH_FIT_R2:
        return None
    return (
        f"the cost per row explains {max(p.busy_fit_r2, 0.0):.0%} of the partitions' busy time "
        f"over {p.batches} batch(es) (r^2 {p.busy_fit_r2:.2f}, below {ROUGH_FIT_R2}): "
        "the overlay's costs are rough; calibrate a longer run"
    )


def read_batches(workdir: Path) -> list[BatchStats]:
    """The first attempt of every batch in ``workdir/metrics`` that read input, by id
    (replayed attempts and empty batches left out)."""
    files = sorted((workdir / "metrics").glob("batch-*.json"))
    if not files:
        raise ValueError(f"{workdir}: no batch statistics (metrics/batch-*.json)")
    out = {}
    for f in files:
        st = read_batch_stats(f)
        if not st.replay and st.event_range[0] >= 0 and st.rows.sum() > 0:
            out.setdefault(st.batch_id, st)
    return [out[b] for b in sorted(out)]


def fit_batches(batches: list[BatchStats]) -> dict[str, float]:
    """``c`` (s per row), ``t0`` and ``o`` (s) of the module's model, with the fit's r^2."""
    rows = np.concatenate([b.rows for b in batches]).astype(float)
    busy = np.concatenate([b.busy_s for b in batches])
    used = rows > 0
    if used.sum() < 2 or np.ptp(rows[used]) == 0:
        raise ValueError("calibrate: too few batches with different row counts to fit a cost")
    c, t0 = np.polyfit(rows[used], busy[used], 1)
    if c <= 0:
        raise ValueError(
            f"calibrate: the fitted cost per row is not positive ({c:.3g} s) over "
            f"{len(batches)} batch(es) after --skip: busy time did not grow with rows; "
            "calibrate a longer run (more batches, more rows)"
        )
    t0 = max(float(t0), 0.0)
    pred = t0 + c * rows[used]
    ss = float(((busy[used] - busy[used].mean()) ** 2).sum())
    r2 = 1.0 - float(((busy[used] - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    work = np.array([t0 + c * b.rows.max() for b in batches])
    dur = np.array([b.duration_s for b in batches])
    return {
        "c": float(c),
        "t0": t0,
        "o": max(float(np.median(dur - work)), 0.0),
        "o90": max(float(np.percentile(dur - work, 90)), 0.0),
        "r2": r2,
        "p50": float(np.percentile(dur, 50)),
        "p99": float(np.percentile(dur, 99)),
    } | _warmup(np.array([b.batch_id for b in batches], dtype=float), dur - work)


WARMUP_MIN_S = 0.01  # a fall under 10 ms per e-fold of batches is no warm-up


def _warmup(batch: np.ndarray, fixed: np.ndarray) -> dict[str, float]:
    """The fixed cost's fall as the driver runs batches: the least-squares slope of each
    batch's fixed cost on ``ln(1 + batch id)`` (``warm_slope``, s per e-fold, 0 when it does
    not fall by ``WARMUP_MIN_S``), anchored at the median batch id, floored at the fixed
    costs' 10th percentile."""
    slope = 0.0
    if batch.size >= 3 and np.ptp(batch) > 0:
        slope = -float(np.polyfit(np.log1p(batch), fixed, 1)[0])
    return {
        "warm_slope": slope if slope >= WARMUP_MIN_S else 0.0,
        "warm_at": float(np.median(batch)),
        "warm_floor": max(float(np.percentile(fixed, 10)), 0.0),
    }


def _ticks(batches: list[BatchStats]) -> np.ndarray:
    """The input ticks the batches read (event ids start at tick x 2^32): one per batch in a
    replay, several for a live batch that caught up a backlog."""
    spans = [np.arange(b.event_range[0] >> 32, (b.event_range[1] >> 32) + 1) for b in batches]
    return np.concatenate(spans).astype(np.int64) if spans else np.zeros(0, dtype=np.int64)


def _offered(b: BatchStats, stream: str) -> float:
    """Rows of ``stream`` that arrived in batch ``b``: those it counted over the keep its
    pinned plan gave the stream (a shed run's drops are not a lower rate)."""
    return b.stream_rows.get(stream, 0) / max(b.info.get("stream_keep", {}).get(stream, 1.0), 1e-6)


def recorded_scenario(workdir: Path) -> ScenarioFile:
    """The scenario ``replay_spark`` recorded in ``workdir/run.json``."""
    run = workdir / RUN_FILE
    if not run.exists():
        raise ValueError(f"{workdir}: no {RUN_FILE}; name the scenario with --scenario")
    try:
        doc = json.loads(run.read_text())
        return ScenarioFile.model_validate(doc["scenario"] | {"base_dir": doc["base_dir"]})
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as e:
        why = f"no {e.args[0]!r}" if isinstance(e, KeyError) else str(e).splitlines()[0]
        raise ValueError(
            f"{run}: not the run record trimtab writes ({why}); name the scenario with --scenario"
        ) from None


def _check_streams(
    workdir: Path, batches: list[BatchStats], name: str, sides: dict[str, int]
) -> None:
    """``ValueError`` unless the run's batches read rows, of the scenario's streams only (a
    wrong ``--scenario`` divided by zero, or fitted one pipeline's costs to another's)."""
    read = sorted({s for b in batches for s, n in b.stream_rows.items() if n})
    if other := [s for s in read if s not in sides]:
        raise ValueError(
            f"--scenario: the run in {workdir} read stream(s) {', '.join(other)}, which "
            f"{name!r} does not have (name the scenario the run ran)"
        )
    if not read:
        raise ValueError(f"{workdir}: no batch read a row: there is nothing to fit")


def calibrate(
    workdir: Path, scenario: ScenarioFile | None = None, skip: int = 1
) -> CalibrationOverlay:
    """Fit a run's batches (the first ``skip`` left out: executor start-up) into an overlay of
    ``scenario`` (default: the one ``replay_spark`` recorded in ``workdir/run.json``)."""
    batches = read_batches(workdir)[skip:]
    scenario = scenario or recorded_scenario(workdir)
    if not batches:
        raise ValueError(f"{workdir}: no batches left after skipping the first {skip}")
    f = fit_batches(batches)
    from spark_adapter.query import compile_query

    q = compile_query(scenario)
    _check_streams(workdir, batches, scenario.name, q.sides)
    seen = {s: sum(_offered(b, s) for b in batches) for s in q.sides}
    total = max(sum(seen.values()), 1)
    modelled = sum(q.cost_us[s] * n for s, n in seen.items()) / total  # us per row, by rows
    ticks = _ticks(batches)
    ids = [s.id for s in scenario.streams]
    expected = rates(scenario)[ticks % scenario.ticks][
        :, [ids.index(q.stream_of(s)) for s in q.sides]
    ].sum()
    scale = total / max(float(expected), 1e-9)
    k = f["c"] * 1e6 / modelled
    return CalibrationOverlay(
        calibration=Provenance(
            scenario=scenario.name,
            workdir=str(workdir),
            batches=len(batches),
            measured_us_per_row=f["c"] * 1e6,
            modelled_us_per_row=modelled,
            busy_fit_r2=f["r2"],
            batch_duration_p50_s=f["p50"],
            batch_duration_p99_s=f["p99"],
        ),
        simulator=SimulatorOverlay(
            rate_scale=scale,
            batch_model=BatchModel(
                task_overhead_s=f["t0"],
                batch_overhead_s=f["o"],
                planning_overhead_s=f["o90"],
                warmup=Warmup(
                    slope_s=f["warm_slope"], at_batch=f["warm_at"], floor_s=f["warm_floor"]
                )
                if f["warm_slope"] > 0
                else None,
            ),
        ),
        operators={op.id: OperatorCost(cost_us=op.cost_us * k) for op in scenario.operators},
    )


def load_overlay(path: Path) -> CalibrationOverlay:
    """Read an overlay file; a ``ValueError`` names the file and the first bad field."""
    import yaml
    from pydantic import ValidationError

    try:
        text, problem = read_text(path)
        if problem is not None:
            raise ValueError(f"{path}: {problem}")
        doc = load_yaml(text or "")
    except OSError as e:
        raise ValueError(f"{path}: {(e.strerror or str(e)).lower()}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not YAML ({yaml_problem(e)})") from None
    try:
        return CalibrationOverlay.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise ValueError(f"{path}: {where}: {err['msg']}") from None


OVERLAY_HEAD = "# trimtab calibration of "


def is_replaceable(path: Path) -> bool:
    """True when writing an overlay to ``path`` loses nothing: it does not exist, is empty, or
    is an earlier overlay (its first line is ``overlay_yaml``'s header). A scenario or another
    file named by mistake is not."""
    if not path.exists():
        return True
    with path.open("rb") as f:
        first = f.readline()
    return not first or first.startswith(OVERLAY_HEAD.encode())


def overlay_yaml(ov: CalibrationOverlay) -> str:
    """The overlay as YAML, with a header saying what it is."""
    import yaml

    head = (
        f"{OVERLAY_HEAD}{ov.calibration.scenario!r} from a Spark run\n"
        "# apply with: trimtab replay SCENARIO --calibration THIS_FILE\n"
    )
    return head + yaml.safe_dump(ov.model_dump(mode="json"), sort_keys=False)


def apply_overlay(scenario: ScenarioFile, ov: CalibrationOverlay) -> ScenarioFile:
    """The scenario with the overlay's operator costs, rate scale and batch model, its nodes'
    capacities scaled to what a batch leaves after its fixed costs (``BatchModel.capacity``):
    the calibrated simulator's controller plans with the capacity Spark's plans with. It is
    the scenario's Spark view (``controller.spark_view``): the network the pipeline runs, whose
    partitions the calibration measured."""
    if ov.calibration.scenario != scenario.name:
        raise ValueError(
            f"calibration: fitted on scenario {ov.calibration.scenario!r}, not {scenario.name!r}"
        )
    known = {op.id for op in scenario.operators}
    unknown = sorted(set(ov.operators) - known)
    if unknown:
        raise ValueError(f"calibration.operators: unknown operator {unknown[0]!r}")
    ops = [
        op.model_copy(update={"cost_us": ov.operators[op.id].cost_us})
        if op.id in ov.operators
        else op
        for op in scenario.operators
    ]
    bm = ov.simulator.batch_model
    sim = scenario.simulator.model_copy(
        update={"rate_scale": ov.simulator.rate_scale, "batch_model": bm}
    )
    share = bm.capacity(scenario.tick_s)  # what a batch leaves for work, as Spark's controller
    nodes = [n.model_copy(update={"capacity": n.capacity * share}) for n in scenario.cluster.nodes]
    cluster = scenario.cluster.model_copy(update={"nodes": nodes})
    cal = scenario.model_copy(update={"operators": ops, "simulator": sim, "cluster": cluster})
    return spark_view(cal)


def predicted_batches(
    node_load: np.ndarray, tick_s: float, model: BatchModel, skip: int = 1
) -> dict[str, Any]:
    """Batch duration p50/p99 and the busiest partition's busy seconds (p50), predicted from the
    simulator's offered node loads (``(ticks, nodes)``, cores); the first ``skip`` ticks are
    left out, as ``calibrate`` leaves out the first batches."""
    work = np.asarray(node_load, dtype=float)[skip:].max(axis=1) * tick_s
    if work.size == 0:
        return {}
    busiest = model.task_overhead_s + work
    dur = model.fixed_s(np.arange(skip, skip + work.size)) + work
    return {
        "predicted_batch_duration_p50": float(np.percentile(dur, 50)),
        "predicted_batch_duration_p99": float(np.percentile(dur, 99)),
        "predicted_busiest_partition_s_p50": float(np.percentile(busiest, 50)),
    }
