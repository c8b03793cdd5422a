"""The ``trimtab`` command line. It parses arguments and calls into the library; no logic here.

Exit codes: 0 success, 1 runtime failure, 2 usage or validation error, 3 environment not ready.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

import controller.placements  # noqa: F401  (registers the placement methods)
from core.scenario import ScenarioError, load_scenario

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="trimtab: steer a stream-processing pipeline."
)
err = Console(stderr=True)

SPARK_KEYS = (
    "batches",
    "batch_duration_p50",
    "batch_duration_p99",
    "rows_in",
    "rows_out",
    "rows_dropped",
    "state_rows_moved",
    "partials_merged",
    "output_matches_reference",
)
SUMMARY_KEYS = (
    "throughput",
    "mean_latency",
    "p99_latency",
    "node_load_variance_mean",
    "mean_pairwise_node_correlation",
    "migrations",
    "dropped_fraction",
    "lost_tuples",
)


def _fail(msg: str, code: int = 2) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise typer.Exit(code)


def _load(path: Path) -> Any:
    try:
        return load_scenario(path)
    except ScenarioError as e:
        _fail(f"{e.path}: " + "; ".join(e.problems))


def _names(text: str) -> list[str]:
    """A comma-separated option as a list of names."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _table(rows: list[dict[str, Any]], keys: tuple[str, ...], label: str) -> Table:
    """Metrics down the side, one column per run (fits a terminal for several runs)."""
    t = Table(title=None)
    t.add_column("metric")
    for r in rows:
        t.add_column(str(r.get(label, "")), justify="right")
    for k in keys:
        t.add_row(k, *(_fmt(r.get(k, "")) for r in rows))
    return t


def _progress(enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty() or os.environ.get("TRIMTAB_NO_PROGRESS"):
        return None
    from rich.progress import Progress

    return Progress(console=err, transient=True)


@app.command()
def replay(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    substrate: Annotated[str, typer.Option(help="sim (the simulator) or spark")] = "sim",
    placement: Annotated[
        str | None, typer.Option(help="placement method; default from the scenario")
    ] = None,
    ticks: Annotated[int | None, typer.Option(help="stop after N ticks")] = None,
    seed: Annotated[
        int | None, typer.Option(help="workload seed; default from the scenario")
    ] = None,
    shedding: Annotated[str | None, typer.Option(help="lp, fit, uniform, local or none")] = None,
    master: Annotated[
        str,
        typer.Option(
            help="Spark master: local[2], local-cluster[2,1,1024] or spark://127.0.0.1:7077"
        ),
    ] = "local[2]",
    batches: Annotated[
        int, typer.Option(min=1, help="Spark: micro-batches (input segments) to replay")
    ] = 10,
    partitioner: Annotated[
        str | None,
        typer.Option(help="Spark: hot-key partitioner (hash, pkg, dchoices, wchoices, ...)"),
    ] = None,
    partitions: Annotated[
        int, typer.Option(min=1, help="Spark: partitions of the keyed stage")
    ] = 2,
    scale: Annotated[
        float, typer.Option(min=0.0001, help="Spark: input rate scale (fit the machine)")
    ] = 0.1,
    workdir: Annotated[
        Path | None, typer.Option(help="Spark: working directory (input log, plans, output)")
    ] = None,
    warmup_batches: Annotated[
        int,
        typer.Option(
            min=0,
            help="Spark: batches left out of the timing statistics (steady state: until the "
            "first full window closes)",
        ),
    ] = 1,
    report: Annotated[
        Path | None, typer.Option(help="write CSV series, PNG plots and report.html here")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print one JSON object on stdout")
    ] = False,
) -> None:
    """Replay a scenario end to end with the controller in the loop and print a summary.

    Example: trimtab replay scenarios/anticorrelated-diurnal.yaml --json
    """
    from controller.replay import replay_sim

    sc = _load(scenario)
    if substrate not in ("sim", "spark"):
        _fail(f"--substrate: {substrate!r} is not a substrate (use 'sim' or 'spark')")
    if substrate == "spark":
        from controller.spark_replay import replay_spark

        try:
            res = replay_spark(
                sc,
                master,
                batches,
                placement,
                partitioner,
                shedding,
                partitions,
                scale,
                workdir=workdir,
                warmup_batches=warmup_batches,
            )
        except ValueError as e:
            _fail(str(e))
        _finish(res, report, json_out, sc.name)
        return
    prog = _progress(not json_out)
    try:
        if prog is None:
            res = replay_sim(sc, placement=placement, ticks=ticks, seed=seed, shedding=shedding)
        else:
            with prog:
                task = prog.add_task(
                    f"replay {sc.name}", total=sc.ticks if ticks is None else ticks
                )
                res = replay_sim(
                    sc,
                    placement,
                    ticks,
                    seed,
                    lambda t, _n: prog.update(task, completed=t),
                    shedding=shedding,
                )
    except ValueError as e:
        _fail(str(e))
    _finish(res, report, json_out, sc.name)


def _finish(res: Any, report: Path | None, json_out: bool, name: str) -> None:
    """Write the report if asked, then print JSON or the summary table."""
    if report is not None:
        from controller.report import write_report

        write_report(res, report)
        res.summary["report"] = str(report)
    if json_out:
        print(json.dumps(res.summary, default=float))
        return
    keys = SUMMARY_KEYS + tuple(k for k in SPARK_KEYS if k in res.summary)
    Console().print(_table([{**res.summary, "scenario": name}], keys, "scenario"))
    if report is not None:
        err.print(f"report written to {report}/report.html")


@app.command("compare")
def compare_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    placement: Annotated[
        str, typer.Option(help="comma-separated placement methods")
    ] = "llf,correlation-oneway",
    seeds: Annotated[int, typer.Option(min=1, help="runs per method, seeds scenario.seed ..")] = 1,
    ha: Annotated[
        str | None,
        typer.Option(help="compare availability policies instead: upstream,passive,active,none"),
    ] = None,
    shedding: Annotated[
        str | None,
        typer.Option(help="comma-separated shedding methods: lp,fit,uniform,local,none"),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list, one object per method")
    ] = False,
) -> None:
    """Replay several placement (or shedding) methods on the same seeds, side by side.

    With --shedding, each placement runs under each shedding method (one row per pair).

    Examples: trimtab compare scenarios/anticorrelated-diurnal.yaml --placement llf,correlation-oneway
              trimtab compare scenarios/overload-ramp.yaml --placement least-loaded --shedding lp,uniform,local,none
    """
    from controller.compare import HA_KEYS, compare, compare_ha

    sc = _load(scenario)
    try:
        if ha is not None:
            rows = compare_ha(sc, _names(ha), seeds)
        else:
            sheds = _names(shedding) if shedding is not None else None
            rows = compare(sc, _names(placement), seeds, sheds)
    except ValueError as e:
        _fail(str(e))
    if json_out:
        print(json.dumps(rows, default=float))
        return
    if ha is not None:
        Console().print(_table(rows, (*HA_KEYS, "mean_latency", "throughput"), "ha"))
    elif shedding is not None:
        for r in rows:
            r["method"] = f"{r['placement']} / {r['shedding']}"
        keys = ("weighted_throughput", *SUMMARY_KEYS)
        Console().print(_table(rows, keys, "method"))
    else:
        Console().print(_table(rows, SUMMARY_KEYS, "placement"))


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

    Example: trimtab place scenarios/bursty-rod.yaml --algorithm rod,llf
    """
    from controller.compare import place

    sc = _load(scenario)
    try:
        rows = place(sc, _names(algorithm), points)
    except ValueError as e:
        _fail(str(e))
    if json_out:
        print(json.dumps(rows, default=float))
        return
    Console().print(
        _table(
            rows,
            ("feasible_set_ratio", "feasible_set_error", "min_plane_distance", "inter_node_arcs"),
            "algorithm",
        )
    )


@app.command("shed")
def shed_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    at: Annotated[float | None, typer.Option(help="input rates at this time (s)")] = None,
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
    from controller.replay import make_policy
    from controller.shedding import shed_model, solve
    from core.workload import rates as rate_matrix

    sc = _load(scenario)
    r = rate_matrix(sc) / sc.tick_s
    if at is not None:
        if not 0 <= at < sc.duration_s:
            _fail(f"--at: {at} is outside the scenario's [0, {sc.duration_s}) seconds")
        row = int(at / sc.tick_s)
    elif peak:
        row = int(np.argmax(r.sum(axis=1)))
    else:
        row = 0
    try:
        policy = make_policy(sc)
        plan = policy.initial_plan()
        ctx = policy.ctx
        model = shed_model(ctx.network, ctx.units, plan.placement.as_array(), ctx.cluster.n, r[row])
        h = sc.controller.shedding.headroom
        rows = [
            solve(m.strip(), model, ctx.cluster.capacities(), h, ctx.cluster.ids).model_dump()
            for m in _names(method)
        ]
    except ValueError as e:
        _fail(str(e))
    for x in rows:
        x["time_s"] = row * sc.tick_s
        x["keep"] = dict(zip(x["locations"], x["keep"], strict=True))
    if json_out:
        print(json.dumps(rows, default=float))
        return
    t = Table()
    for c in ("method", "keep", "weighted output", "node loads", "shadow prices", "solve ms"):
        t.add_column(c)
    for x in rows:
        t.add_row(
            x["method"],
            ", ".join(f"{k}={v:.4g}" for k, v in x["keep"].items()),
            f"{x['objective']:.6g}",
            ", ".join(f"{k}={v:.3g}" for k, v in x["node_loads"].items()),
            ", ".join(f"{k}={v:.3g}" for k, v in x["shadow_prices"].items()),
            f"{x['solve_time_s'] * 1000:.1f}",
        )
    Console().print(t)


PARTITION_KEYS = (
    "imbalance_mean",
    "imbalance_p95",
    "fragmentation_mean",
    "fragmentation_max",
    "aggregation_cost_mean",
    "routing_us_per_key",
)


@app.command("partition")
def partition_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    partitioners: Annotated[
        str, typer.Option(help="comma-separated partitioner names")
    ] = "hash,shuffle,pkg,dchoices,wchoices,cg,capa,ecapa,dalton,prompt",
    workers: Annotated[
        int | None, typer.Option(min=1, help="workers; default: the scenario's nodes")
    ] = None,
    zipf: Annotated[
        float | None, typer.Option(min=0.0, help="override the key distribution with Zipf(S)")
    ] = None,
    keys: Annotated[int | None, typer.Option(min=1, help="override the key-space size")] = None,
    trace: Annotated[
        Path | None, typer.Option(help="CSV of keys (column 'key') instead of the scenario")
    ] = None,
    seconds: Annotated[
        float | None, typer.Option(min=1.0, help="replay only the first S seconds")
    ] = None,
    window_s: Annotated[float, typer.Option(min=0.0, help="window length in seconds")] = 1.0,
    sources: Annotated[int, typer.Option(min=1, help="source instances per partitioner")] = 1,
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list, one object per partitioner")
    ] = False,
) -> None:
    """Replay the scenario's key stream through several partitioners side by side (no Spark).

    Example: trimtab partition scenarios/zipf-moderate.yaml --partitioners hash,pkg --workers 10
    """
    from controller.partition import partition_replay

    sc = _load(scenario)
    try:
        rows = partition_replay(
            sc,
            _names(partitioners),
            workers,
            window_s,
            sources,
            seconds=seconds,
            zipf=zipf,
            keys=keys,
            trace=trace,
        )
    except ValueError as e:
        _fail(str(e))
    if json_out:
        print(json.dumps(rows, default=float))
        return
    Console().print(_table(rows, PARTITION_KEYS, "partitioner"))


pipeline_app = typer.Typer(
    help="Run a pipeline driver outside a replay (primary or warm standby).", no_args_is_help=True
)
app.add_typer(pipeline_app, name="pipeline")


@pipeline_app.command("run")
def pipeline_run(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    workdir: Annotated[Path, typer.Option(help="working directory with the input log and plans")],
    role: Annotated[str, typer.Option(help="primary or standby (waits for the lease)")] = "primary",
    master: Annotated[str, typer.Option(help="Spark master")] = "local[2]",
    partitions: Annotated[int, typer.Option(min=1)] = 2,
    lease_ttl_s: Annotated[
        float, typer.Option(min=0.5, help="lease time to live: the standby takes over after it")
    ] = 3.0,
    snapshot_every: Annotated[int, typer.Option(min=1, help="state snapshot every k batches")] = 2,
    kill_after_output: Annotated[
        int | None, typer.Option(help="fault injection: die after writing this batch's output")
    ] = None,
    result: Annotated[Path | None, typer.Option(help="write a JSON result here")] = None,
    mtbf_s: Annotated[
        float | None,
        typer.Option(
            min=1.0,
            help="mean time between failures: snapshot interval from Young/Daly on the measured"
            " snapshot cost (starting at --snapshot-every)",
        ),
    ] = None,
    trigger_s: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            help="follow the input log live, a micro-batch every S seconds, until the log is"
            " closed or SIGTERM (default: process the segments present and stop)",
        ),
    ] = None,
) -> None:
    """A pipeline driver with a lease: the primary runs; a warm standby takes over when it dies.

    Example: trimtab pipeline run scenarios/seed-groupby-window.yaml --workdir w --role standby
    """
    from spark_adapter.standby import run_driver

    try:
        out = run_driver(
            workdir,
            str(scenario),
            role,
            master,
            partitions,
            lease_ttl_s,
            snapshot_every,
            kill_after_output,
            result,
            mtbf_s=mtbf_s,
            trigger_s=trigger_s,
        )
    except (ValueError, RuntimeError) as e:
        _fail(str(e), 1)
    print(json.dumps({k: out[k] for k in ("role", "epoch", "restored_through", "committed")}))


input_app = typer.Typer(help="Write a pipeline's input log.", no_args_is_help=True)
app.add_typer(input_app, name="input")


@input_app.command("generate")
def input_generate(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    workdir: Annotated[Path, typer.Option(help="working directory; the log is WORKDIR/input")],
    segments: Annotated[
        int | None, typer.Option(min=1, help="ticks to write (default: the scenario's duration)")
    ] = None,
    scale: Annotated[float, typer.Option(min=1e-6, help="multiplies the scenario's rates")] = 1.0,
    pace_s: Annotated[
        float | None,
        typer.Option(min=0.01, help="write live: one segment every S seconds (until SIGTERM)"),
    ] = None,
    close: Annotated[bool, typer.Option(help="mark the end of the stream when done")] = False,
) -> None:
    """Append segments to the input log, after the last one present, at once or live.

    Example: trimtab input generate scenarios/zipf-hotkey-shift.yaml --workdir w --pace-s 2 --close
    """
    from spark_adapter.source import InputLog

    sc = _load(scenario)
    log = InputLog(workdir / "input")
    if log.closed:
        _fail(f"{log.root}: the log is closed (the stream has ended); use a new workdir", 1)
    start = log.next_index()  # after the last segment, even when trimmed away
    n = segments if segments is not None else sc.ticks
    halt = threading.Event()
    if pace_s is not None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: halt.set())
    rows = log.generate(sc, n, scale=scale, start=start, pace_s=pace_s, stop=halt)
    if close:
        log.close()
    written = log.next_index() - start  # the pipeline may have trimmed some already
    print(json.dumps({"rows": rows, "segments": written, "first": start, "closed": log.closed}))


@app.command("inject")
def inject_cmd(
    fault: Annotated[
        str, typer.Argument(help="kill-executor, lose-executor, stop-executor or kill-driver")
    ],
    target: Annotated[str | None, typer.Argument(help="executor id (not for kill-driver)")] = None,
    workdir: Annotated[
        Path, typer.Option(help="the running pipeline's working directory (app.json)")
    ] = Path("."),
    seconds: Annotated[
        float, typer.Option(min=0.1, help="stop-executor: how long to stop it")
    ] = 10.0,
) -> None:
    """Inject a fault into a running pipeline, a replay or a live driver (its workdir/app.json
    names the application and the driver).

    Example: trimtab inject kill-executor 1 --workdir /tmp/run
    """
    import signal as _signal

    from spark_adapter.faults import kill_executor, stop_executor

    f = workdir / "app.json"
    if not f.exists():
        _fail(f"--workdir: no app.json in {workdir} (is a replay or a driver running there?)")
    app_info = json.loads(f.read_text())
    try:
        if fault == "kill-driver":
            os.kill(int(app_info["driver_pid"]), _signal.SIGKILL)
            print(json.dumps({"killed_driver": app_info["driver_pid"]}))
        elif fault in ("kill-executor", "stop-executor", "lose-executor"):
            if target is None:
                _fail(f"{fault}: an executor id is needed")
            if fault == "kill-executor":
                print(
                    json.dumps(
                        {
                            "killed_executor": target,
                            "pid": kill_executor(app_info["app_id"], str(target)),
                        }
                    )
                )
            elif fault == "stop-executor":
                print(
                    json.dumps(
                        {
                            "stopped_executor": target,
                            "pid": stop_executor(app_info["app_id"], str(target), seconds),
                        }
                    )
                )
            else:
                (workdir / "inject-lose").write_text(
                    str(target)
                )  # the driver polls this and calls killExecutor
                print(json.dumps({"lose_requested": target}))
        else:
            _fail(
                f"fault: {fault!r} is not kill-executor, lose-executor, stop-executor or kill-driver"
            )
    except (KeyError, ProcessLookupError) as e:
        _fail(str(e), 1)


@app.command("cluster")
def cluster_cmd(
    action: Annotated[str, typer.Argument(help="up, down or status")],
    workers: Annotated[int, typer.Option(min=1, help="workers to start")] = 2,
    cores: Annotated[int, typer.Option(min=1, help="cores per worker")] = 1,
    memory: Annotated[str, typer.Option(help="memory per worker, e.g. 1g")] = "1g",
    state_dir: Annotated[
        Path, typer.Option(envvar="TRIMTAB_STATE_DIR", help="where pids and logs are kept")
    ] = Path(".trimtab"),
) -> None:
    """Start, stop or inspect a standalone Spark master and workers on 127.0.0.1.

    Example: trimtab cluster up --workers 2 --cores 1; trimtab cluster down
    """
    from spark_adapter.cluster import cluster_down, cluster_status, cluster_up

    state_file = state_dir / "cluster.json"
    if action == "up":
        try:
            st = cluster_up(state_file, workers, cores, memory)
        except (RuntimeError, TimeoutError) as e:
            _fail(str(e), 3)
        print(
            json.dumps(
                {
                    "master_url": st.master_url,
                    "master_pid": st.master_pid,
                    "worker_pids": st.worker_pids,
                }
            )
        )
    elif action == "down":
        print(json.dumps({"stopped": cluster_down(state_file)}))
    elif action == "status":
        print(json.dumps(cluster_status(state_file)))
    else:
        _fail(f"action: {action!r} is not up, down or status")


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="config, scenario or plan files")],
) -> None:
    """Check config, scenario and plan files; print one line per problem.

    Example: trimtab validate examples/controller.yaml scenarios/*.yaml
    """
    import yaml

    from controller.config import ConfigError, load_settings
    from core.plans import Plan

    bad = 0
    for f in files:
        try:
            data = yaml.safe_load(f.read_text()) if f.is_file() else None
        except yaml.YAMLError:
            data = None
        try:
            if isinstance(data, dict) and "placement" in data and "version" in data:
                from pydantic import ValidationError

                from core.scenario import format_validation_error

                try:
                    Plan.model_validate(data)
                except ValidationError as e:
                    raise ConfigError(str(f), format_validation_error(e)) from None
                kind = "plan"
            elif isinstance(data, dict) and (
                {"control", "substrate", "metrics", "decision_log"} & set(data)
            ):
                load_settings(f)
                kind = "config"
            else:
                load_scenario(f)
                kind = "scenario"
            print(f"ok: {f} ({kind})")
        except (ScenarioError, ConfigError) as e:
            bad += 1
            src = e.path if isinstance(e, ScenarioError) else e.source
            print(f"error: {src}: " + "; ".join(e.problems), file=sys.stderr)
    if bad:
        raise typer.Exit(2)


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
) -> None:
    """Run the controller daemon until SIGTERM/SIGINT: decisions to SQLite, metrics on 127.0.0.1.

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
    if rounds is not None:
        control["max_rounds"] = rounds
    if control:
        over["control"] = control
    try:
        settings = load_settings(config, **over)
    except ConfigError as e:
        _fail(f"{e.source}: " + "; ".join(e.problems))
    try:
        code = run_daemon(settings)
    except (ValueError, ScenarioError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"environment not ready: {e}", 3)
    raise typer.Exit(code)


@app.command("status")
def status_cmd(
    state_dir: Annotated[
        Path, typer.Option(envvar="TRIMTAB_STATE_DIR", help="the daemon's state directory")
    ] = Path(".trimtab"),
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """What the daemon is doing: last round, plan version, policies and health.

    Example: trimtab status
    """
    f = state_dir / "status.json"
    if not f.exists():
        _fail(f"no daemon status in {state_dir} (is 'trimtab run' running with this state_dir?)", 1)
    st = json.loads(f.read_text())
    alive = _pid_alive(int(st.get("pid", -1))) and not st.get("stopped")
    st["running"] = alive
    if json_out:
        print(json.dumps(st))
        return
    t = Table(show_header=False)
    for k in (
        "running",
        "pid",
        "substrate",
        "plan_version",
        "dry_run",
        "policies",
        "last_round",
        "health",
        "metrics_port",
        "decision_log",
    ):
        t.add_row(k, json.dumps(st.get(k)) if isinstance(st.get(k), dict) else str(st.get(k)))
    Console().print(t)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@app.command("decisions")
def decisions_cmd(
    decision_log: Annotated[
        Path, typer.Option(envvar="TRIMTAB_DECISION_LOG", help="SQLite decision log")
    ] = Path(".trimtab/decisions.sqlite"),
    last: Annotated[int, typer.Option(min=1, help="how many recent rounds")] = 20,
    json_out: Annotated[
        bool, typer.Option("--json", help="print a JSON list of decisions")
    ] = False,
) -> None:
    """The most recent decisions with their reasons.

    Example: trimtab decisions --last 5 --json
    """
    from controller.decisionlog import DecisionLog

    if not decision_log.exists():
        _fail(f"--decision-log: no decision log at {decision_log}")
    rows = DecisionLog(decision_log).last(last)
    if json_out:
        print(json.dumps(rows, default=float))
        return
    t = Table()
    for c in ("round", "kind", "plan", "applied", "reason"):
        t.add_column(c)
    for r in rows:
        t.add_row(
            str(r["round"]), r["kind"], str(r["plan_version"]), str(r["applied"]), r["reason"]
        )
    Console().print(t)


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
        _fail(str(e))
    err.print(f"report written to {out}/report.html")


@app.command()
def demo(
    scenario: Annotated[Path, typer.Option(help="scenario to replay")] = Path(
        "scenarios/seed-groupby-window.yaml"
    ),
    substrate: Annotated[str, typer.Option(help="spark (the main job) or sim")] = "spark",
    master: Annotated[str, typer.Option(help="Spark master")] = "local-cluster[2,1,1024]",
    batches: Annotated[int, typer.Option(min=2, help="micro-batches per run")] = 12,
    scale: Annotated[float, typer.Option(min=0.0001, help="input rate scale")] = 0.5,
    partitioner: Annotated[str, typer.Option(help="trimtab's hot-key partitioner")] = "wchoices",
    placement: Annotated[str, typer.Option(help="trimtab's placement")] = "correlation-oneway",
    report: Annotated[Path, typer.Option(help="report directory")] = Path("reports/demo"),
) -> None:
    """The main job: replay the seed group-by-window query on Spark, trimtab vs plain hash routing.

    Example: trimtab demo
    """
    from controller.report import write_report

    sc = _load(scenario)
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
            _fail(str(e))
        keys = DEMO_KEYS
        best = runs[-1]
    Console().print(_table([r.summary for r in runs], keys, "run"))
    if substrate != "sim":
        h, t = runs[0].summary, runs[1].summary
        err.print(
            f"trimtab: batch p50 {t['batch_duration_p50']:.2f} s vs hash {h['batch_duration_p50']:.2f} s; "
            f"partition rows {t['partition_rows']} vs {h['partition_rows']}"
        )
    write_report(best, report)
    err.print(f"report written to {report}/report.html")


def main() -> None:
    """Console-script entry point."""
    app()
