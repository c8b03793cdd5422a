"""The adaptive loop: pair moves judged by the method's own rule, the stale-placement trigger,
and adaptation figures, with the policy driven in ControlLoop by a fake substrate."""

from __future__ import annotations

import numpy as np

from controller.loop import ControlLoop
from controller.scenario import load_scenario
from controller.testing import FakeSubstrate
from controller.wiring import make_context, make_policy
from core import loadstats
from core.cluster import NodeStatus
from core.observation import Observation
from tests.conftest import SCENARIOS

K = 10


def _observations(kinds: list[np.ndarray], n: int, rounds: list[int]) -> list[Observation]:
    """One sample per round: unit i follows a rising or a falling wave as ``kinds`` says."""
    out = []
    t = 0
    for kind, count in zip(kinds, rounds, strict=True):
        for _ in range(count):
            wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / K)
            load = 0.1 * np.where(kind == 1, wave, 1.0 - wave)
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


def _loop(params: dict[str, float]) -> tuple[ControlLoop, np.ndarray, np.ndarray]:
    sc = load_scenario(SCENARIOS / "anticorrelated-diurnal.yaml")
    placement = sc.controller.placement.model_copy(
        update={"method": "correlation-oneway", "params": params, "max_moves": 8}
    )
    sc = sc.with_controller(placement=placement, window_k=K)
    ctx = make_context(sc)
    m = ctx.units.m
    before = np.arange(m) % 2  # units alternate rising/falling
    after = (np.arange(m) // 2) % 2  # a drift: neighbours now move together
    obs = _observations([before, after], ctx.cluster.n, [25, 40])
    loop = ControlLoop(FakeSubstrate(obs), make_policy(sc, ctx=ctx), window_k=K)
    loop.start()
    for _ in range(len(obs)):
        loop.tick()
    return loop, before, after


def _variance(loop: ControlLoop, unit_x: np.ndarray) -> float:
    nx = loadstats.node_series(unit_x, loop.plan.placement.as_array(), loop.policy.ctx.cluster.n)
    return loadstats.node_summary(nx)["node_variance_mean"]


def test_the_stale_trigger_reruns_the_global_step_after_a_drift() -> None:
    loop, _, after = _loop({"stale_trigger": 1.0})
    reasons = [r.reason for r in loop.records]
    first = next(i for i, r in enumerate(reasons) if r.startswith("global correlation"))
    stale = [i for i, r in enumerate(reasons) if r.startswith("stale placement")]
    assert first < 25 <= stale[0], reasons
    # the re-run plan is reached max_moves (8) units per round, in several rounds
    assert all(loop.records[i].details.get("moved_now", 0) <= 8 for i in stale)
    assert len(stale) >= 2
    # and it fits the new correlations: node variance on the drifted loads is far lower than
    # with the trigger off (the single Borealis global step)
    off, _, _ = _loop({})  # the default: off
    assert not any(r.reason.startswith("stale placement") for r in off.records)
    t = np.arange(K)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / K)
    x = 0.1 * np.where(after[:, None] == 1, wave[None, :], 1.0 - wave[None, :])
    assert _variance(loop, x) < 0.25 * _variance(off, x)
