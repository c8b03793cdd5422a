"""Offline analysis, no substrate: static placements, shedding plans at one tick,
partitioners on a key stream."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from controller.cli.common import (
    app,
    check_spark_query,
    fail,
    finite,
    load,
    names,
    out_file,
    outside_workdir,
    print_json,
)
from controller.cli.tables import show, table


@app.command("place")
def place_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    algorithm: Annotated[
        str, typer.Option(help="comma-separated: rod,llf,connected,random,correlation")
    ] = "rod,llf,connected,random,correlation",
    points: Annotated[int, typer.Option(min=256, help="quasi-Monte Carlo points")] = 2**14,
    json_out: Annotated[bool, typer.Option("--json", help="print a JSON list")] = False,
) -> None:
    """Static placements with their feasible-set ratio, node mean loads and inter-node arcs.

    Each method places with the scenario's controller.placement.params it reads.

    Example: trimtab place scenarios/bursty-rod.yaml --algorithm rod,llf
    """
    from controller.compare import place
    from core.footprint import machine_memory, points_problem

    sc = load(scenario)
    streams, nodes = len(sc.streams), len(sc.cluster.nodes)
    if problem := points_problem(points, streams, nodes, machine_memory()):
        fail(problem)
    try:
        rows = place(sc, names(algorithm, "--algorithm"), points)
    except ValueError as e:
        fail(str(e))
    if json_out:
        print_json(rows)
        return
    for r in rows:  # the node mean loads, as their spread (the JSON lists each node's)
        r["node_mean_load_max"] = max(r["node_mean_loads"])
        r["node_mean_load_min"] = min(r["node_mean_loads"])
    keys = ("feasible_set_ratio", "feasible_set_error", "min_plane_distance")
    show(
        table(
            rows,
            (*keys, "node_mean_load_max", "node_mean_load_min", "inter_node_arcs"),
            "algorithm",
        )
    )


@app.command("shed")
def shed_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    at: Annotated[
        float | None,
        typer.Option(callback=finite, help="input rates at this time (s; default 0, the start)"),
    ] = None,
    peak: Annotated[bool, typer.Option(help="input rates at the peak total rate")] = False,
    method: Annotated[
        str, typer.Option(help="comma-separated: lp,fit,uniform,local,none")
    ] = "lp,fit,uniform,local",
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list, one object per method")
    ] = False,
) -> None:
    """Shedding plans for the scenario's placement: keep fractions, weighted output, node loads, shadow prices.

    Example: trimtab shed scenarios/seed-shedding-2node.yaml --method lp,uniform,local
    """
    from controller.compare import shed_at
    from controller.shedding import METHODS as SHEDDING

    sc = load(scenario)
    try:
        rows = shed_at(sc, names(method, "--method", SHEDDING), at=at, peak=peak)
    except ValueError as e:
        fail(str(e))
    if json_out:
        print_json(rows)
        return
    when = "the peak total rate" if peak else "the start" if at is None else f"--at {at:g}"
    t = Table(title=f"shedding plans at {rows[0]['time_s']:g} s ({when})")
    for c in ("method", "keep", "weighted output", "node loads", "shadow prices", "solve ms"):
        t.add_column(c, overflow="fold")
    for x in rows:
        t.add_row(
            x["method"],
            ", ".join(f"{k}={v:.4g}" for k, v in x["keep"].items()),
            f"{x['objective']:.6g}",
            ", ".join(f"{k}={v:.3g}" for k, v in x["node_loads"].items()),
            ", ".join(f"{k}={v:.3g}" for k, v in x["shadow_prices"].items()),
            f"{x['solve_time_s'] * 1000:.1f}",
        )
    show(t)


PARTITION_KEYS = (
    "imbalance_mean",
    "imbalance_p95",
    "fragmentation_mean",
    "fragmentation_max",
    "aggregation_cost_mean",
    "routing_us_per_key",
)


TraceOpt = Annotated[
    Path | None,
    typer.Option(
        help="events instead of the scenario: CSV, Parquet or JSON lines with a key column "
        "(non-negative integers, or strings hashed as input import hashes them) and a time "
        "column (seconds) that sets the windows"
    ),
]


ZipfOpt = Annotated[
    float | None,
    typer.Option(callback=finite, min=0.0, help="override the key distribution with Zipf(S)"),
]
WindowOpt = Annotated[
    float,
    typer.Option(callback=finite, min=0.001, help="window length in seconds (of the trace's ts)"),
]


@app.command("partition")
def partition_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    partitioners: Annotated[
        str, typer.Option(help="comma-separated partitioner names")
    ] = "hash,shuffle,pkg,dchoices,wchoices,cg,capa,ecapa,dalton,prompt",
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=4096,
            help="workers, at most 4096 (the most partitions a keyed stage has); default: the "
            "scenario's nodes",
        ),
    ] = None,
    zipf: ZipfOpt = None,
    keys: Annotated[int | None, typer.Option(min=1, help="override the key-space size")] = None,
    trace: TraceOpt = None,
    key_col: Annotated[str, typer.Option(help="the trace's key column")] = "key",
    ts_col: Annotated[str, typer.Option(help="the trace's time column (seconds)")] = "ts",
    window_rows: Annotated[
        int | None, typer.Option(min=1, help="a trace without its time column: windows of N rows")
    ] = None,
    seconds: Annotated[
        float | None, typer.Option(callback=finite, min=1.0, help="replay only the first S seconds")
    ] = None,
    window_s: WindowOpt = 1.0,
    sources: Annotated[int, typer.Option(min=1, help="source instances per partitioner")] = 1,
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list, one object per partitioner")
    ] = False,
) -> None:
    """Replay the scenario's key stream through several partitioners side by side (no Spark).

    Example: trimtab partition scenarios/zipf-moderate.yaml --partitioners hash,pkg --workers 10
    """
    from controller.partition import partition_replay
    from partitioners.registry import NAMES, VARIANTS

    sc = load(scenario)
    synthetic = {"seconds": seconds, "zipf": zipf, "keys": keys}  # the scenario's key stream
    read = {"trace": trace, "window_rows": window_rows, "key_col": key_col, "ts_col": ts_col}
    try:
        rows = partition_replay(
            sc,
            names(partitioners, "--partitioners", NAMES + VARIANTS),
            workers,
            window_s,
            sources,
            **synthetic,
            **read,
        )
    except ValueError as e:
        fail(str(e))
    if json_out:
        print_json(rows)
        return
    show(table(rows, PARTITION_KEYS, "partitioner"))


@app.command("calibrate")
def calibrate_cmd(
    workdir: Annotated[Path, typer.Argument(help="a Spark run's working directory")],
    out: Annotated[
        Path | None, typer.Option(help="write the overlay here (default: print it)")
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option(help="the scenario the run replayed (default: the run's run.json)"),
    ] = None,
    skip: Annotated[
        int, typer.Option(min=0, help="first batches left out (executor start-up)")
    ] = 1,
) -> None:
    """Fit per-row and fixed per-batch costs from a Spark run into a simulator overlay.

    --out replaces an earlier calibration and refuses any other existing file.

    Example: trimtab calibrate work/ --out calibration.yaml; then
             trimtab replay SCENARIO --calibration calibration.yaml
    """
    from controller.calibration import calibrate, is_replaceable, overlay_yaml, rough_fit

    if workdir.is_file():
        fail(f"WORKDIR: {workdir} is a file, not a directory")
    if not workdir.is_dir():
        fail(f"WORKDIR: {workdir} does not exist")
    sc = load(scenario) if scenario is not None else None
    if sc is not None:  # a query the pipeline cannot run was named without the flag
        check_spark_query(sc, scenario, "--scenario")
    if out is not None:
        out_file(out, "--out")
        outside_workdir(out, workdir, "--out")
        if not is_replaceable(out):
            fail(
                f"--out: {out} exists and is not a trimtab calibration (its first line is not "
                "'# trimtab calibration of ...'): name a new file, or remove this one first"
            )
    try:
        ov = calibrate(workdir, sc, skip)
    except ValueError as e:
        fail(str(e))
    text = overlay_yaml(ov)
    if (note := rough_fit(ov)) is not None:
        print(f"note: {note}", file=sys.stderr)
    if out is None:
        print(text, end="")
        return
    earlier = out.exists() and out.stat().st_size > 0
    try:
        out.write_text(text)
    except OSError as e:
        fail(f"--out: cannot write {out}: {(e.strerror or str(e)).lower()}")
    print(f"wrote {out}" + (" (it held an earlier calibration, now replaced)" if earlier else ""))
