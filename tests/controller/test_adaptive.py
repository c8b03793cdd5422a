"""The adaptive loop: pair moves judged by the method's own rule, the stale-placement trigger,
and adaptation figures, with the policy driven in ControlLoop by a fake substrate."""

from __future__ import annotations

import numpy as np

from controller.loop import ControlLoop
from controller.placements import Correlation
from controller.replay import ReplayResult, replay_sim
from controller.scenario import load_scenario
from controller.testing import FakeSubstrate
from controller.wiring import make_context, make_policy
from core import loadstats
from core.cluster import NodeStatus
from core.observation import Observation
from placement.migration_cost import overload
from tests.conftest import SCENARIOS

K = 10


def _observations(
    kinds: list[np.ndarray], n: int, rounds: list[int], peak: float
) -> list[Observation]:
    """One sample per round: unit i follows a rising or a falling wave (0..peak) as ``kinds``
    says."""
    out = []
    t = 0
    for kind, count in zip(kinds, rounds, strict=True):
        for _ in range(count):
            wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / K)
            load = peak * np.where(kind == 1, wave, 1.0 - wave)
            out.append(
                Observation(
                    time_s=float(t),
                    unit_load=load[:, None],
                    node_load=np.zeros((n, 1)),
                    input_rates=np.zeros((0, 1)),
                    node_status=tuple([NodeStatus.UP] * n),
                    backlog_s=np.zeros(n),
                )
            )
            t += 1
    return out


def _loop(
    params: dict[str, float], peak: float = 0.3, aware: bool = True
) -> tuple[ControlLoop, np.ndarray, np.ndarray]:
    """40 units on 8 nodes; at peak 0.3 a node of in-phase units peaks above capacity after
    the drift, while a mixed one stays flat at 0.75."""
    sc = load_scenario(SCENARIOS / "anticorrelated-diurnal.yaml")
    update = {
        "method": "correlation-oneway",
        "params": params,
        "max_moves": 8,
        "migration_aware": aware,
    }
    placement = sc.controller.placement.model_copy(update=update)
    sc = sc.with_controller(placement=placement, window_k=K)
    ctx = make_context(sc)
    m = ctx.units.m
    before = np.arange(m) % 2  # units alternate rising/falling
    after = (np.arange(m) // 2) % 2  # a drift: neighbours now move together
    obs = _observations([before, after], ctx.cluster.n, [25, 40], peak)
    loop = ControlLoop(FakeSubstrate(obs), make_policy(sc, ctx=ctx), window_k=K)
    loop.start()
    for _ in range(len(obs)):
        loop.tick()
    return loop, before, after


def _variance(loop: ControlLoop, unit_x: np.ndarray) -> float:
    nx = loadstats.node_series(unit_x, loop.plan.placement.as_array(), loop.policy.ctx.cluster.n)
    return loadstats.node_summary(nx)["node_variance_mean"]


def test_the_stale_trigger_reruns_the_global_step_after_a_drift() -> None:
    loop, _, after = _loop({})  # the default: on
    reasons = [r.reason for r in loop.records]
    first = next(i for i, r in enumerate(reasons) if r.startswith("global correlation"))
    stale = [i for i, r in enumerate(reasons) if r.startswith("stale placement")]
    assert first < 25 <= stale[0], reasons
    # the re-run plan is reached max_moves (8) units per round, in several rounds
    assert all(loop.records[i].details.get("moved_now", 0) <= 8 for i in stale)
    assert len(stale) >= 2
    # and it fits the new correlations: node variance on the drifted loads is far lower than
    # with the trigger off (the single Borealis global step)
    off, _, _ = _loop({"stale_trigger": 0.0})
    assert not any(r.reason.startswith("stale placement") for r in off.records)
    t = np.arange(K)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / K)
    x = 0.3 * np.where(after[:, None] == 1, wave[None, :], 1.0 - wave[None, :])
    assert _variance(loop, x) < 0.25 * _variance(off, x)
    # the re-run removes the overload it was chosen for
    cap = np.ones(loop.policy.ctx.cluster.n)
    nodes = loadstats.node_series(x, loop.plan.placement.as_array(), cap.size)
    assert (
        overload(nodes, cap)
        == 0.0
        < overload(loadstats.node_series(x, off.plan.placement.as_array(), cap.size), cap)
    )


def test_a_stale_placement_without_overload_is_not_worth_its_pauses() -> None:
    """The same drift at a third of the load: no node reaches 0.9 of its capacity, so the
    migration-aware trigger holds, naming the numbers; unaware, it re-places."""
    loop, _, _ = _loop({}, peak=0.1)
    held = [r for r in loop.records if "no re-placement is worth its pauses" in r.reason]
    assert held and not any(r.applied for r in loop.records[25:]), [r.reason for r in loop.records]
    d = held[0].details["candidates"]["global step again"]
    assert d["gain_cpu_s"] == 0.0 < d["pause_cpu_s"]
    unaware, _, _ = _loop({}, peak=0.1, aware=False)
    assert any(r.reason.startswith("stale placement") and r.applied for r in unaware.records)


def _replay(name: str, method: str, **update: object) -> ReplayResult:
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    p = sc.controller.placement
    params = {**p.params, **update.pop("params", {})}  # type: ignore[dict-item]
    sc = sc.with_controller(placement=p.model_copy(update={"params": params, **update}))
    return replay_sim(sc, placement=method, seed=sc.seed)


def _after(r: ReplayResult) -> float:
    return float(r.summary["adaptation"][0]["latency_after_s"])


def test_a_phase_flip_is_repaired_in_the_loop() -> None:
    """diurnal-phase-flip: no node's mean changes, so only the trigger can see the flip; the
    shipped two-way re-places once and its latency after the flip is far below LLF's and the
    trigger-off run's."""
    on = _replay("diurnal-phase-flip", "correlation-twoway")
    off = _replay("diurnal-phase-flip", "correlation-twoway", params={"stale_trigger": 0.0})
    llf = _replay("diurnal-phase-flip", "llf")
    assert _after(on) < 0.5 * _after(off) and _after(on) < 0.5 * _after(llf)
    stale = [d for d in on.decisions if d.applied and d.reason.startswith("stale placement")]
    assert stale and all(d.time_s > 600 for d in stale), [d.reason for d in on.decisions]
    assert "CPU-s of overload" in stale[0].reason
    # correlation placement waits for a full window before its global step
    first = next(d for d in on.decisions if d.applied)
    assert first.reason.startswith("global correlation") and first.time_s >= 20
    assert any(d.reason.startswith("warm-up: ") for d in on.decisions if d.time_s < 20)


def test_a_pair_move_the_acceptance_rule_held_says_so_with_its_numbers() -> None:
    """After the flip's re-placement, one-way's pair moves would narrow each pair's load gap
    but raise its max divergent load: every such round is a hold that names the rule and the
    worst pair's numbers (as its details hold them), not only '0 accepted'."""
    r = _replay("diurnal-phase-flip", "correlation-oneway")
    held = [
        d
        for d in r.decisions
        if d.details.get("phase") == "pairwise"
        and any(p["moves"] > 0 and not p["accepted"] for p in d.details["pairs"])
    ]
    assert held, [d.reason for d in r.decisions]
    for d in held:
        assert not d.applied and "held by the acceptance rule" in d.reason, d.reason
        rejected = [p for p in d.details["pairs"] if p["moves"] > 0 and not p["accepted"]]
        assert all(p["max_d_after"] > p["max_d_before"] for p in rejected)  # why it held
        worst = max(rejected, key=lambda p: p["max_d_after"] - p["max_d_before"])
        assert f"{len(rejected)} pair(s) held" in d.reason
        assert f"max D {worst['max_d_before']:.3g} -> {worst['max_d_after']:.3g}" in d.reason


def _flip_every(interval_s: float, **params: float) -> ReplayResult:
    """diurnal-phase-flip, two-way, with a control round every ``interval_s``."""
    sc = load_scenario(SCENARIOS / "diurnal-phase-flip.yaml").with_controller(interval_s=interval_s)
    p = sc.controller.placement
    sc = sc.with_controller(placement=p.model_copy(update={"params": {**p.params, **params}}))
    return replay_sim(sc, placement="correlation-twoway", seed=sc.seed)


def test_an_overload_descent_repairs_what_no_balanced_plan_can() -> None:
    """Rounds every 20 s: the trigger fires at 640 s on a window in which the bursty stream is
    off, and there every plan with balanced node means overloads a node, the global step's
    too. Its plan refined by the overload descent does not, and the run recovers (without the
    refinement it never did: latency after 0.35 s)."""
    r, off = _flip_every(20), _flip_every(20, stale_trigger=0.0)
    stale = [d for d in r.decisions if d.reason.startswith("stale placement")]
    assert stale and stale[0].applied, [d.reason for d in stale]
    first = stale[0].details
    assert first["chosen"] == "global step again, then overload descent"
    cands = first["candidates"]
    assert (
        cands["global step again"]["gain_cpu_s"]
        < 0.5 * cands["global step again, then overload descent"]["gain_cpu_s"]
    )
    a = r.summary["adaptation"][0]
    assert a["adaptation_rounds"] is not None and a["latency_after_s"] < 0.5 * _after(off)


def test_a_held_firing_keeps_the_baseline_and_backs_off() -> None:
    """Rounds every 2 s: after a first re-placement the trigger fires again while overload
    lingers, but no re-placement pays on that window (held); it keeps the baseline and the
    next firing needs 4, then 8 worse rounds, and the one that comes re-places (taking the
    drifted state as the new baseline never fired again at 5 s rounds)."""
    r = _flip_every(2)
    stale = [d for d in r.decisions if d.reason.startswith("stale placement")]
    held = [d for d in stale if not d.applied]
    assert [d.details["retry_after_rounds"] for d in held[:2]] == [4, 8], [d.reason for d in stale]
    later = [d for d in stale if d.applied and d.time_s > held[1].time_s]
    assert later and "for 8 rounds" in later[0].reason, [d.reason for d in stale]
    assert r.summary["adaptation"][0]["adaptation_rounds"] is not None


def test_overload_a_global_step_left_is_not_accepted() -> None:
    """Rounds every second: the trigger fires at 605 s on the first in-phase peak, while the
    window shows the flip only in part, and that re-placement leaves overload once the whole
    flip is in the window. The overload limit is absolute, so the trigger fires again and the
    run recovers, with latency after the flip below the 10 s rounds' (an overload limit
    relative to what that re-placement left never fired again: latency after 0.11 s)."""
    r = _flip_every(1)
    applied = [d for d in r.decisions if d.applied and d.reason.startswith("stale placement")]
    assert len(applied) >= 2 and applied[0].time_s < 610, [d.reason for d in applied]
    a = r.summary["adaptation"][0]
    assert a["adaptation_rounds"] is not None
    assert a["latency_after_s"] < _after(_flip_every(10))


def test_a_random_start_is_repaired_by_the_overload_criterion() -> None:
    """Without a global step there is no baseline, but a placement that overloads its nodes is
    stale: the trigger re-places it, and the run is far faster than pair-wise rounds alone."""
    on = _replay("chain-arrival", "correlation-oneway", initial="random")
    off = _replay(
        "chain-arrival", "correlation-oneway", initial="random", params={"stale_trigger": 0.0}
    )
    assert any(d.applied and d.reason.startswith("stale placement (overload") for d in on.decisions)
    assert on.summary["mean_latency"] < 0.5 * off.summary["mean_latency"]
    # after a re-placement, pair-wise rounds wait for the window to show it
    reasons = [d.reason for d in on.decisions]
    assert any(r.startswith("settling: ") for r in reasons)


def test_units_without_load_keep_their_place_in_a_global_step() -> None:
    sc = load_scenario(SCENARIOS / "chain-arrival.yaml")
    ctx = make_context(sc)
    x = np.random.default_rng(0).random((ctx.units.m, 20))
    idle = np.array([u.startswith("c5_") for u in ctx.units.ids])
    assert idle.sum() == 4
    x[idle] = 0.0
    start = np.arange(ctx.units.m) % ctx.cluster.n
    plan = Correlation("twoway")._global(ctx, x, start)
    assert (plan[idle] == start[idle]).all() and (plan[~idle] != start[~idle]).any()


def test_flat_node_loads_do_not_fire_the_trigger() -> None:
    """After the global step on the stationary anticorrelated-diurnal, the nodes' loads are flat:
    a constant series' correlation counts 0, which once fired the trigger on a perfect
    placement; not migration-aware, every such firing re-placed (14 units moved after a
    21-unit global step)."""
    r = _replay("anticorrelated-diurnal", "correlation-oneway", migration_aware=False)
    applied = [d for d in r.decisions if d.applied and d.kind.startswith("place")]
    assert applied and applied[0].reason.startswith("global correlation"), applied
    assert len(applied) == 1, [d.reason for d in applied]  # nothing moved after it
    assert not any(d.reason.startswith("stale placement") for d in r.decisions)


def test_a_global_step_that_moves_nothing_says_so() -> None:
    """A resumed daemon's placement already is the global step's plan; its first round said
    "global correlation placement after warm-up: 0 of 0 unit(s) moved toward it"."""
    sc = load_scenario(SCENARIOS / "chain-arrival.yaml")
    ctx = make_context(sc)
    x = np.random.default_rng(0).random((ctx.units.m, ctx.settings.window_k))
    start = np.arange(ctx.units.m) % ctx.cluster.n
    method = Correlation("twoway")
    there = method._global(ctx, x, start)  # the plan it would make, already in place
    res = method.rebalance(ctx, x, there, np.ones(ctx.cluster.n, dtype=bool))
    assert (res.assignment == there).all()
    assert res.reason == "global correlation placement after warm-up: no unit to move toward it"
    moved = Correlation("twoway").rebalance(ctx, x, start, np.ones(ctx.cluster.n, dtype=bool))
    assert " unit(s) moved toward it" in moved.reason and "0 of " not in moved.reason


def test_a_round_without_pairs_names_the_widest_gap_against_the_threshold() -> None:
    """The stationary workload's pair-wise rounds form no pair: each hold says by how much the
    widest node gap falls short of pair_threshold (it said only 'no node pair differs')."""
    r = _replay("anticorrelated-diurnal", "correlation-twoway")
    quiet = [
        d for d in r.decisions if d.details.get("phase") == "pairwise" and not d.details["pairs"]
    ]
    assert len(quiet) > 10, [d.reason for d in r.decisions]
    for d in quiet:
        gap, th = d.details["widest_gap"], d.details["pair_threshold"]
        assert 0 <= gap < th, d.details
        assert f"widest mean-load gap {gap:.3g} is below pair_threshold {th:g}" in d.reason
