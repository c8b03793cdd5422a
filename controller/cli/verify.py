"""``pipeline verify``: is a pipeline's committed output exactly the reference? Read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controller.cli.common import (
    check_input_log,
    fail,
    load,
    out_file,
    outside_workdir,
    print_json,
)
from controller.cli.spark import pipeline_app


@pipeline_app.command("verify")
def pipeline_verify(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML) the pipeline ran")],
    workdir: Annotated[Path, typer.Option(help="the pipeline's working directory")],
    input: Annotated[
        Path | None,
        typer.Option(
            help="the whole input log, when the pipeline's retention trimmed its own"
            " (e.g. regenerated with `trimtab input generate`)"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Check exactly-once after a run: the committed output against the reference computed
    without Spark from the input, each batch's pinned plan and its drops. Writes nothing.
    Exit 0 when equal, 1 when not (the first difference is named).

    Example: trimtab pipeline verify scenarios/spark-overload-ramp.yaml --workdir pipe
    """
    from spark_adapter.external import workdir_mismatch
    from spark_adapter.query import compile_query
    from spark_adapter.verification import verify_workdir

    sc = load(scenario)
    if not workdir.is_dir():
        fail(f"--workdir: {workdir} is not a directory")
    if input is not None and not input.is_dir():
        fail(f"--input: {input} is not a directory")
    check_input_log(input or workdir / "input", "--input" if input else "--workdir", sc)
    q = compile_query(sc)
    # another pipeline's scenario "differs" from every output: say which one it is
    if problem := workdir_mismatch(workdir, list(q.sides), None, q.key_groups):
        fail(f"{scenario}: {problem.removeprefix('substrate.scenario: ')}")
    try:
        out = verify_workdir(workdir, q, sc.controller.shedding.window_drops, input)
    except ValueError as e:
        fail(str(e))
    if as_json:
        print_json(out)
    elif out["output_matches_reference"]:
        print(
            f"ok: {out['batches_committed']} committed batches, {out['rows_out']} output rows"
            f" equal the reference ({out['rows_in']} input rows, {out['rows_dropped']} shed)"
        )
    else:
        print(f"differs: {out['mismatch']}")
    if not out["output_matches_reference"]:
        raise typer.Exit(1)


@pipeline_app.command("results")
def pipeline_results(
    workdir: Annotated[Path, typer.Option(help="the pipeline's working directory")],
    view: Annotated[
        str,
        typer.Option(
            help="stable: final results only (output/); latest: the newest version of each "
            "(window, key), tentative (DPC, tentative/) until its correction is committed"
        ),
    ] = "latest",
    out: Annotated[
        Path | None,
        typer.Option(
            help="write the rows here: Parquet for a .parquet name, a JSON list for .json, "
            "JSON lines for .jsonl, else CSV"
        ),
    ] = None,
) -> None:
    """The committed results of a pipeline, with their status and the batch that wrote them.
    Read-only. Prints counts as JSON; --out writes the rows.

    Example: trimtab pipeline results --workdir pipe --view latest --out results.csv
    """
    from spark_adapter.actuator import PlanLog
    from spark_adapter.dpc import latest_view, read_view

    if view not in ("stable", "latest"):
        fail(f"--view: {view!r} is not stable or latest")
    if not (workdir / "planlog.sqlite").is_file():
        fail(f"--workdir: no plan log in {workdir} (not a pipeline's working directory)")
    if out is not None:
        out_file(out, "--out")
        outside_workdir(out, workdir, "--out")
    try:
        log = PlanLog(workdir / "planlog.sqlite", read_only=True)
    except ValueError as e:
        fail(str(e))
    committed = log.committed()
    log.close()
    if view == "latest":
        rows = latest_view(workdir, committed)
    else:
        rows = read_view(workdir / "output", committed).assign(status="STABLE")
    if out is not None:  # CSV text under a .parquet or .json name read as a damaged file
        suffix = out.suffix.lower()
        if suffix == ".parquet":
            rows.to_parquet(out, index=False)
        elif suffix in (".json", ".jsonl", ".ndjson"):
            rows.to_json(out, orient="records", lines=suffix != ".json")
        else:
            rows.to_csv(out, index=False)
    counts = rows["status"].value_counts().to_dict() if len(rows) else {}
    print_json({"view": view, "batches": len(committed), "rows": len(rows), "by_status": counts})
