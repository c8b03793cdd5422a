"""The demo, the main job ``make demo`` runs: trimtab against plain hash routing on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controller.cli.common import (
    app,
    check_placement,
    err,
    fail,
    finite,
    known_name,
    load,
    writable_dir,
)
from controller.cli.replays import SHIPPED, check_substrate_flags, note_unread_params
from controller.cli.resources import check_spark_run
from controller.cli.tables import SUMMARY_KEYS, show, table
from partitioners.registry import NAMES as PARTITIONERS

DemoScenarioOpt = Annotated[
    Path | None,
    typer.Option(help="scenario to replay", show_default="scenarios/seed-groupby-window.yaml"),
]


@app.command()
def demo(
    ctx: typer.Context,
    scenario: DemoScenarioOpt = None,
    substrate: Annotated[str, typer.Option(help="spark (the main job) or sim")] = "spark",
    master: Annotated[str, typer.Option(help="Spark master")] = "local-cluster[2,1,1024]",
    batches: Annotated[int, typer.Option(min=2, help="micro-batches per run")] = 12,
    scale: Annotated[float, typer.Option(callback=finite, min=1e-4, help="input rate scale")] = 0.5,
    partitioner: Annotated[str, typer.Option(help="trimtab's hot-key partitioner")] = "wchoices",
    placement: Annotated[str, typer.Option(help="trimtab's placement")] = "correlation-oneway",
    report: Annotated[Path, typer.Option(help="report directory")] = Path("reports/demo"),
) -> None:
    """The main job: replay the seed group-by-window query on Spark, trimtab vs plain hash routing.

    Example: trimtab demo
    """
    from controller.report import write_report

    sc = load(scenario or SHIPPED / "seed-groupby-window.yaml")  # from any directory
    check_substrate_flags(
        ctx, substrate, ("master", "batches", "scale", "partitioner", "placement")
    )
    writable_dir(report, "--report")
    known_name(partitioner, "--partitioner", PARTITIONERS)
    if substrate != "sim":  # the simulator's demo runs its own placements
        check_placement(sc, placement)
        check_spark_run(master, sc, ctx.params)
        if placement is not None:
            note_unread_params(sc, [placement])
    if substrate == "sim":
        from controller.placements import DEMO_PLACEMENTS
        from controller.replay import replay_sim

        runs = [replay_sim(sc, placement=name) for name in DEMO_PLACEMENTS]
        for r, name in zip(runs, DEMO_PLACEMENTS, strict=True):
            r.summary["run"] = name
        keys = SUMMARY_KEYS
        best = min(runs, key=lambda r: r.summary["mean_latency"])
    else:
        from controller.demo import DEMO_KEYS, run_demo

        try:
            runs = run_demo(sc, master, batches, scale, partitioner, placement)
        except ValueError as e:
            fail(str(e))
        keys = DEMO_KEYS
        best = runs[-1]
    show(table([r.summary for r in runs], keys, "run"))
    if substrate != "sim":
        h, t = runs[0].summary, runs[1].summary
        p50 = [
            f"{x:.2f} s" if x is not None else "n/a"
            for x in (t["batch_duration_p50"], h["batch_duration_p50"])
        ]
        err.print(
            f"trimtab: batch p50 {p50[0]} vs hash {p50[1]}; "
            f"partition rows {t['partition_rows']} vs {h['partition_rows']}",
            soft_wrap=True,  # one line; the terminal wraps it, not rich at 80 columns
        )
    write_report(best, report, comparison=[r.summary for r in runs])
    err.print(f"report written to {report}/report.html")
