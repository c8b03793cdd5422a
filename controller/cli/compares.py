"""``trimtab compare``: several methods on the same workload, side by side, in the simulator
(placements, placement x shedding pairs, availability policies) or on Spark (placements and
shedding methods, each replayed over the same input in one session)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from controller.cli.common import (
    PartitionsOpt,
    app,
    check_ha_options,
    check_placement,
    err,
    fail,
    given,
    known_name,
    load,
    names,
    print_json,
    progress,
    spark_replay_notes,
)
from controller.cli.replays import (
    BatchesOpt,
    InputOpt,
    MasterOpt,
    PartitionerOpt,
    ScaleOpt,
    WarmupOpt,
    check_input_flags,
    note_global_step,
    note_unread_params,
)
from controller.cli.resources import check_spark_run
from controller.cli.tables import SPARK_KEYS, SUMMARY_KEYS, adaptation_keys, show, table
from controller.scenario import ScenarioFile
from partitioners.registry import NAMES as PARTITIONERS

# compare's Spark options (it keeps no working directory: every run's is temporary)
SPARK_ONLY = ("master", "batches", "partitioner", "partitions", "scale", "warmup_batches")
# on Spark the table leaves out what a batch replay does not measure or cannot change there
SPARK_TABLE_KEYS = ("migrations", "dropped_fraction", "lost_tuples", *SPARK_KEYS)


def compare_default(sc: ScenarioFile) -> str:
    """``compare``'s methods without ``--placement``: the LLF baseline, correlation-oneway, and
    the scenario's own method (what ``replay`` runs) when it is neither of them nor
    least-loaded (LLF with failover).

    >>> from controller.scenario import load_scenario
    >>> compare_default(load_scenario("scenarios/bursty-rod.yaml"))
    'llf,correlation-oneway,rod'
    >>> compare_default(load_scenario("scenarios/anticorrelated-diurnal.yaml"))
    'llf,correlation-oneway'
    """
    own = sc.controller.placement.method
    base = ("llf", "correlation-oneway")
    return ",".join(base if own in (*base, "least-loaded") else (*base, own))


PlacementsOpt = Annotated[
    str | None,
    typer.Option(
        help="comma-separated placement methods (default llf,correlation-oneway and the "
        "scenario's own method, what replay runs, when it is another); with --ha, the one "
        "placement every policy runs on (default: the scenario's)"
    ),
]
SeedsOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="runs per method, seeds scenario.seed .. (on Spark: an input drawn from each, the "
        "methods' order reversed on every other; the figures are the means)",
    ),
]
HaOpt = Annotated[
    str | None,
    typer.Option(
        help="simulator: compare availability policies instead: upstream,passive,active,none"
    ),
]
SheddingsOpt = Annotated[
    str | None, typer.Option(help="comma-separated shedding methods: lp,fit,uniform,local,none")
]
SubstrateOpt = Annotated[
    str,
    typer.Option(
        help="sim (the simulator) or spark: each method replayed on Spark, one after the "
        "other in one session, over the same input, after an unreported 2-batch warm-up"
    ),
]
JsonListOpt = Annotated[
    bool, typer.Option("--json", help="print a JSON list, one object per method")
]


@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    placement: PlacementsOpt = None,
    seeds: SeedsOpt = 1,
    ha: HaOpt = None,
    shedding: SheddingsOpt = None,
    substrate: SubstrateOpt = "sim",
    master: MasterOpt = "local[2]",
    batches: BatchesOpt = 10,
    partitioner: PartitionerOpt = None,
    partitions: PartitionsOpt = 2,
    scale: ScaleOpt = 0.1,
    warmup_batches: WarmupOpt = 1,
    input_dir: InputOpt = None,
    json_out: JsonListOpt = False,
) -> None:
    """Replay several placement (or shedding) methods on the same seeds, side by side.

    With --shedding, each placement runs under each shedding method (one row per pair).
    With --substrate spark, each runs on Spark over the same input (the scenario's workload,
    or --input's imported events), its output checked against the reference.

    Examples: trimtab compare scenarios/anticorrelated-diurnal.yaml --placement llf,correlation-oneway
              trimtab compare scenarios/overload-ramp.yaml --placement least-loaded --shedding lp,uniform,local,none
              trimtab compare scenarios/spark-anticorrelated.yaml --substrate spark --placement hash,llf,correlation-twoway --batches 34 --warmup-batches 20
    """
    from controller.compare import HA_POLICIES, compare, compare_ha
    from controller.shedding import METHODS as SHEDDING

    sc = load(scenario)
    places = names(placement or compare_default(sc), "--placement")
    for method in places:
        check_placement(sc, method)
    _check_compare_flags(ctx, sc, substrate, partitioner, input_dir, master)
    if ha is not None:
        policies = names(ha, "--ha", HA_POLICIES)
        check_ha_options(sc, placement, places, shedding)
    sheds = None if shedding is None else names(shedding, "--shedding", SHEDDING)
    note_unread_params(sc, places, "--placement" if placement else "compare's default")
    try:
        if substrate == "spark":
            spark_replay_notes(sc, partitions, None if input_dir else batches)
            note_global_step(sc, places, None if input_dir else batches, ctx.params)
            kw = {k: ctx.params[k] for k in (*SPARK_ONLY, "input_dir", "seeds")}
            rows = _compare_spark(sc, places, sheds, not json_out, **kw)
        elif ha is not None:
            rows = compare_ha(sc, policies, seeds, placement and places[0])
        else:
            rows = compare(sc, places, seeds, sheds)
    except ValueError as e:
        fail(str(e))
    if json_out:
        print_json(rows)
    else:
        _show_compared(rows, ha is not None, shedding is not None, substrate == "spark")


def _check_compare_flags(
    ctx: typer.Context,
    sc: ScenarioFile,
    substrate: str,
    partitioner: str | None,
    input_dir: Path | None,
    master: str,
) -> None:
    """Exit 2 naming a flag the substrate would ignore (the Spark options on the simulator;
    ``--ha``, the simulator's, and ``--seeds`` with ``--input`` on Spark) or a bad partitioner
    or input; 3 for a standalone master nothing listens at."""
    if partitioner is not None:
        known_name(partitioner, "--partitioner", PARTITIONERS)
    if substrate == "spark":
        if given(ctx, "seeds") and input_dir is not None:
            fail("--seeds: draws generated inputs; --input replays the imported events")
        if given(ctx, "ha"):
            fail(
                "--ha: the simulator's comparison of availability policies (on Spark, faults "
                "are injected into a running pipeline: trimtab inject)"
            )
        check_spark_run(master, sc, ctx.params)
    check_input_flags(ctx, sc, substrate, input_dir, SPARK_ONLY)


def _compare_spark(
    sc: ScenarioFile,
    places: list[str],
    sheds: list[str] | None,
    show_progress: bool,
    **kw: Any,
) -> list[dict[str, Any]]:
    """The Spark comparison, with a progress bar (the run, batches done of total) on a
    terminal."""
    from controller.spark_compare import compare_spark

    prog = progress(show_progress)
    if prog is None:
        return compare_spark(sc, places, sheds, **kw)
    with prog:
        task = prog.add_task("spark compare: warm-up", total=None)

        def step(label: str, done: int, total: int) -> None:
            prog.update(task, description=f"spark compare: {label}", completed=done, total=total)

        return compare_spark(sc, places, sheds, progress=step, **kw)


def _show_compared(rows: list[dict[str, Any]], ha: bool, shedding: bool, spark: bool) -> None:
    """``compare``'s table: availability policies, placement x shedding pairs, or placements."""
    from controller.compare import DPC_KEYS, HA_KEYS

    if ha:
        dpc = DPC_KEYS if any("tentative_fraction" in r for r in rows) else ()
        t = table(rows, (*HA_KEYS, *dpc, "mean_latency", "throughput"), "ha")
        t.title = f"availability policies, placement {rows[0]['placement']}"
        show(t)
        return
    label = "placement"
    if shedding:
        for r in rows:
            r["method"] = f"{r['placement']} / {r['shedding']}"
        label = "method"
    if not spark:
        keys = ("weighted_throughput",) if shedding else ()
        show(table(rows, (*keys, *SUMMARY_KEYS, *adaptation_keys(rows)), label))
        return
    t = table(rows, SPARK_TABLE_KEYS, label)
    t.title = f"on Spark ({rows[0]['master']}, {rows[0]['partitioner']} routing)"
    t.caption = same_plans_line(rows, label)
    show(t)
    n = int(rows[0]["seeds"])
    if n == 1:
        err.print(
            "note: one run per method, in the order named, over the same input, after an "
            "unreported warm-up; batch durations vary between runs of one method (two runs' "
            "batch p99 by 2% to 16% in BENCHMARKS.md's Policies on Spark): --seeds 2 or more "
            "runs each again, in the reverse order, and more --batches steady the figures"
        )
    else:
        err.print(
            f"note: the mean of {n} runs per method, each over the input of one seed, the "
            "order named reversed on every other, after an unreported warm-up; --json lists "
            "each run's figures under runs"
        )


def same_plans_line(rows: list[dict[str, Any]], label: str) -> str | None:
    """A line naming the methods that ran the same plans on Spark (``same_plans_as``): their
    batch durations differ, but by the engine's run-to-run spread, not by the method.

    >>> same_plans_line([{"placement": "llf", "same_plans_as": ["rod"]}, {"placement": "hash",
    ...     "same_plans_as": []}, {"placement": "rod", "same_plans_as": ["llf"]}], "placement")
    'the same plans: llf = rod (every timed batch routed and dropped alike, on every input): their figures differ by run-to-run spread, not by the method'
    >>> same_plans_line([{"placement": "llf", "same_plans_as": []}], "placement") is None
    True
    """
    seen: set[str] = set()
    groups = []
    for r in rows:
        if r[label] not in seen and r.get("same_plans_as"):
            groups.append(" = ".join([r[label], *r["same_plans_as"]]))
            seen.update([r[label], *r["same_plans_as"]])
    if not groups:
        return None
    return (
        f"the same plans: {'; '.join(groups)} (every timed batch routed and dropped alike, on "
        "every input): their figures differ by run-to-run spread, not by the method"
    )
