"""Side-by-side runs: ``compare`` replays several placements on the same seeds; ``place``
reports static placements with their feasible-set ratio, node loads and inter-node arcs."""

from __future__ import annotations

from typing import Any

import numpy as np

from controller.migration_causes import mean_by_cause
from controller.placements import PLACEMENTS, Correlation
from controller.replay import replay_sim
from controller.scenario import ScenarioFile
from controller.shedding import shed_model, solve
from controller.wiring import make_context, make_policy
from core import loadstats
from core.workload import rates
from placement import baselines, correlation_global
from placement.feasible import feasible_set_ratio, min_plane_distance

__all__ = [
    "DPC_KEYS",
    "HA_KEYS",
    "compare",
    "compare_ha",
    "mean_adaptation",
    "mean_figure",
    "place",
    "shed_at",
]

HA_KEYS = (
    "runtime_overhead",
    "recovery_time_mean",
    "recovery_time_max",
    "lost_tuples",
    "duplicate_tuples",
    "duplicates_suppressed",
    "guarantee",
)
# shown when the scenario has an input outage (``simulator.dpc``)
DPC_KEYS = (
    "tentative_fraction",
    "corrections",
    "latency_tentative_mean",
    "latency_first_p99",
    "latency_stable_mean",
    "latency_stable_p99",
)


HA_POLICIES = ("none", "upstream", "passive", "active")
"""The availability policies ``compare --ha`` runs side by side."""


def compare_ha(
    scenario: ScenarioFile, policies: list[str], seeds: int = 1, placement: str | None = None
) -> list[dict[str, Any]]:
    """The same faults under each availability policy, side by side."""
    out = []
    for pol in policies:
        if pol not in HA_POLICIES:
            raise ValueError(f"ha: unknown policy {pol!r} (known: {', '.join(HA_POLICIES)})")
        ctl = scenario.controller
        sc = scenario.model_copy(
            update={
                "controller": ctl.model_copy(
                    update={"ha": ctl.ha.model_copy(update={"policy": pol})}
                )
            }
        )
        row = compare(sc, [placement or ctl.placement.method], seeds)[0]
        row["ha"] = pol
        out.append(row)
    return out


def compare(
    scenario: ScenarioFile,
    placements: list[str],
    seeds: int = 1,
    shedding: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Mean of each replay key per placement (and per shedding method, when given) over seeds
    ``scenario.seed .. + seeds - 1``; every row carries ``placement`` and ``shedding``."""
    out = []
    sheds: list[str | None] = list(shedding) if shedding else [None]
    for name, shed in [(p, s) for p in placements for s in sheds]:
        runs = [
            replay_sim(scenario, placement=name, seed=scenario.seed + s, shedding=shed).summary
            for s in range(seeds)
        ]
        row: dict[str, Any] = dict(runs[0])
        for k in runs[0]:
            mean = None if k in ("ticks", "seed") else mean_figure([r.get(k) for r in runs])
            if mean is not None:
                row[k] = mean
        row["seeds"] = seeds
        row["shedding"] = shed or scenario.controller.shedding.method
        row["adaptation"] = mean_adaptation([r.get("adaptation", []) for r in runs])
        row["migrations_by_cause"] = mean_by_cause([r["migrations_by_cause"] for r in runs])
        out.append(row)
    return out


def mean_figure(vals: list[Any]) -> float | None:
    """The mean of a numeric figure over the runs that measured it (None in a run: not
    measured there); None when no run did, or for a figure that is not a number.

    >>> mean_figure([1, 3]), mean_figure([None, 2.0]), mean_figure([None]), mean_figure(["a"])
    (2.0, 2.0, None, None)
    """
    nums = [v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
    if not nums or len(nums) + vals.count(None) < len(vals):
        return None
    return float(np.mean(nums))


def mean_adaptation(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Adaptation figures per change time averaged over runs; ``adaptation_rounds`` is None
    when some run never adapted (the mean of the others would flatter it).

    >>> a = [{"at_s": 600.0, "latency_before_s": 0.1, "latency_after_s": 0.3, "adaptation_rounds": 6}]
    >>> b = [{"at_s": 600.0, "latency_before_s": 0.3, "latency_after_s": 0.5, "adaptation_rounds": None}]
    >>> mean_adaptation([a, a])[0]["adaptation_rounds"], mean_adaptation([a, b])[0]["adaptation_rounds"]
    (6.0, None)
    """
    if not runs or not runs[0]:
        return []
    out = []
    for i, first in enumerate(runs[0]):
        rows = [r[i] for r in runs]
        row: dict[str, Any] = {"at_s": first["at_s"]}
        for k in ("latency_before_s", "latency_after_s"):
            vals = [x[k] for x in rows if x[k] is not None]
            row[k] = float(np.mean(vals)) if vals else None
        rounds = [x["adaptation_rounds"] for x in rows]
        row["adaptation_rounds"] = None if None in rounds else float(np.mean(rounds))
        out.append(row)
    return out


def _model_series(scenario: ScenarioFile, k: int = 10) -> np.ndarray:
    """Per-unit load series from the workload model over the first k*10 ticks, averaged to k samples."""
    ctx = make_context(scenario)
    r = rates(scenario) / scenario.tick_s * scenario.simulator.rate_scale  # (T, d)
    x = ctx.units.coeff @ r.T  # (m, T)
    t = (x.shape[1] // k) * k
    return x[:, :t].reshape(x.shape[0], k, -1).mean(axis=2) if t else x


def place(
    scenario: ScenarioFile, algorithms: list[str], points: int = 2**14
) -> list[dict[str, Any]]:
    """Static placements with ``feasible_set_ratio``, node mean loads and inter-node arcs;
    each method with the scenario's ``controller.placement.params`` it reads (ROD's seed and
    search, correlation's global-step settings), as a replay would place with them."""
    if unknown := [x for x in algorithms if x not in PLACEMENTS and x != "correlation"]:
        known = ", ".join(sorted(PLACEMENTS))
        raise ValueError(
            f"--algorithm: unknown placement {unknown[0]!r} (known: {known}, correlation)"
        )
    ctx = make_context(scenario)
    cap = ctx.cluster.capacities()
    out = []
    params = dict(scenario.controller.placement.params)
    for name in algorithms:
        method = PLACEMENTS.get(name)
        placer = Correlation("oneway", params) if method is None else method(params)
        if isinstance(placer, Correlation):
            a = correlation_global.initial_placement(_model_series(scenario), cap, placer.p)
        else:
            a = placer.initial(ctx, None)
        fs = feasible_set_ratio(ctx.units.coeff, a, cap, points=points, seed=scenario.seed)
        load = loadstats.node_series(ctx.expected_unit_load()[:, None], a, cap.size)[:, 0]
        out.append(
            {
                "algorithm": name,
                "feasible_set_ratio": fs.ratio,
                "feasible_set_error": fs.error,
                "qmc_points": fs.points,
                "min_plane_distance": min_plane_distance(ctx.units.coeff, a, cap),
                "node_mean_loads": [round(float(v), 6) for v in load],
                "inter_node_arcs": baselines.inter_node_arcs(ctx.units.edges, a),
                "assignment": {ctx.units.ids[u]: ctx.cluster.ids[int(a[u])] for u in range(a.size)},
            }
        )
    return out


def shed_at(
    scenario: ScenarioFile, methods: list[str], at: float | None = None, peak: bool = False
) -> list[dict[str, Any]]:
    """Shedding plans of ``methods`` for the scenario's initial placement at one tick: at
    time ``at`` (s), at the peak total rate, or at the start. One dict per method (the plan,
    ``keep`` by location and the tick's ``time_s``)."""

    if at is not None and peak:
        raise ValueError("--peak: the rates at one time: --at or --peak, not both")
    r = rates(scenario) / scenario.tick_s * scenario.simulator.rate_scale
    if at is not None:
        if not 0 <= at < scenario.duration_s:
            raise ValueError(
                f"--at: {at} is outside the scenario's [0, {scenario.duration_s}) seconds"
            )
        row = int(at / scenario.tick_s)
    else:
        row = int(np.argmax(r.sum(axis=1))) if peak else 0
    policy = make_policy(scenario)
    ctx = policy.ctx
    placement = policy.initial_plan().placement.as_array()
    model = shed_model(ctx.network, ctx.units, placement, ctx.cluster.n, r[row])
    h = scenario.controller.shedding.headroom
    rows = []
    for m in methods:
        x = solve(m, model, ctx.cluster.capacities(), h, ctx.cluster.ids).model_dump()
        x["time_s"] = row * scenario.tick_s
        x["keep"] = dict(zip(x["locations"], x["keep"], strict=True))
        rows.append(x)
    return rows
