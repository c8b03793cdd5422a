"""Placement (and shedding) methods side by side on Spark: ``trimtab compare --substrate spark``.

The simulator's ``compare`` answers "which method is better" in the model; this answers it on
the engine. Every method replays the same input (the scenario's workload drawn from its seed,
the same draw for each, or the events imported into ``input_dir``) in one Spark session, one
after the other, with the controller in the loop, and each run's output is checked against the
reference. A short warm-up replay runs first and is not reported, so the first method does not
pay the JVM's and the executors' Python start that the later ones find done.

Methods whose runs routed and dropped alike in every timed batch on every input ran the same
plans (``same_plans_as``): their figures differ by the engine's run-to-run spread alone, which
a table of batch durations does not show (LLF and a correlation method before its global step,
or two correlation methods whose pair-wise rounds moved nothing).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.scenario import ScenarioFile
from spark_adapter.interrupt import Interrupted, holding_sigint, stop_if_asked

__all__ = ["WARMUP_BATCHES", "compare_spark", "mean_runs", "same_plans"]

WARMUP_BATCHES = 2  # the unreported replay before the compared ones (generated input)
# each run's figures kept beside a pair's means (``runs`` in its row)
PER_RUN = ("run_order", "rows_in", "batch_duration_p50", "batch_duration_p99", "migrations")
PER_RUN += ("output_matches_reference",)


@holding_sigint  # a Ctrl-C stops the run in progress after its batch, and the comparison
def compare_spark(
    scenario: ScenarioFile,
    placements: list[str],
    sheddings: list[str] | None = None,
    *,
    seeds: int = 1,
    master: str = "local[2]",
    batches: int = 10,
    partitioner: str | None = None,
    partitions: int = 2,
    scale: float = 0.1,
    warmup_batches: int = 1,
    input_dir: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per (placement, shedding) pair: its Spark replay's summary, or with ``seeds``
    above 1 the mean over the inputs drawn from seeds ``scenario.seed ..`` (the pairs run in
    the order given on the first, reversed on the second, and so on); each row carries
    ``placement``, ``shedding``, ``seeds`` and ``run_order`` (the run's place in the session,
    one per seed). ``progress`` gets the run's label and the batches done of the total."""
    from controller.spark_replay import close_run, replay_spark, spark_session

    sheds: list[str | None] = list(sheddings) if sheddings else [None]
    pairs = [(p, s) for p in placements for s in sheds]
    spark = spark_session(None, scenario, master, partitions)
    scratch = Path(tempfile.mkdtemp(prefix="trimtab-compare-"))
    kw: dict[str, Any] = {"master": master, "partitions": partitions, "spark": spark}
    kw |= {"partitioner": partitioner, "keep_workdir": False, "scale": scale}
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(pairs))}
    try:  # warm first: the JVM, the executors' Python workers, the query's first plan
        replay_spark(scenario, batches=WARMUP_BATCHES, placement=placements[0], **kw)
        order = [(seed, i) for seed in range(seeds) for i in _turn(len(pairs), seed)]
        for n, (seed, i) in enumerate(order, start=1):
            (place, shed), sc = pairs[i], scenario.model_copy(update={"seed": scenario.seed + seed})
            label = f"{place if shed is None else f'{place} / {shed}'} (run {n} of {len(order)})"
            stop_if_asked(f"interrupted: compare stopped before {label}")
            try:
                res = replay_spark(
                    sc,
                    batches=batches,
                    placement=place,
                    shedding=shed,
                    warmup_batches=warmup_batches,
                    input_dir=input_dir,
                    workdir=scratch / f"run-{n}",
                    progress=None if progress is None else _labelled(progress, label),
                    **kw,
                )
            except Interrupted as e:  # which of the runs it stopped
                raise Interrupted(f"{e}, in {label}: nothing compared") from None
            runs[i].append(res.summary | {"run_order": n, "workdir": None})
            shutil.rmtree(scratch / f"run-{n}", ignore_errors=True)  # one run's disk at a time
    finally:  # a stop that failed after a signal (the JVM gone with it) is not reported
        close_run(None, spark, scratch)
    return _rows(pairs, runs, seeds, scenario.controller.shedding.method)


def _rows(
    pairs: list[tuple[str, str | None]],
    runs: dict[int, list[dict[str, Any]]],
    seeds: int,
    own: str,
) -> list[dict[str, Any]]:
    """Each pair's row: the mean of its runs, its methods (``own``: the scenario's shedding,
    for pairs run under it), and the other pairs that ran the same plans."""
    labels = [p if s is None else f"{p} / {s}" for p, s in pairs]
    alike = {i: g for g in same_plans([runs[i] for i in range(len(pairs))]) for i in g}
    return [
        mean_runs(runs[i])
        | {"placement": p, "shedding": s or own, "seeds": seeds}
        | {"same_plans_as": [labels[j] for j in alike.get(i, []) if j != i]}
        for i, (p, s) in enumerate(pairs)
    ]


def same_plans(runs: list[list[dict[str, Any]]]) -> list[list[int]]:
    """The groups (two or more) of methods, by index, whose runs ran the same plans: on each
    input (``runs[i][k]``: method i's run on the k-th input) every timed batch had the same
    routing and the same drops (``routing_per_batch``'s digests). A run with no timed batch
    on record is like no other.

    >>> def run(*d): return {"routing_per_batch": [
    ...     {"routing_digest": r, "shed_digest": "-"} for r in d]}
    >>> same_plans([[run("a", "b")], [run("a", "c")], [run("a", "b")], [run("a", "c")]])
    [[0, 2], [1, 3]]
    >>> same_plans([[run("a"), run("b")], [run("a"), run("c")]])  # alike on one input only
    []
    >>> same_plans([[{}], [{}]])
    []
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, rr in enumerate(runs):
        ran = [
            tuple((b["routing_digest"], b["shed_digest"]) for b in r.get("routing_per_batch", []))
            for r in rr
        ]
        if ran and all(ran):
            groups.setdefault(tuple(ran), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _turn(n: int, seed: int) -> list[int]:
    """The pairs' order on the input of ``seed``: as given, then reversed, and so on, so that
    no method always runs first (or last) in the session.

    >>> _turn(3, 0), _turn(3, 1), _turn(3, 2)
    ([0, 1, 2], [2, 1, 0], [0, 1, 2])
    """
    return list(range(n)) if seed % 2 == 0 else list(range(n - 1, -1, -1))


def mean_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One pair's runs as one row: the mean of each numeric figure, ``output_matches_reference``
    only if every run's did, ``run_order`` the runs' places in the session, the mean of each
    cause's migrations (``migrations_by_cause``), any other figure as it is when the runs
    agree, else the list of each run's; and ``runs``, each run's own ``PER_RUN`` figures.

    >>> r = mean_runs([{"batch_duration_p99": 1.0, "output_matches_reference": True,
    ...     "run_order": 1, "partition_rows": [3, 1], "master": "local[2]",
    ...     "migrations_by_cause": {"global-step": 6}},
    ...     {"batch_duration_p99": 2.0, "output_matches_reference": False,
    ...     "run_order": 4, "partition_rows": [2, 2], "master": "local[2]",
    ...     "migrations_by_cause": {"global-step": 4, "pairwise": 1}}])
    >>> r["batch_duration_p99"], r["output_matches_reference"], r["run_order"]
    (1.5, False, [1, 4])
    >>> r["migrations_by_cause"]
    {'global-step': 5.0, 'pairwise': 0.5}
    >>> r["partition_rows"], r["master"], [x["batch_duration_p99"] for x in r["runs"]]
    ([[3, 1], [2, 2]], 'local[2]', [1.0, 2.0])
    """
    from controller.compare import mean_figure
    from controller.migration_causes import mean_by_cause

    row: dict[str, Any] = {}
    for k in runs[0]:
        vals = [r.get(k) for r in runs]
        if k == "output_matches_reference":
            row[k] = all(vals)
        elif k == "run_order":
            row[k] = vals
        elif k == "migrations_by_cause":  # each cause's mean, as the simulator's compare
            row[k] = mean_by_cause(vals) if len(runs) > 1 else vals[0]
        elif (mean := mean_figure(vals)) is not None:
            row[k] = mean if len(runs) > 1 else vals[0]
        else:
            row[k] = vals[0] if all(v == vals[0] for v in vals) else vals
    if len(runs) > 1:  # each run's own figures beside the means
        row["runs"] = [{k: r.get(k) for k in PER_RUN} for r in runs]
    return row


def _labelled(progress: Callable[[str, int, int], None], label: str) -> Callable[[int, int], None]:
    return lambda done, total: progress(label, done, total)
