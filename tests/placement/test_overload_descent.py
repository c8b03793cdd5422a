"""Overload descent: each move lowers the load above theta x capacity, the result is a local
optimum of single moves, and on diurnal-phase-flip it removes the overload that a balanced
correlation plan keeps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.scenario import load_scenario
from controller.wiring import make_simulator
from core import loadstats
from placement import correlation_global
from placement.migration_cost import overload
from placement.overload_descent import reduce_overload
from tests.conftest import SCENARIOS


def _over(x: np.ndarray, a: np.ndarray, cap: np.ndarray) -> float:
    return overload(loadstats.node_series(x, a, cap.size), cap)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    m=st.integers(2, 9),
    n=st.integers(2, 4),
    k=st.integers(2, 6),
)
def test_never_worse_and_no_single_move_left(seed: int, m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 0.8, (m, k))
    x[rng.random(m) < 0.2] = 0.001  # light units never move
    cap = rng.uniform(0.5, 1.5, n)
    a = rng.integers(0, n, m)
    before, light = _over(x, a, cap), x.mean(axis=1) < 0.005
    was = a.copy()
    steps = reduce_overload(x, a, cap)
    after = _over(x, a, cap)
    assert after <= before + 1e-12
    assert (a[light] == was[light]).all() and ((a >= 0) & (a < n)).all()
    assert steps >= int(np.count_nonzero(a != was)) and (steps == 0) == (after == before)
    # a local optimum: no single move of a heavy unit lowers the overload further
    for u in np.flatnonzero(~light):
        for b in range(n):
            c = a.copy()
            c[u] = b
            assert _over(x, c, cap) >= after - 1e-9


def test_it_removes_the_overload_a_balanced_plan_keeps_after_a_phase_flip() -> None:
    """diurnal-phase-flip, the 20 s after 620 s: the bursty stream is off, s1 has flipped to
    phase A, and every plan with balanced node means puts light phase-A units beside a heavy
    phase-A unit. The correlation global step's plan is such a plan; the descent from it
    removes its overload in a few moves."""
    sim = make_simulator(load_scenario(SCENARIOS / "diurnal-phase-flip.yaml"))
    sim.step(660)
    window = sim.rec_unit_load[620:640].T
    cap = np.ones(sim.n)
    a = correlation_global.initial_placement(window, cap)
    assert _over(window, a, cap) > 0.1
    moved = reduce_overload(window, a, cap)
    assert 0 < moved <= 12 and _over(window, a, cap) == 0.0
