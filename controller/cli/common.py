"""What every command shares: the Typer app, error exits, loading a scenario.

Exit codes: 0 success, 1 runtime failure, 2 usage or validation error, 3 environment not ready,
4 a replay that did not meet its scenario's ``expect:`` block.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import numpy as np
import typer
from rich.console import Console
from typer import _click as click  # typer vendors click: its exceptions are these
from typer.core import TyperGroup

from controller.scenario import ScenarioFile, load_scenario
from core.scenario import MAX_KEY_GROUPS, ScenarioError
from spark_adapter.session import jvm_lost

__all__ = [
    "PartitionsOpt",
    "app",
    "check_input_log",
    "check_master",
    "check_not_ended",
    "check_plan",
    "check_spark_query",
    "ensure_plan",
    "err",
    "fail",
    "given",
    "load",
    "names",
    "out_file",
    "outside_workdir",
    "print_json",
    "progress",
    "writable_dir",
]


PartitionsOpt = Annotated[
    int,
    typer.Option(min=1, max=MAX_KEY_GROUPS, help="Spark: partitions of the keyed stage"),
]


def _examples_as_written(cmd: Any) -> None:
    """Mark each help paragraph that starts with "Example" with click's no-rewrap ``\\b`` (a
    docstring's own gets a blank line from typer): rewrapped, a command broke mid-argument."""
    if cmd.help:
        cmd.help = re.sub(r"(^|\n\n)(?=Examples?: )", "\\1\b\n", cmd.help)
    for sub in getattr(cmd, "commands", {}).values():
        _examples_as_written(sub)


def _not_finite(e: click.exceptions.UsageError, argv: list[str]) -> str | None:
    """A bounded number flag given ``nan``, ``inf`` or ``1e999``, worded as every other number
    flag's (``finite``): typer's range check runs before the callback and said ``nan`` "should
    be less than or equal to 3600"."""
    param = getattr(e, "param", None)
    if not isinstance(e, click.exceptions.BadParameter) or param is None:
        return None
    for i, arg in enumerate(argv):
        for opt in param.opts:
            raw = argv[i + 1] if arg == opt and i + 1 < len(argv) else None
            raw = arg[len(opt) + 1 :] if arg.startswith(f"{opt}=") else raw
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                continue
            if not math.isfinite(value):
                return f"Invalid value for '{opt}': {raw}: a finite number is needed"
    return None


class OneLineErrors(TyperGroup):
    """The command group: usage errors as one ``error: ...`` line with exit 2 (not a box), and
    an unexpected exception as one line with exit 1 unless ``--debug`` asks for the traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _examples_as_written(self)
        given = kwargs.pop("args", None)  # [] is no arguments, not "read sys.argv"
        argv = list(given if given is not None else (args[0] if args else sys.argv[1:]))
        debug = "--debug" in argv
        argv = [a for a in argv if a != "--debug"]
        kwargs.pop("standalone_mode", None)
        try:
            rv = super().main(argv, *args[1:], standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as e:  # no arguments: the help, as --help
            print(e.ctx.get_help() if e.ctx else e.format_message())
            sys.exit(2)
        except click.exceptions.UsageError as e:
            msg = _not_finite(e, argv) or " ".join(e.format_message().split())
            where = f"{e.ctx.command_path.split(' ', 1)[-1]}: " if e.ctx and e.ctx.parent else ""
            print(f"error: {where}{msg}", file=sys.stderr)
            sys.exit(2)
        except click.exceptions.ClickException as e:
            print(f"error: {' '.join(e.format_message().split())}", file=sys.stderr)
            sys.exit(e.exit_code)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        except Exception as e:  # a bug or an unforeseen environment: one line, exit 1
            if isinstance(code := getattr(e, "exit_code", None), int):
                print(f"error: {e}", file=sys.stderr)  # one that names its own exit code:
                sys.exit(code)  # a Spark batch run stopped by Ctrl-C after a batch
            if debug:
                raise
            if lost := jvm_lost():  # a py4j error of a JVM gone under the run
                print(f"error: {lost}", file=sys.stderr)
                sys.exit(1)
            text = " ".join(str(e).split()) or type(e).__name__
            print(
                f"error: {type(e).__name__}: {text} (rerun with --debug for the traceback)",
                file=sys.stderr,
            )
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    rich_markup_mode=None,  # click's plain help: wraps to the terminal, never cuts an option
    context_settings={"max_content_width": 120},
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="trimtab: steer a stream-processing pipeline.",
)
err = Console(stderr=True)


def _finite(x: Any, replaced: list[str], where: str = "") -> Any:
    """``x`` with every NaN or infinite number replaced by None (JSON has neither)."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, dict):
        return {k: _finite(v, replaced, f"{where}.{k}" if where else str(k)) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v, replaced, f"{where}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        replaced.append(where or "(value)")
        return None
    return x


def print_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON: undefined numbers (NaN, infinities) become null, and
    stderr says once which fields were undefined.

    >>> print_json({"a": 1.5, "b": float("nan")})
    {"a": 1.5, "b": null}
    """
    replaced: list[str] = []
    clean = _finite(obj, replaced)
    print(json.dumps(clean, default=float, allow_nan=False))
    if replaced:
        more = f" and {len(replaced) - 5} more" if len(replaced) > 5 else ""
        print(
            f"note: undefined (NaN or infinite) values printed as null: "
            f"{', '.join(replaced[:5])}{more}",
            file=sys.stderr,
        )


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: msg`` on stderr and exit with ``code``."""
    print(f"error: {msg}", file=sys.stderr)
    raise typer.Exit(code)


def given(ctx: typer.Context, param: str) -> bool:
    """Whether the user set ``param`` (on the command line or from the environment), not
    left it at its default."""
    source = ctx.get_parameter_source(param)  # typer's own click: compared by name
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def check_spark_query(sc: ScenarioFile, scenario: Path | None, flag: str | None = None) -> None:
    """Exit 2 naming the operator (and the file, and the ``flag`` that gave it) when the
    scenario's query has a shape the Spark pipeline cannot run (``compile_query``: no keyed
    windowed operator, say), before Spark starts."""
    from spark_adapter.query import compile_query

    try:
        compile_query(sc)
    except ValueError as e:
        where = f"{scenario}: " if scenario is not None else ""
        fail(f"{flag}: {where}{e}" if flag else f"{where}{e}")


def note_idle_partitions(sc: ScenarioFile, partitions: int) -> None:
    """Say on stderr when the keyed stage has more partitions than key groups: a key group is
    the unit placed, so the extra partitions never get a row."""
    from spark_adapter.query import compile_query

    try:
        groups = compile_query(sc).key_groups
    except ValueError:
        return  # the run itself names what Spark cannot run
    if partitions > groups:
        print(
            f"note: --partitions {partitions} for {groups} key groups: {partitions - groups} "
            "partition(s) will get no rows (raise the keyed operator's key_groups)",
            file=sys.stderr,
        )


def note_node_faults(sc: ScenarioFile, batches: int | None) -> None:
    """Say on stderr which of the scenario's faults a Spark replay of ``batches`` batches
    (None: an imported log, of unknown span) will not inject: node faults are the simulator's
    (a node on Spark is a partition); a stream's ``partition`` fault is replayed."""
    span = math.inf if batches is None else batches * sc.tick_s
    skipped = [f for f in sc.faults if f.stream is None and f.at_s < span]
    if skipped:
        said = ", ".join(f"{f.kind} {f.node} at {f.at_s:g} s" for f in skipped)
        print(
            f"note: a Spark replay does not inject the scenario's node faults ({said}): the "
            "simulator models them; `trimtab inject` faults a running replay's executors "
            "(local-cluster or a standalone master). A stream's partition fault is replayed",
            file=sys.stderr,
        )


def check_ha_options(
    sc: ScenarioFile, placement: str | None, places: list[str], shedding: str | None
) -> None:
    """``compare --ha`` runs every policy on one placement, with the scenario's shedding; on
    a scenario without faults the policies differ only in their overhead, and it says so."""
    if shedding is not None:
        fail("--shedding: not with --ha (the policies run with the scenario's shedding)")
    if placement is not None and len(places) > 1:
        fail(f"--placement: with --ha, one method (got {len(places)}: {placement})")
    if not sc.faults:
        print(
            f"note: {sc.name} has no fault: the policies differ only in their runtime "
            "overhead (scenarios/failure-storm.yaml has node faults, spark-silent-input.yaml a "
            "silent input)",
            file=sys.stderr,
        )


def spark_replay_notes(sc: ScenarioFile, partitions: int, batches: int | None) -> None:
    """The notes before a Spark replay: idle partitions, faults it will not inject."""
    note_idle_partitions(sc, partitions)
    note_node_faults(sc, batches)


def out_file(path: Path, flag: str) -> None:
    """Exit 2 naming ``flag`` unless ``path`` can be written as a file: not a directory, in a
    directory that exists and is writable. Checked before the work that fills it."""
    if path.is_dir():
        fail(f"{flag}: {path} is a directory")
    if not path.parent.is_dir():
        fail(f"{flag}: {path.parent} is not a directory")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        fail(f"{flag}: {path} is not writable")


def outside_workdir(path: Path, workdir: Path, flag: str) -> None:
    """Exit 2 naming ``flag`` when ``path`` lies in the pipeline's working directory, whose
    files are the pipeline's: a Parquet file written under its output/ was read as committed
    output (``pipeline verify`` then found twice the reference's rows), and an existing
    planlog.sqlite or run.json would be overwritten."""
    if path.resolve().is_relative_to(workdir.resolve()):
        fail(
            f"{flag}: {path} is inside the working directory {workdir}, whose files are the "
            "pipeline's (a file under its output/ is read as its output): write it elsewhere"
        )


def finite(value: float | None) -> float | None:
    """Every number flag's callback: a finite number (typer reads ``inf``, ``nan`` and
    ``1e999`` as floats; ``--trigger-s inf`` opened the lease in a missing workdir, exit 1, and
    ``partition --seconds inf`` overflowed)."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value}: a finite number is needed")
    return value


def writable_dir(path: Path, flag: str, make: bool = False) -> None:
    """Exit 2 naming ``flag`` unless ``path`` is (or can be made) a writable directory. The
    directories it had to make are removed again unless ``make``: a command refused later,
    or one that fails, leaves no empty directory behind (its writer makes it)."""
    if path.exists() and not path.is_dir():
        fail(f"{flag}: {path} is a file, not a directory")
    made = []
    p = path
    while not p.exists() and p != p.parent:
        made.append(p)  # deepest first
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"{flag}: cannot create {path}: {(e.strerror or str(e)).lower()}")
    writable = os.access(path, os.W_OK)
    if not make:
        for d in made:  # left if another process (a log's writer) wrote in it meanwhile
            with contextlib.suppress(OSError):
                d.rmdir()
    if not writable:
        fail(f"{flag}: {path} is not writable")


def check_input_log(path: Path, flag: str, sc: ScenarioFile | None = None) -> None:
    """Exit 2 naming ``flag`` and the file unless every input segment under ``path`` (a
    workdir holding ``input/``, or the log itself) is readable with the input columns and,
    given the scenario ``sc``, holds rows of its streams only."""
    from spark_adapter.source import InputLog

    root = path / "input" if (path / "input").is_dir() else path
    if not root.is_dir():
        return  # no log yet (a live writer starts it)
    try:
        InputLog(root).check(None if sc is None else [s.id for s in sc.streams])
    except ValueError as e:
        fail(f"{flag}: {e}")


def check_not_ended(workdir: Path) -> None:
    """Exit 2 when this pipeline's stream has ended (``pipeline run``; ``input generate`` and
    ``publish-operator``, whose segments or plan would never run): a batch after the one that
    closed every window would take that batch's id in Spark's own numbering (its output
    replaced, the windows it closed lost) and start from an infinite watermark."""
    from spark_adapter.actuator import pipeline_ended

    try:
        ended = pipeline_ended(workdir)
    except ValueError as e:
        fail(f"--workdir: {e}")
    if ended is not None:
        fail(
            f"--workdir: this pipeline has ended: batch {ended} closed every window (a batch "
            "run ends the stream, as a live one does once its log is closed); nothing more "
            "runs here: start a new --workdir (a live run, --trigger-s, keeps its windows open)"
        )


def check_master(master: str) -> None:
    """Exit 2 naming ``--master`` unless trimtab runs on it (``session.master_problem``), and
    3 when nothing listens at a standalone master's address or something other than a
    master's RPC port answers there (``master_probe``), before Spark starts."""
    from spark_adapter.master_probe import master_address_problem
    from spark_adapter.session import master_problem

    if problem := master_problem(master):
        fail(f"--master: {problem}")
    if master.startswith("spark://") and (problem := master_address_problem(master)):
        fail(f"environment not ready: --master: {problem}", 3)


def load(path: Path) -> ScenarioFile:
    """A scenario, or exit 2 naming the file and its problems."""
    try:
        return load_scenario(path)
    except ScenarioError as e:
        from controller.validation import other_kind

        fail(f"{e.path}: " + (other_kind(Path(path), "scenario") or "; ".join(e.problems)))


def names(text: str, flag: str, known: tuple[str, ...] = ()) -> list[str]:
    """A comma-separated option as a list of names; exit 2 naming ``flag`` when it names none,
    one twice (two identical columns read as a comparison), or one not ``known`` (if given)."""
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out:
        fail(f"{flag}: no name given (got {text!r})")
    for x in out:
        if out.count(x) > 1:
            fail(f"{flag}: {x!r} is named twice")
        if known:
            known_name(x, flag, known)
    return out


def known_name(name: str, flag: str, known: tuple[str, ...]) -> None:
    """Exit 2 naming ``flag`` unless ``name`` is one of ``known`` (a list is not one)."""
    if name not in known:
        fail(f"{flag}: unknown name {name!r} (known: {', '.join(known)})")


def check_placement(sc: ScenarioFile, method: str | None, flag: str = "--placement") -> None:
    """Exit 2 naming ``flag`` for no method (a list), or one the window is too short for."""
    if method is None:
        return
    from controller.placement_params import method_problem, window_problem

    if "," in method:
        fail(f"{flag}: one method, got {method!r} (`trimtab compare` runs several side by side)")
    if bad := method_problem({flag: method}):
        fail(bad)
    ctl = sc.controller
    if bad := window_problem(method, ctl.placement.initial, ctl.placement.params, ctl.window_k):
        fail(f"{flag}: {bad} (the scenario's controller.window_k)")


def progress(enabled: bool) -> Any:
    """A progress bar on a terminal (None when not wanted or not a terminal)."""
    if not enabled or not sys.stderr.isatty() or os.environ.get("TRIMTAB_NO_PROGRESS"):
        return None
    from rich.progress import Progress

    return Progress(console=err, transient=True)


def ensure_plan(sc: ScenarioFile, workdir: Path, partitions: int, default_plan: bool) -> None:
    """A batch run needs a plan: the controller's, or with ``--default-plan`` plan 0."""
    from spark_adapter.actuator import PlanStore

    if PlanStore(workdir / "plans", read_only=True).current_version() is not None:
        return
    if not default_plan:  # refused: nothing made
        fail(
            f"--workdir: no plan in {workdir / 'plans'}: start the controller first "
            "(trimtab run, substrate.kind: spark-external) or pass --default-plan"
        )
    from spark_adapter.query import compile_query
    from spark_adapter.warm_start import round_robin_plan

    PlanStore(workdir / "plans").publish(round_robin_plan(compile_query(sc), partitions))


def check_plan(sc: ScenarioFile, workdir: Path, partitions: int) -> None:
    """Before Spark starts: the plan the next batch would pin fits this pipeline (the current
    one, or the one the last batch pinned: ``plan_fit.PlanGuard``); else exit 2."""
    from spark_adapter.actuator import PlanLog, PlanStore
    from spark_adapter.plan_fit import PlanGuard, PlanRefused
    from spark_adapter.query import compile_query

    plans = PlanStore(workdir / "plans", read_only=True)
    if plans.current_version() is None:
        return
    pins = PlanLog(workdir / "planlog.sqlite") if (workdir / "planlog.sqlite").exists() else None
    try:
        PlanGuard(compile_query(sc), partitions, plans, pins).choose()
    except PlanRefused as e:
        fail(str(e))
