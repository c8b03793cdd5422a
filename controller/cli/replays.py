"""Replays: a scenario end to end with the controller in the loop, and methods side by side."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from controller.cli.common import (
    PartitionsOpt,
    app,
    check_input_log,
    check_placement,
    err,
    fail,
    finite,
    given,
    known_name,
    load,
    print_json,
    progress,
    spark_replay_notes,
    writable_dir,
)
from controller.cli.resources import check_spark_run, claim_workdir
from controller.cli.tables import (
    PREDICTED_KEYS,
    SPARK_KEYS,
    SUMMARY_KEYS,
    adaptation_keys,
    show,
    table,
)
from controller.expectations import check_expectations, unmet
from controller.scenario import ScenarioFile
from partitioners.registry import NAMES as PARTITIONERS

ScenarioArg = Annotated[Path, typer.Argument(help="scenario file (YAML)")]
MasterOpt = Annotated[
    str,
    typer.Option(help="Spark master: local[2], local-cluster[2,1,1024] or spark://127.0.0.1:7077"),
]
PlacementOpt = Annotated[
    str | None, typer.Option(help="placement method; default from the scenario")
]
SeedOpt = Annotated[
    int | None, typer.Option(min=0, help="workload seed; default from the scenario")
]
SheddingOpt = Annotated[str | None, typer.Option(help="lp, fit, uniform, local or none")]
BatchesOpt = Annotated[
    int, typer.Option(min=1, help="Spark: micro-batches (input segments) to replay")
]
PartitionerOpt = Annotated[
    str | None,
    typer.Option(
        help="Spark: hot-key partitioner, routing by its own rule: "
        + ", ".join(PARTITIONERS)
        + "; default from the scenario"
    ),
]
ScaleOpt = Annotated[
    float, typer.Option(callback=finite, min=1e-4, help="Spark: input rate scale (fit the machine)")
]
WorkdirOpt = Annotated[
    Path | None, typer.Option(help="Spark: working directory (input log, plans, output)")
]
WarmupOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Spark: batches left out of the timing statistics (steady state: until the "
        "first full window closes)",
    ),
]
ReportOpt = Annotated[
    Path | None, typer.Option(help="write CSV series, PNG plots and report.html here")
]
InputOpt = Annotated[
    Path | None,
    typer.Option(
        "--input",
        help="Spark: replay the events imported into this workdir (trimtab input import) "
        "instead of generating the scenario's workload; --batches and --scale do not apply",
    ),
]
KeepOpt = Annotated[
    bool, typer.Option(help="Spark: keep the temporary working directory (input, plans, sink)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]


@app.command()
def replay(
    ctx: typer.Context,
    scenario: ScenarioArg,
    substrate: Annotated[str, typer.Option(help="sim (the simulator) or spark")] = "sim",
    placement: PlacementOpt = None,
    ticks: Annotated[int | None, typer.Option(min=1, help="stop after N ticks")] = None,
    seed: SeedOpt = None,
    shedding: SheddingOpt = None,
    master: MasterOpt = "local[2]",
    batches: BatchesOpt = 10,
    partitioner: PartitionerOpt = None,
    partitions: PartitionsOpt = 2,
    scale: ScaleOpt = 0.1,
    workdir: WorkdirOpt = None,
    warmup_batches: WarmupOpt = 1,
    input_dir: InputOpt = None,
    keep_workdir: KeepOpt = False,
    report: ReportOpt = None,
    calibration: Annotated[
        Path | None,
        typer.Option(help="simulator: a calibration overlay (trimtab calibrate) to apply"),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Replay a scenario end to end with the controller in the loop and print a summary.

    Example: trimtab replay scenarios/anticorrelated-diurnal.yaml --json
    """
    sc = load(scenario)
    _check_replay_flags(ctx, sc, substrate, partitioner, input_dir, report, master)
    sc, overlay = _calibrated(sc, calibration, substrate)
    if placement is not None:  # every input checked: what the override leaves out
        note_unread_params(sc, [placement])
    try:
        if substrate == "spark":
            from controller.spark_replay import replay_spark

            res = _replay_spark_cli(
                replay_spark,
                not json_out,
                sc if seed is None else sc.model_copy(update={"seed": seed}),  # draws the input
                master=master,
                batches=batches,
                placement=placement,
                partitioner=partitioner,
                shedding=shedding,
                partitions=partitions,
                scale=scale,
                workdir=workdir,
                warmup_batches=warmup_batches,
                input_dir=input_dir,
                keep_workdir=keep_workdir or workdir is not None,
                calibration=overlay,
            )
        else:
            res = _replay_sim(sc, placement, ticks, seed, shedding, not json_out)
    except ValueError as e:
        fail(str(e))
    _finish(res, report, json_out, sc)


def _replay_spark_cli(
    run: Any, show_progress: bool, sc: ScenarioFile, partitions: int = 2, **kw: Any
) -> Any:
    """A Spark replay with a progress bar (batches done of total, rate, time left) on a
    terminal."""
    batches = None if kw.get("input_dir") else kw.get("batches")
    spark_replay_notes(sc, partitions, batches)
    note_global_step(sc, [kw.get("placement") or sc.controller.placement.method], batches, kw)
    claim_workdir(kw.get("workdir"))  # held to the end: two replays on one W raced its check
    kw["partitions"] = partitions
    prog = progress(show_progress)
    if prog is None:
        return run(sc, **kw)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:.2f} batches/s" if task.speed else "-- batches/s")

    cols = (
        TextColumn(f"spark replay {sc.name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batches"),
        Rate(),
        TimeRemainingColumn(),
    )
    with Progress(*cols, console=err, transient=True) as bar:
        task = bar.add_task("batches", total=None)
        return run(
            sc, progress=lambda done, total: bar.update(task, completed=done, total=total), **kw
        )


def _calibrated(sc: ScenarioFile, path: Path | None, substrate: str) -> tuple[ScenarioFile, Any]:
    """The scenario with a calibration overlay applied (the simulator) or as it is (Spark,
    where the overlay calibrates the controller's load model), and the overlay (None
    without one); exit 2 naming what is wrong."""
    from controller.calibration import apply_overlay, load_overlay

    if path is None:
        return sc, None
    try:
        overlay = load_overlay(path)
        calibrated = apply_overlay(sc, overlay)
    except ValueError as e:
        fail(f"--calibration: {e}")
    return (calibrated if substrate == "sim" else sc), overlay


SHIPPED = Path(__file__).resolve().parents[2] / "scenarios"  # the repository's scenarios
SPARK_ONLY = ("master", "batches", "partitioner", "partitions", "scale", "workdir")
SPARK_ONLY += ("warmup_batches", "keep_workdir")


def note_unread_params(sc: ScenarioFile, methods: list[str], flag: str = "--placement") -> None:
    """Say on stderr which of the scenario's ``controller.placement.params`` a ``flag``
    override leaves out: the file's method reads them all (checked at load), another method
    may read none of them, and its run would otherwise look like it used them."""
    from controller.placement_params import said_params, unread_params

    p = sc.controller.placement
    left: dict[tuple[str, ...], list[str]] = {}
    for m in methods:
        if m != p.method and (unread := tuple(unread_params(m, p.initial, p.params))):
            left.setdefault(unread, []).append(m)
    for unread, ms in left.items():
        said, them = said_params({k: p.params[k] for k in unread})
        one = len(ms) == 1
        print(
            f"note: {flag} {', '.join(ms)} {'does' if one else 'do'} not read "
            f"controller.placement.params {said} (set for {p.method}): "
            f"{'its run leaves' if one else 'their runs leave'} {them} out",
            file=sys.stderr,
        )


def _check_substrate(substrate: str) -> None:
    if substrate not in ("sim", "spark"):
        fail(f"--substrate: {substrate!r} is not a substrate (use 'sim' or 'spark')")


def check_substrate_flags(
    ctx: typer.Context, substrate: str, spark_only: tuple[str, ...] = SPARK_ONLY
) -> None:
    """Exit 2 naming a flag the chosen substrate would ignore: the Spark replay's on the
    simulator, ``--ticks`` on Spark (which replays ``--batches``), and with ``--input`` (the
    imported events are the input) the generated input's ``--batches``, ``--scale``, ``--seed``."""
    _check_substrate(substrate)
    for p in (*spark_only, "ticks", "seed"):
        if p not in ctx.params or not given(ctx, p):
            continue
        if p == "seed" and ctx.params.get("input_dir") is None:
            continue
        flag = "--" + p.replace("_", "-")
        if substrate == "sim" and p in spark_only:
            fail(f"{flag}: a Spark replay's option (add --substrate spark)")
        if substrate == "spark" and p == "ticks":
            fail(f"{flag}: the simulator's option (a Spark replay runs --batches)")
        if ctx.params.get("input_dir") is not None and p in ("batches", "scale", "seed"):
            fail(f"{flag}: shapes a generated input; --input replays the imported events")


def _check_replay_flags(
    ctx: typer.Context,
    sc: ScenarioFile,
    substrate: str,
    partitioner: str | None,
    input_dir: Path | None,
    report: Path | None,
    master: str,
) -> None:
    """Exit 2 naming the flag for a bad substrate, partitioner, input, report path, master or
    scale (3 for a standalone master nothing listens at), or one that would be ignored."""
    _check_substrate(substrate)
    if partitioner is not None:
        known_name(partitioner, "--partitioner", PARTITIONERS)
    check_placement(sc, ctx.params.get("placement"))
    if (shed := ctx.params.get("shedding")) is not None:
        from controller.shedding import METHODS as SHEDDING

        if "," in shed:
            fail(f"--shedding: one method, got {shed!r} (`trimtab compare` runs several)")
        known_name(shed, "--shedding", SHEDDING)
    if substrate == "spark":  # the generated input's segments, unless --input gives them
        check_spark_run(master, sc, ctx.params)
    check_input_flags(ctx, sc, substrate, input_dir)
    if report is not None:
        writable_dir(report, "--report")


def _replay_sim(
    sc: ScenarioFile,
    placement: str | None,
    ticks: int | None,
    seed: int | None,
    shedding: str | None,
    show_progress: bool,
) -> Any:
    """A simulator replay, with a progress bar on a terminal."""
    from controller.replay import replay_sim

    if ticks is not None and ticks > sc.ticks:
        err.print(f"note: --ticks {ticks} is beyond the scenario's {sc.ticks}; replaying those")

    prog = progress(show_progress)
    if prog is None:
        return replay_sim(sc, placement=placement, ticks=ticks, seed=seed, shedding=shedding)
    with prog:
        task = prog.add_task(f"replay {sc.name}", total=sc.ticks if ticks is None else ticks)
        return replay_sim(
            sc,
            placement=placement,
            ticks=ticks,
            seed=seed,
            progress=lambda t, _n: prog.update(task, completed=t),
            shedding=shedding,
        )


def _finish(res: Any, report: Path | None, json_out: bool, sc: ScenarioFile) -> None:
    """Check the scenario's ``expect:`` block, write the report if asked, print JSON or the
    summary table; exit 4 naming each expectation missed."""
    name = sc.name
    checks = res.summary["expectations"] = check_expectations(sc.expect, res.summary)
    if report is not None:
        from controller.report import write_report

        write_report(res, report)
        res.summary["report"] = str(report)
    if json_out:
        print_json(res.summary)
    else:
        row = {**res.summary, "scenario": name}
        more = (*SPARK_KEYS, *PREDICTED_KEYS)  # a Spark run's figures, a calibrated prediction
        keys = SUMMARY_KEYS + tuple(k for k in more if k in res.summary)
        show(table([row], keys + adaptation_keys([row]), "scenario"))
        if report is not None:
            err.print(f"report written to {report}/report.html")
    failed = unmet(checks)
    if failed:
        fail(f"{name}: expectation not met: {'; '.join(failed)}", code=4)
    if checks and not json_out:
        err.print(f"expectations met: {', '.join(c['expectation'] for c in checks)}")


def check_input_flags(
    ctx: typer.Context,
    sc: ScenarioFile,
    substrate: str,
    input_dir: Path | None,
    spark_only: tuple[str, ...] = SPARK_ONLY,
) -> None:
    """Exit 2 for ``--input`` off Spark or not a directory, a flag the substrate would ignore
    (``check_substrate_flags``), a ``--warmup-batches`` given that leaves fewer than 2 of
    ``--batches`` to time (the summary would then time every batch, the warm-up too, as it
    does for 2 batches), or an imported log that cannot be read."""
    if input_dir is not None and substrate != "spark":
        fail("--input: imported events replay on Spark only (add --substrate spark)")
    if input_dir is not None and not input_dir.is_dir():
        fail(f"--input: {input_dir} is not a directory")
    check_substrate_flags(ctx, substrate, spark_only)
    warm, batches = ctx.params.get("warmup_batches", 1), ctx.params.get("batches", 0)
    if given(ctx, "warmup_batches") and input_dir is None and warm > batches - 2:
        fail(
            f"--warmup-batches: {warm} of --batches {batches} leaves fewer than 2 batches to "
            f"time; give --batches {warm + 2} or more"
        )
    if input_dir is not None:  # its segments read once the flags are known to apply
        check_input_log(input_dir, "--input", sc)


def note_global_step(
    sc: ScenarioFile, places: list[str], batches: int | None, kw: dict[str, Any]
) -> None:
    """Say on stderr which correlation methods a Spark replay of ``batches`` batches times
    under their initial plan (LLF's) for some or all of its timed batches: the global step
    waits for a window of ``controller.window_k`` samples, one a batch
    (``global_step_batch``). Not for an imported log (``batches`` None: its span is the
    log's) nor when ``controller.placement.initial`` makes the first plan (no global step)."""
    from controller.placements import Correlation, placement_method
    from controller.spark_replay import global_step_batch

    if batches is None or sc.controller.placement.initial:
        return
    late = [m for m in places if isinstance(placement_method(m, {}), Correlation)]
    first, warm = global_step_batch(sc.controller.window_k), int(kw.get("warmup_batches", 1))
    warm = warm if batches > warm + 1 else 0  # a run too short for its warm-up times all
    before = min(first, batches) - warm
    if not late or before <= 0:
        return
    who = ", ".join(late)
    why = (
        f"the global step waits for a window of {sc.controller.window_k} load samples "
        f"(controller.window_k), one a batch, and its plan is pinned from batch id {first}"
    )
    fix = f"--batches {first + 10} --warmup-batches {first} times 10 batches of it"
    if batches >= first + 2:  # 2 batches to time after the warm-up: the flag's own floor
        fix = f"--warmup-batches {first} times its plan only"
    if first >= batches:
        err.print(
            f"note: {who} {'runs its' if len(late) == 1 else 'run their'} initial plan (LLF's) "
            f"in all {batches} batches: {why}; {fix}"
        )
    else:
        err.print(
            f"note: {who}: {before} of the {batches - warm} timed batches run the initial plan "
            f"(LLF's): {why}; {fix}"
        )
