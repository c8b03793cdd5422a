"""Shared helpers for the benchmark scripts: environment facts and BENCHMARKS.md sections."""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "BENCHMARKS.md"


def environment() -> str:
    """One line describing the machine and versions."""
    import numpy as np

    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, AttributeError):
        pass
    return (
        f"{os.cpu_count()} cores{mem}, Python {platform.python_version()}, numpy {np.__version__}; "
        "single run, rough"
    )


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section ``## name`` of BENCHMARKS.md."""
    text = (
        BENCHMARKS.read_text()
        if BENCHMARKS.exists()
        else "# Benchmarks\n\nEvery number here was produced by the command shown with it, on the machine described.\n"
    )
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    section = f"## {name}\n\n{body.strip()}\n\n"
    text = pattern.sub(section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    BENCHMARKS.write_text(text)


def held_plan_load(scenario: Any, assignment: Any, ticks: int) -> Any:
    """The simulator's offered node loads ``(ticks, nodes)`` with ``assignment`` held from the
    start, no controller: what a static plan that ran on Spark predicts."""
    import numpy as np

    from core.plans import Placement, Plan
    from simulator import Simulator

    sim = Simulator(scenario)
    a = tuple(int(x) for x in np.asarray(assignment))
    sim.apply(Plan(placement=Placement(units=sim.units.ids, nodes=sim.cluster.ids, assignment=a)))
    sim.step(ticks)
    return sim.result().node_load.to_numpy()


def calibration_row(method: str, run: dict[str, Any], pred: dict[str, Any], batches: Any) -> str:
    """A calibration table's row: a Spark run's measured batch p50/p99 (its summary), the
    calibrated simulator's predicted ones and their ratios, and the busiest partition's busy
    seconds (the median over ``batches``, its timed batch statistics) against the prediction."""
    import numpy as np

    busiest = float(np.median([b.busy_s.max() for b in batches]))
    p50, p99 = run["batch_duration_p50"], run["batch_duration_p99"]
    q50, q99 = pred["predicted_batch_duration_p50"], pred["predicted_batch_duration_p99"]
    return (
        f"| {method} | {p50:.2f} | {q50:.2f} | {q50 / p50:.2f} | {p99:.2f} | {q99:.2f} | "
        f"{q99 / p99:.2f} | {busiest:.2f} | {pred['predicted_busiest_partition_s_p50']:.2f} |"
    )


def tick_crossing(xs: Any, ys: Any, tick_s: float) -> tuple[float, float, float]:
    """The least-squares line through ``(xs, ys)`` (batch durations over input rates or
    scales): (the x at which it reaches ``tick_s``, nan where it does not rise; its intercept;
    its slope).

    >>> [round(v, 9) for v in tick_crossing([1.0, 2.0, 3.0], [1.0, 1.5, 2.0], 2.0)]
    [3.0, 0.5, 0.5]
    """
    import numpy as np

    slope, icpt = (float(v) for v in np.polyfit(xs, ys, 1))
    return (tick_s - icpt) / slope if slope > 0 else float("nan"), icpt, slope


def warm_up(spark: Any, scenario: Any, work: Path, placement: str, scale: float) -> None:
    """A short replay (4 batches) before the measured ones, so that the JVM and the executors'
    Python workers are warm when they start; not measured."""
    from controller.spark_replay import replay_spark

    replay_spark(
        scenario,
        batches=4,
        placement=placement,
        partitions=2,
        scale=scale,
        spark=spark,
        workdir=work / "warm",
    )


def cluster_session(name: str, partitions: int = 2, master: str = "local-cluster[2,1,1024]") -> Any:
    """The benches' Spark session: local-cluster[2,1,1024] (2 executors of 1 core),
    ``partitions`` shuffle partitions, 768 MiB per executor."""
    from spark_adapter.session import make_session

    return make_session(
        master,
        name,
        {"spark.sql.shuffle.partitions": str(partitions), "spark.executor.memory": "768m"},
    )
