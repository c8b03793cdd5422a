"""``pipeline verify``: is a pipeline's committed output exactly the reference? Read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controller.cli.common import fail, load, print_json
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
    from spark_adapter.query import compile_query
    from spark_adapter.verification import verify_workdir

    sc = load(scenario)
    if not workdir.is_dir():
        fail(f"--workdir: {workdir} is not a directory")
    if input is not None and not input.is_dir():
        fail(f"--input: {input} is not a directory")
    try:
        out = verify_workdir(workdir, compile_query(sc), sc.controller.shedding.window_drops, input)
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
