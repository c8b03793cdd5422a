"""``trimtab input``: a pipeline's input log: generate it (at once or live), import a user's
own events, profile them."""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controller.cli.common import (
    app,
    check_input_log,
    check_not_ended,
    check_spark_query,
    fail,
    finite,
    load,
    out_file,
    print_json,
    writable_dir,
)
from controller.cli.resources import check_segments
from core.stopping import stop_on_signals

if TYPE_CHECKING:
    from spark_adapter.event_import import ImportReport

input_app = typer.Typer(
    help="A pipeline's input log: generate it, import your own events, profile them.",
    no_args_is_help=True,
)
app.add_typer(input_app, name="input")


@input_app.command("generate")
def input_generate(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    workdir: Annotated[Path, typer.Option(help="working directory; the log is WORKDIR/input")],
    segments: Annotated[
        int | None, typer.Option(min=1, help="ticks to write (default: the scenario's duration)")
    ] = None,
    scale: Annotated[
        float, typer.Option(callback=finite, min=1e-6, help="multiplies the scenario's rates")
    ] = 1.0,
    pace_s: Annotated[
        float | None,
        typer.Option(
            callback=finite,
            min=0.01,
            max=3600,  # as control.interval_s; 1e10 overflowed the wait (exit 1)
            help="write live: one segment every S seconds (until SIGTERM)",
        ),
    ] = None,
    close: Annotated[bool, typer.Option(help="mark the end of the stream when done")] = False,
    lead_s: Annotated[
        float | None,
        typer.Option(
            callback=finite,
            min=0.0,
            help="with --pace-s: land each segment S seconds before a multiple of the pace "
            "since the epoch, where a live driver's trigger of that interval fires, so each "
            "waits S for its batch in every run (default: the first at once)",
        ),
    ] = None,
) -> None:
    """Append segments to the input log, after the last one present, at once or live.

    Example: trimtab input generate scenarios/zipf-hotkey-shift.yaml --workdir w --pace-s 2 --close
    """
    from spark_adapter.source import InputLog

    if lead_s is not None and (pace_s is None or lead_s >= pace_s):
        fail(f"--lead-s: {lead_s} needs --pace-s, and must be below it (got {pace_s})")
    sc = load(scenario)
    check_spark_query(sc, scenario)  # the log feeds the Spark pipeline: no log it cannot run
    writable_dir(workdir, "--workdir")  # else its disk read as one with 0 bytes free
    check_segments(sc, scale, segments if segments is not None else sc.ticks, workdir)
    check_input_log(workdir / "input", "--workdir", sc)  # appended to: this scenario's log
    check_not_ended(workdir)  # segments after the end would never run
    log = InputLog(workdir / "input")
    if log.closed:
        fail(f"{log.root}: the log is closed (the stream has ended); use a new workdir", 1)
    start = log.next_tick()  # after the last segment, even when trimmed away
    n = segments if segments is not None else sc.ticks
    shift = log.shift()
    halt = threading.Event()
    if pace_s is not None:
        stop_on_signals(halt.set)
    rows = log.generate(sc, n, scale=scale, start=start, pace_s=pace_s, stop=halt, lead_s=lead_s)
    if close:
        log.close()
    first = start + shift  # backlog segments of a silenced stream shift the indices
    written = log.next_index() - first  # the pipeline may have trimmed some already
    print_json({"rows": rows, "segments": written, "first": first, "closed": log.closed})


@input_app.command("import")
def input_import(
    files: Annotated[list[Path], typer.Argument(help="event files: CSV, Parquet or JSON lines")],
    workdir: Annotated[Path, typer.Option(help="new working directory; the log is WORKDIR/input")],
    stream: Annotated[str, typer.Option(help="the scenario's stream these events belong to")],
    ts_col: Annotated[str, typer.Option(help="time column, seconds")] = "ts",
    key_col: Annotated[str, typer.Option(help="key column: integers or strings")] = "key",
    value_col: Annotated[
        str | None, typer.Option(help="value column (aggregated as v; default 1 per event)")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="csv, parquet or jsonl (default: by suffix)")
    ] = None,
    speedup: Annotated[
        float, typer.Option(callback=finite, help="replay X times faster than event time")
    ] = 1.0,
    tick_s: Annotated[
        float,
        typer.Option(callback=finite, min=0.001, help="seconds of (sped-up) time per segment"),
    ] = 1.0,
    max_bad_fraction: Annotated[
        float,
        typer.Option(
            callback=finite, min=0.0, max=1.0, help="refuse the import above this share of bad rows"
        ),
    ] = 0.01,
) -> None:
    """Write the input log from your own events, one segment per tick, by their time.

    Example: trimtab input import examples/events-sample.csv --workdir w --stream clicks --key-col user --value-col bytes
    """
    from spark_adapter.event_import import EventImportError, import_events
    from spark_adapter.source import InputLog

    if problem := _stream_id_problem(stream):  # as a scenario's: a blank one none can read
        fail(f"--stream: {problem} (got {stream!r})")
    writable_dir(workdir, "--workdir")  # a file there, or one that cannot be made: exit 1
    made = [d for d in (workdir / "input", workdir) if not d.exists()]  # deepest first
    try:
        rep = import_events(
            files,
            InputLog(workdir / "input"),
            stream,
            tick_s,
            ts_col=ts_col,
            key_col=key_col,
            value_col=value_col,
            fmt=fmt,
            speedup=speedup,
            max_bad_fraction=max_bad_fraction,
        )
    except EventImportError as e:
        # refused before any segment: the directories the log made for itself go too
        for d in made:
            if d.is_dir() and not any(p.is_file() for p in d.rglob("*")):
                shutil.rmtree(d, ignore_errors=True)
        fail(str(e))
    _left_out(rep, value_col)
    print_json(rep.as_dict())


def _stream_id_problem(stream: str) -> str | None:
    """Why ``stream`` cannot be a scenario's stream id (None: it can)."""
    from core.model_base import plain_id

    try:
        plain_id(stream)
    except ValueError as e:
        return str(e)
    return None


def _left_out(rep: ImportReport, value_col: str | None) -> None:
    """Say on stderr what an import left out: bad rows, and without ``--value-col`` the
    columns a value could have come from (every event's value is then 1: a filter on v saw
    only 1s)."""
    if rep.bad_rows:
        print(
            f"warning: {rep.bad_rows} bad row(s) left out (first: {rep.first_bad})",
            file=sys.stderr,
        )
    if value_col is None and rep.unused_columns:
        print(
            f"note: no --value-col: every event's value is 1 (columns left out: "
            f"{', '.join(rep.unused_columns)}; --value-col COL carries one's values)",
            file=sys.stderr,
        )


def _image_path(plot: Path) -> Path:
    """The file ``--plot`` writes: exit 2 when its suffix names no image format matplotlib
    writes (it failed after the profile ran, exit 1); with no suffix, a ``.png`` (matplotlib
    adds it: the path printed was not the file written)."""
    from matplotlib.figure import Figure

    kinds = Figure().canvas.get_supported_filetypes()
    ext = plot.suffix.lower().lstrip(".")
    if ext and ext not in kinds:
        fail(f"--plot: {plot.name}: {ext!r} is not an image format ({', '.join(sorted(kinds))})")
    return plot if ext or plot.is_dir() else plot.with_suffix(".png")  # out_file names a dir


@input_app.command("profile")
def input_profile(
    files: Annotated[list[Path], typer.Argument(help="event files: CSV, Parquet or JSON lines")],
    ts_col: Annotated[str, typer.Option(help="time column, seconds")] = "ts",
    key_col: Annotated[str, typer.Option(help="key column: integers or strings")] = "key",
    fmt: Annotated[
        str | None, typer.Option("--format", help="csv, parquet or jsonl (default: by suffix)")
    ] = None,
    window_s: Annotated[
        float,  # min: controller.event_profile.MIN_WINDOW_S (not imported here: it loads pandas)
        typer.Option(callback=finite, min=0.001, help="window for rate and churn, s"),
    ] = 1.0,
    plot: Annotated[Path | None, typer.Option(help="write a PNG: rate and key skew")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """What your events will ask of the controller: rate over time, key skew (Zipf fit), top
    keys, hot-set churn. Writes nothing but the plot asked for.

    Example: trimtab input profile examples/events-sample.csv --key-col user --plot p.png
    """
    from controller.event_profile import profile_events
    from spark_adapter.event_import import EventImportError

    if plot is not None:
        plot = _image_path(plot)
        writable_dir(plot.parent, "--plot")
        out_file(plot, "--plot")
    try:
        prof = profile_events(files, ts_col, key_col, fmt, window_s, plot)
    except EventImportError as e:
        fail(str(e))
    if json_out:
        print_json(prof)
        return
    r = prof["rate_per_s"]
    print(
        f"events      {prof['events']} over {prof['span_s']:.1f} s ({prof['bad_rows']} bad rows left out)"
    )
    print(
        f"rate (1/s)  mean {r['mean']:.1f}, p50 {r['p50']:.1f}, p99 {r['p99']:.1f}, max {r['max']:.1f}"
    )
    s = prof["zipf_s"]
    fit = "Zipf s not fitted (fewer than 3 distinct keys)" if s is None else f"Zipf s = {s}"
    print(f"keys        {prof['distinct_keys']} distinct, {fit}")
    print(
        f"hot set     churn {prof['hot_set_churn']:.2f} between {window_s:g} s windows (top 10; 0 = stable, 1 = new every window)"
    )
    print("top keys    " + ", ".join(f"{t['key']} {t['share']:.1%}" for t in prof["top_keys"]))
    if plot is not None:
        print(f"plot        {plot}")
