"""The Spark side: pipeline drivers, the input log, fault injection, a standalone cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from controller.cli.common import (
    PartitionsOpt,
    app,
    check_input_log,
    check_master,
    check_not_ended,
    check_plan,
    check_spark_query,
    ensure_plan,
    fail,
    finite,
    given,
    load,
    note_idle_partitions,
    out_file,
    print_json,
    writable_dir,
)
from controller.scenario import ScenarioFile

if TYPE_CHECKING:
    from spark_adapter.standby import EndedMeanwhile

pipeline_app = typer.Typer(
    help="Run a pipeline driver outside a replay (primary or warm standby).", no_args_is_help=True
)
app.add_typer(pipeline_app, name="pipeline")


DefaultPlanOpt = Annotated[
    bool,
    typer.Option(
        help="no controller: when WORKDIR/plans holds no plan, publish one placing key group"
        " g on partition g mod P (what hash routing does)"
    ),
]

MtbfOpt = Annotated[
    float | None,
    typer.Option(
        callback=finite,
        min=1.0,
        help="mean time between failures: snapshot interval from Young/Daly on the measured"
        " snapshot cost (starting at --snapshot-every)",
    ),
]
TriggerOpt = Annotated[
    float | None,
    typer.Option(
        callback=finite,
        min=0.01,
        max=3600,  # as control.interval_s; 1e300 failed in Spark's interval parser, once started
        help="follow the input log live, a micro-batch every S seconds, until the log is"
        " closed or SIGTERM (default: process the segments present and stop)",
    ),
]


ROLE_HELP = (
    "primary; standby (warm: waits for the lease, then restores and refolds); active (processes"
    " every batch the primary pins into WORKDIR/active-standby, publishes at takeover)"
)


LeaseTtlOpt = Annotated[
    float,
    typer.Option(
        callback=finite,
        min=0.5,
        max=600,  # as control.lease_timeout_s; past 2.7e10 s the renewal's wait overflowed
        help="lease time to live: the standby takes over after it",
    ),
]


@pipeline_app.command("run")
def pipeline_run(
    scenario: Annotated[Path, typer.Argument(help="scenario file (YAML)")],
    workdir: Annotated[Path, typer.Option(help="working directory with the input log and plans")],
    role: Annotated[str, typer.Option(help=ROLE_HELP)] = "primary",
    master: Annotated[str, typer.Option(help="Spark master")] = "local[2]",
    partitions: PartitionsOpt = 2,
    lease_ttl_s: LeaseTtlOpt = 3.0,
    snapshot_every: Annotated[int, typer.Option(min=1, help="state snapshot every k batches")] = 2,
    kill_after_output: Annotated[
        int | None,
        typer.Option(min=0, help="fault injection: die after writing this batch's output"),
    ] = None,
    result: Annotated[Path | None, typer.Option(help="write a JSON result here")] = None,
    default_plan: DefaultPlanOpt = False,
    mtbf_s: MtbfOpt = None,
    trigger_s: TriggerOpt = None,
) -> None:
    """A pipeline driver with a lease: the primary runs; a standby takes over when it dies.

    Example: trimtab pipeline run scenarios/seed-groupby-window.yaml --workdir w --role standby
    """
    from spark_adapter.plan_fit import PlanRefused
    from spark_adapter.session import jvm_lost
    from spark_adapter.standby import EndedMeanwhile, run_driver

    sc = load(scenario)
    if role not in ("primary", "standby", "active"):
        fail(f"--role: {role!r} is not primary, standby or active")
    if result is not None:
        out_file(result, "--result")
    _preflight(sc, scenario, workdir, master, partitions, role, trigger_s, default_plan)
    try:
        out = run_driver(
            workdir,
            str(scenario),
            role,
            master=master,
            partitions=partitions,
            lease_ttl_s=lease_ttl_s,
            snapshot_every=snapshot_every,
            kill_after_output=kill_after_output,
            result_file=result,
            mtbf_s=mtbf_s,
            trigger_s=trigger_s,
            window_drops=sc.controller.shedding.window_drops,
            follow_executors=sc.controller.scaling.enabled,  # executors follow plan.scale
            warm_executors=sc.controller.scaling.warm_up,
            suspect_s=sc.controller.ha.heartbeat_timeout_s,
            fail_s=sc.controller.ha.failure_timeout_s,
            partition_speeds=sc.spark.partition_speeds,
            dpc_mode=sc.controller.ha.dpc.mode,
            dpc_max_delay_s=sc.controller.ha.dpc.max_delay_s,
        )
    except PlanRefused as e:  # a plan published for another pipeline, while it ran
        fail(str(e))
    except EndedMeanwhile as e:
        return _ended_meanwhile(e)
    except (ValueError, RuntimeError) as e:
        fail(jvm_lost() or str(e), 1)
    print_json({k: out[k] for k in DRIVER_KEYS})


def _ended_meanwhile(e: EndedMeanwhile) -> None:
    """A driver that got the lease of a pipeline another ended (``EndedMeanwhile``): a standby
    (warm or active) whose primary ended the stream has done its watch (exit 0); a primary is
    refused."""
    if e.role == "primary":
        fail(f"--workdir: {e}")
    print(f"note: {e}", file=sys.stderr)
    print_json({"role": e.role, "took_over": False, "ended_at": e.batch})


def _preflight(
    sc: ScenarioFile,
    scenario: Path,
    workdir: Path,
    master: str,
    partitions: int,
    role: str,
    trigger_s: float | None,
    default_plan: bool,
) -> None:
    """Before Spark starts: the query (from ``scenario``), the input log, the master, and a
    plan this pipeline can run (a batch run's primary needs one now; a live one may wait for
    a daemon's)."""
    check_spark_query(sc, scenario)
    writable_dir(workdir, "--workdir")  # made only at the end (its plan store failed in one
    check_input_log(workdir / "input", "--workdir", sc)  # that cannot be: a FileNotFoundError)
    check_not_ended(workdir)
    check_master(master)
    if role == "primary" and (trigger_s is None or default_plan):  # live: a daemon may publish
        ensure_plan(sc, workdir, partitions, default_plan)
    check_plan(sc, workdir, partitions)
    note_idle_partitions(sc, partitions)
    # a live driver or a standby may start first and wait for the writer and the controller:
    # its workdir is made now, once nothing is refused (its lease was opened in a missing one)
    writable_dir(workdir, "--workdir", make=True)


DRIVER_KEYS = (  # what pipeline run prints of the driver's result
    "role",
    "epoch",
    "restored_through",
    "committed",
    "arrival_to_commit_p50_s",
    "arrival_to_commit_p99_s",
    "arrival_to_commit_max_s",
    "backlog_segments",
    "input_restamped",
    "executors_fenced",
    "executor_fencings",
    "warm_start",
)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (JSON keeps the later of two silently)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"{k!r} is given twice; the later would silently replace the earlier")
        out[k] = v
    return out


@app.command("publish-operator")
def publish_operator_cmd(
    op: Annotated[str, typer.Argument(help="the operator's id in the scenario (a filter)")],
    params: Annotated[str, typer.Option(help="its new parameters, JSON: '{\"value\": 50}'")],
    workdir: Annotated[Path, typer.Option(help="the pipeline's working directory")],
    scenario: Annotated[
        Path | None, typer.Option(help="the pipeline's scenario (default: the run's run.json)")
    ] = None,
) -> None:
    """Change an operator's parameters from the next batch on: a new plan version that the
    next batch pins (a replayed batch keeps the version it was pinned with).

    Example: trimtab publish-operator filter_v --params '{"value": 50}' --workdir work/
    """
    from controller.calibration import recorded_scenario
    from spark_adapter.actuator import PlanStore
    from spark_adapter.query import compile_query, with_operator_params

    try:
        new = json.loads(params, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        fail(f"--params: not JSON ({e.msg})")
    except ValueError as e:
        fail(f"--params: {e}")
    if not isinstance(new, dict) or not new:
        fail("--params: give a JSON object of parameters, e.g. '{\"value\": 50}'")
    try:
        current = PlanStore(workdir / "plans", read_only=True).current_version()  # makes nothing
    except ValueError as e:
        fail(str(e))
    if current is None:
        fail(f"--workdir: no plan in {workdir / 'plans'}: not a pipeline's working directory")
    check_not_ended(workdir)  # no batch would pin the new version
    plans = PlanStore(workdir / "plans")
    try:
        sc = load(scenario) if scenario is not None else recorded_scenario(workdir)
        cur = plans.load_current()
        ops = {**cur.operators, op: {**cur.operators.get(op, {}), **new}}
        with_operator_params(compile_query(sc), ops)  # refuses what the state cannot take
    except ValueError as e:
        fail(str(e))
    plan = cur.next(operators=ops, reason=f"operator {op}: parameters {new} from the next batch")
    plans.publish(plan)
    print_json({"plan_version": plan.version, "operator": op, "params": ops[op]})


# what each fault reads: its target argument and the options it acts on
_FAULT_USES = {
    "kill-executor": ("target", "workdir"),
    "lose-executor": ("target", "workdir"),
    "stop-executor": ("target", "workdir", "seconds"),
    "kill-driver": ("workdir",),
    "silence-stream": ("target", "workdir", "seconds"),
    "kill-controller": ("decision_log",),
    "stop-controller": ("decision_log", "seconds"),
    "stop-controller-in-commit": ("decision_log", "seconds"),
}


def _check_fault_flags(
    ctx: typer.Context, fault: str, target: str | None, known: tuple[str, ...]
) -> None:
    """Exit 2 naming an unknown fault, or a target or an option the fault would ignore (a kill
    with --seconds, an executor fault with --decision-log, a controller fault with --workdir
    or a target)."""
    if fault not in known:
        fail(f"fault: {fault!r} is not {', '.join(known[:-1])} or {known[-1]}")
    uses = _FAULT_USES[fault]
    if target is not None and "target" not in uses:
        fail(f"target: {fault} takes no target (got {target!r})")
    for p in ("workdir", "seconds", "decision_log"):
        if p not in uses and given(ctx, p):
            users = [f for f, u in _FAULT_USES.items() if p in u]
            flag = "--" + p.replace("_", "-")
            fail(f"{flag}: {fault} does not use it (used by {', '.join(users)})")


@app.command("inject")
def inject_cmd(
    ctx: typer.Context,
    fault: Annotated[
        str,
        typer.Argument(
            help="kill-executor, lose-executor, stop-executor, kill-driver, "
            "silence-stream, kill-controller, stop-controller or stop-controller-in-commit"
        ),
    ],
    target: Annotated[
        str | None,
        typer.Argument(help="executor id (executor faults); stream (silence-stream)"),
    ] = None,
    workdir: Annotated[
        Path, typer.Option(help="the running pipeline's working directory (app.json)")
    ] = Path("."),
    seconds: Annotated[
        float,
        typer.Option(
            callback=finite,
            min=0.1,
            max=86400,  # a day; past 9.2e9 s the helper's sleep overflowed (never resumed)
            help="stop-executor, stop-controller(-in-commit): how long to stop it; "
            "silence-stream: how "
            "long the live writer holds the stream back",
        ),
    ] = 10.0,
    decision_log: Annotated[
        Path | None,
        typer.Option(
            help="controller faults: the controllers' decision log (its lease is beside it)"
        ),
    ] = None,
) -> None:
    """Inject a fault into a running pipeline, a replay or a live driver (its workdir/app.json
    names the application and the driver), into the controller holding the lease of a
    decision log, or into a live input log (silence-stream: the writer holds the stream's rows
    back for --seconds, then delivers them as a backlog; DPC, ha.dpc).

    Example: trimtab inject kill-executor 1 --workdir /tmp/run
    """
    from controller.leadership import CONTROLLER_FAULTS, controller_fault
    from spark_adapter.faults import FAULTS, inject

    _check_fault_flags(ctx, fault, target, (*FAULTS, "silence-stream", *CONTROLLER_FAULTS))
    try:
        if fault == "silence-stream":
            from spark_adapter.source import silence_stream

            print_json(silence_stream(workdir / "input", target, seconds))
            return
        if fault in CONTROLLER_FAULTS:
            print_json(controller_fault(fault, decision_log, seconds))
            return
        print_json(inject(fault, target, workdir, seconds))
    except ValueError as e:
        fail(str(e))
    except LookupError as e:
        fail(str(e), 1)


@app.command("cluster")
def cluster_cmd(
    ctx: typer.Context,
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
    from core.footprint import machine_memory
    from spark_adapter.cluster import (
        ClusterState,
        cluster_down,
        cluster_status,
        cluster_up,
        worker_memory_problem,
    )

    if action not in ("up", "down", "status"):
        fail(f"action: {action!r} is not up, down or status")
    for p in ("workers", "cores", "memory"):
        if action != "up" and given(ctx, p):
            fail(f"--{p}: shapes what cluster up starts; cluster {action} does not use it")
    if state_dir.exists() and not state_dir.is_dir():
        fail(f"--state-dir: {state_dir} is not a directory")
    state_file = state_dir / "cluster.json"
    try:
        ClusterState.load(state_file)
    except ValueError as e:
        fail(f"--state-dir: {e}; stop its processes by pid and remove it")
    if action == "up":
        if problem := worker_memory_problem(memory, workers, machine_memory()):
            fail(f"--memory: {problem}")
        writable_dir(state_dir, "--state-dir", make=True)
        try:
            st = cluster_up(state_file, workers, cores, memory)
        except (RuntimeError, TimeoutError) as e:
            fail(str(e), 3)
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
        print_json({"stopped": cluster_down(state_file)})
    else:
        print_json(cluster_status(state_file))
