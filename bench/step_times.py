"""How long the correlation methods' global step and a control round take at scale, for the
adaptive loop's bench (``bench.bench_adaptive`` writes the tables): the whole global step
beside the block greedy alone and the exact greedy (one unit per scoring), with the plans'
variance ratios, and one round of each pair-wise method, with and without the stale-placement
trigger firing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from controller.placements import Correlation
from core import loadstats
from placement import correlation, correlation_global

__all__ = ["control_round_times", "global_step_times"]


def _instance(n: int, m: int) -> np.ndarray:
    """m phase-shifted periodic units (k = 10) at 70% of n unit-capacity nodes."""
    rng = np.random.default_rng(0)
    t = np.arange(10)
    ph = rng.uniform(0, 2 * np.pi, m)
    x = rng.uniform(0.2, 1.0, (m, 1)) * (1 + 0.8 * np.sin(2 * np.pi * t / 10 + ph[:, None]))
    return np.asarray(x * (0.7 * n / x.mean(axis=1).sum()))


def _variance(x: np.ndarray, a: np.ndarray, n: int) -> float:
    return float(loadstats.variances(loadstats.node_series(x, a, n)).mean())


def _timed(f: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def global_step_times(budget_s: float = 30.0) -> str:
    """The whole global step (greedy, one-way repair, correlation improvement, variance
    descent) beside the greedy alone, with blocks and exact (one unit per scoring; up to
    10,000 units); a larger size is not run once one took over budget_s."""
    rows, over = [], False
    exact = correlation.CorrelationParams(greedy_block=0)
    # the kernels' first call imports numba and compiles (or loads) them: not the step's time
    # (above 400 units the variance descent takes its batched steps, whose kernel it is)
    correlation_global.initial_placement(_instance(4, 512), np.ones(4))
    for n, m in [(10, 1000), (50, 1000), (100, 10_000), (1000, 100_000)]:
        if over:
            rows.append(f"| {n} | {m} | not run | | | | | |")
            continue
        x, cap = _instance(n, m), np.ones(n)
        a_blk, t_blk = _timed(lambda: correlation.global_greedy(x, n, cap))
        if m <= 10_000:
            a_ex, t_ex = _timed(lambda: correlation.global_greedy(x, n, cap, exact))
            ex_t, ratio = f"{t_ex:.2f}", f"{_variance(x, a_blk, n) / _variance(x, a_ex, n):.3f}"
        else:
            ex_t = ratio = "not run"
        a_all, t_all = _timed(lambda: correlation_global.initial_placement(x, cap))
        gain = _variance(x, a_all, n) / _variance(x, a_blk, n)
        rows.append(f"| {n} | {m} | {ex_t} | {t_blk:.2f} | {ratio} | {t_all:.2f} | {gain:.3f} |")
        over = t_all > budget_s
    return "\n".join(rows)


def control_round_times(n: int = 100, m: int = 10_000) -> str:
    """One control round of each correlation method after its global step (no global step
    in the round): the stale trigger's summary, the pair-wise round and its explanation.
    The units on a quarter of the nodes load 50% more, so pairs form and moves happen."""
    x, cap = _instance(n, m), np.ones(n)
    a = correlation_global.initial_placement(x, cap)
    x = np.where((a < n // 4)[:, None], 1.5 * x, x)
    pause = np.full(m, 0.5)
    ctx = SimpleNamespace(
        cluster=SimpleNamespace(capacities=lambda: cap, ids=[f"n{i}" for i in range(n)], n=n),
        units=SimpleNamespace(ids=[f"u{j}" for j in range(m)]),
        settings=SimpleNamespace(
            window_k=10,
            placement=SimpleNamespace(max_moves=10**9, migration_aware=True, churn_rounds=2),
        ),
        unit_pause_s=lambda: pause,
    )
    rows = []
    for method in ("oneway", "twoway", "selective"):
        best, moved = float("inf"), 0
        for _ in range(3):  # a fresh policy each time: the same round, timed three times
            policy = Correlation(method, {})
            policy.skip_global_step()
            # armed on this window, so the trigger checks it but does not fire
            policy.trigger.rebase(policy._summary(ctx, x, a))  # type: ignore[arg-type]
            res, t = _timed(lambda: policy.rebalance(ctx, x, a.copy(), np.ones(n, bool)))  # type: ignore[arg-type]
            best, moved = min(best, t), int(np.count_nonzero(res.assignment != a))
        rows.append(f"| correlation-{method} | {n} | {m} | {best * 1e3:.1f} | {moved} | |")
    # a round in which the trigger fires: the loads 20% higher than its baseline's window, so
    # nodes overload; the whole stale path (the global step, its overload-descent refinement,
    # the variance descent, their scoring) and the first step toward the chosen plan
    hot = 1.2 * x
    best, moved, chosen = float("inf"), 0, ""
    for _ in range(3):
        policy = Correlation("twoway", {"stale_rounds": 1})
        policy.skip_global_step()
        policy.trigger.rebase(policy._summary(ctx, x, a))  # type: ignore[arg-type]
        res, t = _timed(lambda: policy.rebalance(ctx, hot, a.copy(), np.ones(n, bool)))  # type: ignore[arg-type]
        best, moved = min(best, t), int(np.count_nonzero(res.assignment != a))
        chosen = str(res.details.get("chosen", "held"))
    rows.append(
        f"| correlation-twoway, the trigger firing | {n} | {m} | {best * 1e3:.1f} | {moved} | "
        f"{chosen} |"
    )
    return "\n".join(rows)
