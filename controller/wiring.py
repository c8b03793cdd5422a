"""The one place that builds what a run needs: the controller's context, its policy, the
simulator and the daemon's substrate. Replays (simulator and Spark) and the daemon all wire
through here, so a scenario means the same controller everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from controller.config import Settings
from controller.loop import Substrate
from controller.placements import PLACEMENTS, placement_method
from controller.policy import Context, ControlPolicy
from controller.routing import RoutingPolicy
from controller.scenario import ScenarioFile, load_scenario
from controller.spark_view import keyed_stage
from core.cluster import Cluster, Node
from core.topology import QueryNetwork
from core.workload import mean_key_group_shares, rates
from simulator import Simulator
from simulator.looping import LoopingSimulator

if TYPE_CHECKING:
    from controller.calibration import CalibrationOverlay

__all__ = [
    "declared_shares",
    "make_context",
    "make_daemon_wiring",
    "make_policy",
    "make_simulator",
    "params_left_out",
    "spark_context",
    "with_shedding",
]


def declared_shares(scenario: ScenarioFile, net: QueryNetwork) -> list[np.ndarray]:
    """Per operator, each key group's share of each input stream's tuples, ``(g, d)``: the
    stream's declared key distribution averaged over the scenario (``mean_key_group_shares``)
    where the operator reads that stream, uniform elsewhere. What a deployment knows before
    any measurement, and what the simulator's own load model follows per epoch."""
    reads = net.rate_coefficients() > 0  # (operators, streams)
    d = len(scenario.streams)
    out = []
    for i, op in enumerate(net.operators):
        g = op.key_groups
        share = np.full((g, d), 1.0 / g)
        if g > 1:
            for k in np.flatnonzero(reads[i]):
                keys = scenario.streams[k].keys
                share[:, k] = mean_key_group_shares(keys, g, scenario.duration_s)
        out.append(share)
    return out


def make_context(scenario: ScenarioFile) -> Context:
    """The controller's static context for a scenario on the simulator: key groups' loads
    from the streams' declared keys (``declared_shares``), as on Spark."""
    net = scenario.network()
    expected = rates(scenario).mean(axis=0) / scenario.tick_s * scenario.simulator.rate_scale
    return Context(
        network=net,
        units=net.units(declared_shares(scenario, net)),
        cluster=scenario.cluster_model(),
        expected_rates=expected,
        settings=scenario.controller,
        seed=scenario.seed,
        migration_base_s=scenario.simulator.migration_base_s,
        migration_s_per_mb=scenario.simulator.migration_s_per_mb,
    )


def spark_context(
    scenario: ScenarioFile,
    query: Any,
    partitions: int,
    scale: float,
    calibration: CalibrationOverlay | None = None,
) -> Context:
    """The controller's view of a Spark pipeline: key groups of the keyed stage on partitions.

    A key group's load per stream is its share of that stream's declared keys (averaged over
    the scenario), so key groups hot in different streams are told apart (what ROD places by).
    Uncalibrated, a row costs the scenario's modelled CPU and a partition is one core. With a
    calibration (``trimtab calibrate``), a row costs the measured seconds, and a partition's
    capacity is what a batch leaves for work: ``(tick_s - batch_overhead_s -
    task_overhead_s) / tick_s`` cores, so shedding starts where batches stop keeping up."""
    streams = list(query.sides)  # a split stream's paths are streams here: drops after it
    cost = {s: query.cost_us.get(s, 0.0) for s in streams}
    cap = 1.0
    if calibration is not None:  # the measured cost per row, each path's in its proportion
        c = calibration.calibration
        cost = {
            s: v * c.measured_us_per_row / max(c.modelled_us_per_row, 1e-9) for s, v in cost.items()
        }
        bm = calibration.simulator.batch_model
        cap = bm.capacity(scenario.tick_s)
    net = keyed_stage(query.op_id, query.key_groups, cost)
    ids = [s.id for s in scenario.streams]
    pos = [ids.index(query.stream_of(s)) for s in streams]
    # a key group's load per stream follows that stream's declared key distribution
    shares = np.stack(
        [
            mean_key_group_shares(scenario.streams[i].keys, query.key_groups, scenario.duration_s)
            for i in pos
        ],
        axis=1,
    )
    expected = rates(scenario).mean(axis=0)[pos] / scenario.tick_s * scale
    cluster = Cluster(tuple(Node(f"p{i}", cap, 1.0) for i in range(partitions)))
    return Context(
        net,
        net.units([shares]),
        cluster,
        expected,
        scenario.controller,
        scenario.seed,
        scenario.simulator.migration_base_s,
        scenario.simulator.migration_s_per_mb,
    )


def make_policy(
    scenario: ScenarioFile,
    placement: str | None = None,
    ctx: Context | None = None,
    routing: RoutingPolicy | None = None,
    in_blackout: Callable[[], bool] | None = None,
) -> ControlPolicy:
    """The control policy the scenario's settings name (``placement`` overrides the method).

    ``controller.placement.initial`` names a different method for the initial plan (e.g. ROD
    at deployment, correlation rounds afterwards); a correlation method then skips its own
    global step.
    """
    s = scenario.controller.placement
    method = placement_method(placement or s.method, s.params, "placement")
    initial = None
    if s.initial:
        initial = placement_method(s.initial, s.params, "controller.placement.initial")
        method.skip_global_step()
    return ControlPolicy(
        ctx or make_context(scenario), method, initial, routing=routing, in_blackout=in_blackout
    )


def with_shedding(scenario: ScenarioFile, method: str | None) -> ScenarioFile:
    """The scenario with its shedding method replaced (``None`` keeps it); an unknown method
    is a ``ValueError`` naming it."""
    if method is None:
        return scenario
    from controller.shedding import METHODS

    if method not in METHODS:
        raise ValueError(f"shedding: unknown method {method!r} (known: {', '.join(METHODS)})")
    shed = scenario.controller.shedding.model_copy(update={"method": method})
    return scenario.with_controller(shedding=shed)


def make_simulator(scenario: ScenarioFile, seed: int | None = None) -> Simulator:
    """The simulator of a scenario, carrying out its availability policy."""
    ha = scenario.controller.ha
    return Simulator(scenario, seed, ha.policy, ha.checkpoint_interval)


def params_left_out(settings: Settings) -> dict[str, Any]:
    """What the daemon's placement leaves out of the steered scenario's
    ``controller.placement.params``: a config that names another method (and no params of
    its own) keeps the scenario's params, which that method may not read. Empty when it
    reads them all; else the method, the params left out and the method they were set for.
    (The config's own params are checked against its method when it loads.)"""
    from controller.placement_params import unread_params

    theirs = load_scenario(settings.substrate.scenario).controller
    p = settings.controller_settings(theirs).placement
    unread = unread_params(p.method, p.initial, p.params)
    if not unread:
        return {}
    left = {k: p.params[k] for k in unread}
    return {"method": p.method, "params_left_out": left, "set_for": theirs.placement.method}


def make_daemon_wiring(
    settings: Settings, in_blackout: Callable[[], bool] | None = None
) -> tuple[Substrate, ControlPolicy]:
    """The daemon's substrate and policy: the configured scenario on a looping simulator, or
    an external Spark pipeline's working directory, steered with the config's settings over
    the scenario's."""
    sub = settings.substrate
    sc = load_scenario(sub.scenario)
    own_interval_s = sc.controller.interval_s  # simulated seconds per round: the scenario's
    sc = sc.model_copy(update={"controller": settings.controller_settings(sc.controller)})
    if settings.placement.method not in PLACEMENTS:  # named in the config: blame the config
        placement_method(settings.placement.method, {}, "placement.method")
    if sub.kind == "sim":
        ticks = sub.ticks_per_round or max(1, round(own_interval_s / sc.tick_s))
        looping = LoopingSimulator(lambda: make_simulator(sc), ticks)
        return looping, make_policy(sc, in_blackout=in_blackout)
    from spark_adapter.external import (
        ExternalSparkSubstrate,
        PipelineMismatch,
        ended_problem,
        workdir_mismatch,
    )
    from spark_adapter.query import compile_query

    if not sub.workdir:
        raise ValueError("substrate.workdir: spark-external needs the pipeline's working directory")
    try:
        q = compile_query(sc)
    except ValueError as e:  # the pipeline could not run it either
        raise ValueError(f"substrate.scenario: {sub.scenario}: {e}") from None
    paths = list(q.sides)
    # a workdir whose batches are another pipeline's, or whose pipeline has ended: stop
    # before anything is written
    problem = workdir_mismatch(sub.workdir, paths, sub.partitions, q.key_groups)
    if problem := problem or ended_problem(sub.workdir):
        raise PipelineMismatch(problem)
    inputs = [q.stream_of(s) for s in paths]
    dry = settings.control.dry_run
    ext = ExternalSparkSubstrate(
        sub.workdir, paths, sub.partitions, sc.tick_s, inputs, q.key_groups, dry_run=dry
    )
    cal = None
    if sub.calibration:
        from controller.calibration import apply_overlay, load_overlay

        try:
            cal = load_overlay(Path(sub.calibration))
            apply_overlay(sc, cal)  # it must be this scenario's
        except ValueError as e:
            raise ValueError(f"substrate.calibration: {e}") from None
    ctx = spark_context(sc, q, sub.partitions, 1.0, cal)
    routing = RoutingPolicy(sc.controller.partitioner, q.op_id, q.key_groups, sub.partitions)
    return ext, make_policy(sc, ctx=ctx, routing=routing, in_blackout=in_blackout)
