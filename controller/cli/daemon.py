"""The daemon and its files: run, status, decisions, validate, report."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from controller.cli.common import app, err, fail, print_json
from controller.cli.tables import show
from core.scenario import ScenarioError

if TYPE_CHECKING:
    from controller.config import Settings

# controller.gates.DecisionKind's values (not imported: numpy and the settings would load with
# the command line); a round's kind is one of them or several joined with "+"
KINDS = ("hold", "place", "recover", "reroute", "scale", "shed")


@app.command("run")
def run_cmd(
    config: Annotated[
        Path | None, typer.Option(envvar="TRIMTAB_CONFIG", help="YAML settings file")
    ] = None,
    decision_log: Annotated[
        Path | None, typer.Option(help="SQLite decision log (overrides the config)")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="compute and log plans, apply nothing")
    ] = False,
    rounds: Annotated[int | None, typer.Option(min=1, help="stop after N rounds")] = None,
    take_over: Annotated[
        bool,
        typer.Option(
            "--take-over",
            help="spark-external: lead above the epoch of the plans the pipeline runs, fencing "
            "out the controller that published them (its decision log lost, the controller gone)",
        ),
    ] = False,
) -> None:
    """Run the controller daemon until SIGTERM/SIGINT/SIGHUP: decisions to SQLite, metrics on 127.0.0.1.

    Example: trimtab run --config examples/controller.yaml
    """
    from controller.config import ConfigError, load_settings
    from controller.daemon import run_daemon

    over: dict[str, Any] = {}
    if decision_log is not None:
        over["decision_log"] = str(decision_log)
    control: dict[str, Any] = {}
    if dry_run:
        control["dry_run"] = True
    if take_over:
        control["take_over"] = True
    if rounds is not None:
        control["max_rounds"] = rounds
    if control:
        over["control"] = control
    try:
        settings = load_settings(config, **over)
    except ConfigError as e:
        from controller.validation import other_kind

        wrong = other_kind(config, "config") if config is not None else None
        fail(f"{e.source}: " + (wrong or "; ".join(e.problems)))
    _refuse_a_bad_start(settings, str(config or "settings"))
    try:
        code = run_daemon(settings)
    except (ValueError, ScenarioError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"environment not ready: {e}", 3)
    raise typer.Exit(code)


def _refuse_a_bad_start(settings: Any, source: str) -> None:
    """Exit before the daemon starts: 2 for a bad setting, 3 for the environment (a path that
    cannot be made, a port taken, a pipeline whose plans are of a later epoch)."""
    from controller.config import blame, log_problem, path_problems, port_problem
    from controller.validation import epoch_problem, scenario_problems

    if placed := scenario_problems(settings):
        fail(f"{blame(placed, source)}: {placed[0]}")
    problems = path_problems(settings)
    missing = [p for p in problems if p.startswith("substrate.")]
    if missing:
        fail(f"{source}: {missing[0]}")
    if bad_log := log_problem(settings):
        fail(f"{source}: {bad_log}")
    if problems or port_problem(settings):
        fail(f"environment not ready: {(problems or [port_problem(settings)])[0]}", 3)
    if fenced := epoch_problem(settings):
        fail(f"environment not ready: {fenced}", 3)
    dirs = (
        ("state_dir", Path(settings.state_dir)),
        ("decision_log", Path(settings.decision_log).parent),
    )
    for field, where in dirs:
        try:  # the check above trusts permissions, which a root user (or /proc) can outrun
            where.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            why = (e.strerror or str(e)).lower()
            fail(f"environment not ready: {field}: cannot create {where}: {why}", 3)


def _standbys(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob("standby-*.json")) if state_dir.is_dir() else []


def _read_status(f: Path) -> dict[str, Any]:
    try:
        st = json.loads(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as e:
        fail(f"--state-dir: {f} is not a trimtab status file ({str(e).splitlines()[0]})")
    if not isinstance(st, dict) or "pid" not in st:
        fail(f"--state-dir: {f} is not a trimtab status file (no 'pid')")
    return st


def _lease_view(st: dict[str, Any], alive: bool) -> dict[str, Any]:
    """Role, epoch and leader as the controllers' lease has them now (read-only): the
    status file of a paused or dead primary still says "primary"."""
    from controller.decisionlog import lease_file
    from core.lease import read_lease

    lease = (
        read_lease(lease_file(st["decision_log"]), leave_no_files=True)
        if st.get("decision_log")
        else None
    )
    if lease is None:
        return {}
    leader = lease.pid if lease.held() else None
    if not alive:
        role = "stopped"
    elif leader == st["pid"]:
        role = "primary"
    else:  # a paused primary's file still says primary; its lease has expired
        role = "primary, lease expired" if st.get("role") == "primary" else "standby"
    return {"role": role, "epoch": lease.epoch, "leader_pid": leader}


@app.command("status")
def status_cmd(
    state_dir: Annotated[
        Path, typer.Option(envvar="TRIMTAB_STATE_DIR", help="the daemon's state directory")
    ] = Path(".trimtab"),
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """What the daemon is doing: role (primary or standby), epoch, last round, last change
    (the newest round that was not a hold), plan version, policies and health. With standbys sharing the decision log, it names the leader.

    Example: trimtab status
    """
    if state_dir.exists() and not state_dir.is_dir():
        fail(f"--state-dir: {state_dir} is a file, not a daemon's state directory")
    f = state_dir / "status.json"
    standbys = _standbys(state_dir)
    if not f.exists() and not standbys:
        fail(
            f"no daemon status in {state_dir} (is 'trimtab run' running with this state_dir? "
            "A config's relative state_dir is from the config's directory; the daemon's "
            "'starting' line names it)",
            1,
        )
    st = _read_status(f if f.exists() else standbys[0])
    alive = _pid_alive(int(st.get("pid", -1))) and not st.get("stopped")
    st["running"] = alive
    st.update(_lease_view(st, alive))
    st["standby_pids"] = [
        int(s.stem.split("-", 1)[1]) for s in standbys if _pid_alive(int(s.stem.split("-", 1)[1]))
    ]
    if json_out:
        print_json(st)
        return
    t = Table(show_header=False)
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    for k in (
        "running",
        "role",
        "pid",
        "epoch",
        "leader_pid",
        "standby_pids",
        "started_utc",
        "substrate",
        "plan_version",
        "dry_run",
        "policies",
        "last_round",
        "last_change",
        "health",
        "metrics_port",
        "decision_log",
    ):
        t.add_row(k, json.dumps(st.get(k)) if isinstance(st.get(k), dict) else str(st.get(k)))
    show(t, widen=False)  # prose: folded to the width


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kinds(kind: str | None, changes: bool) -> set[str] | None:
    """The decision kinds ``decisions`` shows (None: every round), from ``--kind`` and
    ``--changes``; an unknown kind, or ``hold`` with ``--changes``, exits 2 naming it."""
    wanted = set(KINDS) - {"hold"} if changes else None
    if kind is None:
        return wanted
    named = {k.strip() for k in kind.split(",") if k.strip()}
    if not named:
        fail("--kind: no kind named")
    for k in sorted(named):
        if k not in KINDS:
            fail(f"--kind: {k!r} is not a decision kind ({', '.join(KINDS)})")
    if changes and "hold" in named:
        fail("--kind: 'hold' with --changes, which leaves the holds out")
    return named & wanted if wanted is not None else named


RECORD_KEYS = ("round", "time_s", "kind", "reason", "plan_version", "applied", "duration_s")


def _replay_decisions(run_dir: Path, n: int, kinds: set[str] | None) -> list[dict[str, Any]]:
    """The ``n`` most recent rounds of a replay's report (``decisions.json``, which replay
    --report writes), oldest first, of ``kinds`` as ``DecisionLog.last`` matches them; a
    directory or file that is not a replay's report exits 2 naming it."""
    if not run_dir.is_dir():
        what = "no such directory" if not run_dir.exists() else "not a directory"
        fail(f"--report: {run_dir}: {what} (a run directory written by replay --report)")
    p = run_dir / "decisions.json"
    if not p.is_file():
        fail(f"--report: {run_dir} holds no decisions.json (replay --report writes one)")
    try:
        rows = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        fail(f"--report: {p}: not JSON ({str(e).splitlines()[0]})")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and set(RECORD_KEYS) <= r.keys() for r in rows
    ):
        fail(f"--report: {p}: not a replay's decisions (rounds with {', '.join(RECORD_KEYS)})")
    if kinds is not None:
        rows = [r for r in rows if kinds & set(str(r["kind"]).split("+"))]
    return rows[-n:]


@app.command("decisions")
def decisions_cmd(
    ctx: typer.Context,
    decision_log: Annotated[
        Path, typer.Option(envvar="TRIMTAB_DECISION_LOG", help="SQLite decision log")
    ] = Path(".trimtab/decisions.sqlite"),
    report: Annotated[
        Path | None,
        typer.Option(help="a replay's report directory (replay --report) instead of a log"),
    ] = None,
    last: Annotated[int, typer.Option(min=1, help="how many recent rounds")] = 20,
    kind: Annotated[
        str | None,
        typer.Option(help=f"only rounds of these kinds, comma-separated: {', '.join(KINDS)}"),
    ] = None,
    changes: Annotated[
        bool, typer.Option("--changes", help="only rounds that decided something: not hold")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list of decisions")
    ] = False,
) -> None:
    """The most recent decisions with their reasons: a daemon's decision log, or a replay's
    (--report, its time the scenario's seconds).

    Example: trimtab decisions --changes --last 5 --json
    Example: trimtab decisions --report rep --kind place
    """
    kinds = _kinds(kind, changes)
    what = "decisions" if kinds is None else f"decisions ({', '.join(sorted(kinds))})"
    if report is not None:
        source = ctx.get_parameter_source("decision_log")  # typer's click: by name
        if source is not None and source.name == "COMMANDLINE":  # the environment's may stay
            fail("--report: a replay's decisions or a decision log, not both (--decision-log)")
        rows = _replay_decisions(report, last, kinds)
        if json_out:
            print_json(rows)
            return
        title = f"{what} of the replay in {report}" + ("" if rows else ": none")
        _decision_table(title, "t (s)", rows, [f"{r['time_s']:g}" for r in rows])
        return
    rows = _log_decisions(decision_log, last, kinds)
    if json_out:
        print_json(rows)
        return
    days = sorted({r["time"][:10] for r in rows})
    span = " to ".join(days[:1] + days[1:][-1:]) or ("none" if kinds else "none yet")
    times = [
        r["time"][11:19] if len(days) == 1 else r["time"][5:19].replace("T", " ") for r in rows
    ]
    _decision_table(f"{what}, {span} (UTC)", "time", rows, times)


def _log_decisions(decision_log: Path, n: int, kinds: set[str] | None) -> list[dict[str, Any]]:
    """The ``n`` most recent rounds of a daemon's decision log (``DecisionLog.last``); a
    missing file or one that is not a decision log exits 2 naming it."""
    from controller.decisionlog import DecisionLog, DecisionLogError

    if not decision_log.exists():
        fail(
            f"--decision-log: no decision log at {decision_log} (a config's relative "
            "decision_log is from the config's directory; the daemon's 'starting' line names it)"
        )
    try:
        log = DecisionLog.read_only(decision_log)
        rows = log.last(n, kinds)
        log.close()
    except DecisionLogError as e:
        fail(f"--decision-log: {e}")
    return rows


def _decision_table(
    title: str, time_col: str, rows: list[dict[str, Any]], times: list[str]
) -> None:
    """The rounds as a table, each at its time as shown, their reasons folded to the width
    (the reasons are what is read)."""
    t = Table(expand=True, title=title)
    for c in (time_col, "round", "kind", "plan", "applied", "round s"):
        t.add_column(c, no_wrap=True)
    t.add_column("reason", ratio=1, overflow="fold")
    for r, when in zip(rows, times, strict=True):
        t.add_row(
            when,
            str(r["round"]),
            r["kind"],
            str(r["plan_version"]),
            "yes" if r["applied"] else "no",
            f"{r['duration_s']:.3f}",
            r["reason"],
        )
    show(t, widen=False)  # prose: folded to the width


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="config, scenario or plan files")],
    scenario: Annotated[
        Path | None,
        typer.Option(help="check plans against this scenario (its units and nodes)"),
    ] = None,
) -> None:
    """Check config, scenario and plan files; print one line per problem.

    Examples: trimtab validate examples/controller.yaml scenarios/*.yaml
              trimtab validate --scenario scenarios/zipf-hotkey-shift.yaml w/plans/v000003.json
    """
    from controller.config import ConfigError, load_settings, port_problem
    from controller.validation import epoch_problem, validate_file
    from core.scenario import ScenarioError

    bad = env = 0
    for f in files:
        try:
            kind = validate_file(f, scenario)
        except (ScenarioError, ConfigError) as e:
            bad += 1
            src = e.path if isinstance(e, ScenarioError) else e.source
            print(f"error: {src}: " + "; ".join(e.problems), file=sys.stderr)
            continue
        conf = load_settings(f) if kind == "config" else None
        taken = (port_problem(conf) or epoch_problem(conf)) if conf is not None else None
        if taken:  # valid, but `run` could not start here now
            env += 1
            print(f"error: {f}: {taken}", file=sys.stderr)
            continue
        print(f"ok: {f} ({kind})")
        if conf is not None:
            note_params_left_out(f, conf)
    if bad or env:
        raise typer.Exit(2 if bad else 3)


def note_params_left_out(path: Path, conf: Settings) -> None:
    """Say on stderr which of the steered scenario's ``controller.placement.params`` a
    valid config's placement method does not read, as the daemon warns at start
    (``placement_params_left_out``): valid, but the run leaves them out."""
    from controller.placement_params import said_params
    from controller.wiring import params_left_out

    if left := params_left_out(conf):
        said, them = said_params(left["params_left_out"])
        print(
            f"note: {path}: placement.method {left['method']} does not read the scenario's "
            f"controller.placement.params {said} (set for {left['set_for']}): "
            f"the daemon leaves {them} out",
            file=sys.stderr,
        )


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory written by replay --report")],
) -> None:
    """Re-render a run's report (summary, PNG plots, one HTML page) from its saved series.

    Example: trimtab report reports/demo
    """
    from controller.report import render_run_dir

    try:
        out = render_run_dir(run_dir)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    err.print(f"report written to {out}/report.html")
