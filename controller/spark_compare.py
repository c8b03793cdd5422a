"""Placement (and shedding) methods side by side on Spark: ``trimtab compare --substrate spark``.

The simulator's ``compare`` answers "which method is better" in the model; this answers it on
the engine. Every method replays the same input (the scenario's workload drawn once from its
seed, or the events imported into ``input_dir``) in one Spark session, one after the other, with
the controller in the loop, and each run's output is checked against the reference. A short
warm-up replay runs first and is not reported, so the first method does not pay the JVM's and
the executors' Python start that the later ones find done.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.scenario import ScenarioFile
from spark_adapter.interrupt import holding_sigint, stop_if_asked

__all__ = ["WARMUP_BATCHES", "compare_spark"]

WARMUP_BATCHES = 2  # the unreported replay before the compared ones (generated input)


@holding_sigint  # a Ctrl-C stops the run in progress after its batch, and the comparison
def compare_spark(
    scenario: ScenarioFile,
    placements: list[str],
    sheddings: list[str] | None = None,
    *,
    master: str = "local[2]",
    batches: int = 10,
    partitioner: str | None = None,
    partitions: int = 2,
    scale: float = 0.1,
    warmup_batches: int = 1,
    input_dir: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One Spark replay summary per (placement, shedding) pair, in that order, each carrying
    ``placement``, ``shedding`` and ``run_order`` (1 for the first compared run); ``progress``
    gets the pair's label and the batches done of the total."""
    from controller.spark_replay import close_run, replay_spark, spark_session

    sheds: list[str | None] = list(sheddings) if sheddings else [None]
    pairs = [(p, s) for p in placements for s in sheds]
    spark = spark_session(None, scenario, master, partitions)
    scratch = Path(tempfile.mkdtemp(prefix="trimtab-compare-"))
    common: dict[str, Any] = {"master": master, "partitions": partitions, "spark": spark}
    common |= {"partitioner": partitioner, "keep_workdir": False}
    rows: list[dict[str, Any]] = []
    try:
        replay_spark(  # warm: the JVM, the executors' Python workers, the query's first plan
            scenario,
            batches=WARMUP_BATCHES,
            placement=placements[0],
            scale=scale,
            workdir=scratch / "warm-up",
            **common,
        )
        for i, (place, shed) in enumerate(pairs, start=1):
            label = place if shed is None else f"{place} / {shed}"
            stop_if_asked(f"interrupted: compare stopped before {label} ({i} of {len(pairs)})")
            res = replay_spark(
                scenario,
                batches=batches,
                placement=place,
                shedding=shed,
                scale=scale,
                warmup_batches=warmup_batches,
                input_dir=input_dir,
                workdir=scratch / f"run-{i}",
                progress=None if progress is None else _labelled(progress, label),
                **common,
            )
            shed = shed or scenario.controller.shedding.method  # the workdir: removed below
            row = {"placement": place, "shedding": shed, "run_order": i, "workdir": None}
            rows.append(res.summary | row)
    finally:  # a stop that failed after a signal (the JVM gone with it) is not reported
        close_run(None, spark, scratch)
    return rows


def _labelled(progress: Callable[[str, int, int], None], label: str) -> Callable[[int, int], None]:
    return lambda done, total: progress(label, done, total)
