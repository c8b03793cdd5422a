from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from core import loadstats
from placement import correlation as C
from placement import correlation_global as G
from placement import migration_cost

T = np.arange(10)
X = 0.3 + 0.2 * np.sin(2 * np.pi * T / 5)


def test_global_greedy_exact_case() -> None:
    ops = np.stack([X, X, 0.6 - X, 0.6 - X])
    a = C.global_greedy(ops, 2)
    assert a.tolist() == [0, 1, 0, 1]
    nodes = loadstats.node_series(ops, a, 2)
    assert loadstats.variances(nodes).max() < 1e-20


def test_pair_formation_and_float_boundary() -> None:
    assert C.imbalanced_pairs(np.array([0.9, 0.7, 0.5, 0.3, 0.1])) == [(0, 4), (1, 3)]
    assert C.imbalanced_pairs(np.array([0.9, 0.6, 0.5, 0.45, 0.1])) == [(0, 4)]
    # 0.7 - 0.5 is 0.19999999999999996 in binary floating point: still a pair
    assert C.imbalanced_pairs(np.array([0.7, 0.5])) == [(0, 1)]
    assert C.imbalanced_pairs(np.array([0.69, 0.5])) == []


def test_one_way_score_matches_formula() -> None:
    rng = np.random.default_rng(1)
    x = rng.random((4, 10))
    ns, nr = x[:3].sum(0), x[3]  # units 0-2 on the sender, unit 3 on the receiver
    s = C.one_way_scores(x, np.array([0, 1, 2]), ns, nr)
    for i in range(3):
        rest = ns - x[i]
        expect = (np.corrcoef(x[i], rest)[0, 1] - np.corrcoef(x[i], nr)[0, 1]) / 2
        assert s[i] == pytest.approx(expect)


@given(
    arrays(np.float64, st.tuples(st.integers(2, 12), st.just(10)), elements=st.floats(0.0, 0.3)),
    st.integers(2, 4),
)
def test_one_way_moves_at_most_half_plus_one(x: np.ndarray, n: int) -> None:
    assign = np.zeros(x.shape[0], dtype=np.int64)
    cap = np.ones(n)
    mean = loadstats.means(x)
    diff = mean.sum()
    moves = C.one_way(x, assign, 0, 1, cap)
    main = moves[:-1] if len(moves) > 1 else moves
    moved = sum(mv.load for mv in moves)
    # everything but the fix-up's single operator stays within half the difference (the last
    # move is the fix-up's or a main-loop move; either way the rest is a main-loop prefix)
    assert sum(mv.load for mv in main) <= diff / 2 + 1e-9
    assert moved <= diff / 2 + max(mean, default=0) + 1e-9
    assert all(mv.load >= 0.005 for mv in moves)
    assert np.all(np.isin(assign, [0, 1]))


def test_one_way_fix_up_moves_one_operator_up_to_the_whole_gap() -> None:
    """[Ref-impl] fix-up: when half the gap left after the main loop is still above
    pair_threshold, one positively scored operator up to the whole gap moves. The sender holds
    two in-phase operators of 0.5, the receiver one of 0.05 in anti-phase: half the gap (0.475)
    admits neither, the whole gap (0.95) admits one, and it moves (without the fix-up, none)."""
    t = np.arange(20)
    wave = 0.1 * np.sin(2 * np.pi * t / 10)
    x = np.vstack([0.5 + wave, 0.5 + wave, 0.05 - 0.4 * wave])
    assign = np.array([0, 0, 1])
    moves = C.one_way(x, assign, 0, 1, np.ones(2))
    assert len(moves) == 1 and moves[0].score > 0, moves
    assert sorted(assign.tolist()) == [0, 1, 1]


@given(
    arrays(
        np.float64, st.tuples(st.integers(1, 15), st.integers(3, 10)), elements=st.floats(0.0, 1.0)
    ),
    st.integers(1, 5),
)
def test_every_operator_placed_once_and_no_nan(x: np.ndarray, n: int) -> None:
    cap = np.ones(n)
    a = G.initial_placement(x, cap)
    assert a.shape == (x.shape[0],)
    assert np.all((a >= 0) & (a < n))
    r = C.pairwise_round(x, a, cap, method="selective")
    assert np.all((r.assignment >= 0) & (r.assignment < n))
    assert all(np.isfinite(p["max_d_after"]) for p in r.pairs)


def test_constant_series_and_ties_are_defined() -> None:
    x = np.full((6, 10), 0.2)
    a = C.global_greedy(x, 3)
    assert sorted(np.bincount(a, minlength=3).tolist()) == [2, 2, 2]
    for m in ("oneway", "twoway", "selective"):
        r = C.pairwise_round(x, np.zeros(6, dtype=np.int64), np.ones(3), method=m)
        assert np.all(np.isfinite([mv.load for mv in r.moves]))


def test_selective_stops_when_all_series_equal() -> None:
    x = np.tile(X, (4, 1))
    assign = np.array([0, 0, 0, 1])
    before = assign.copy()
    C.selective(x, assign, 0, 1, np.ones(2), C.CorrelationParams(pair_threshold=10))
    # no score reaches 0.2 (all series identical); only the one-way repair may move load
    assert np.count_nonzero(assign != before) <= 1


def test_acceptance_reverts_a_plan_whose_max_d_rises() -> None:
    assert not C.acceptance(d_before=1.0, d_after=1.2, diff_before=0.4, diff_after=0.0)
    assert C.acceptance(1.0, 0.9, 0.1, 0.3)


def test_the_reference_rule_would_have_kept_that_plan() -> None:
    """Borealis keeps a pair's plan whenever max D changed, worse or not; trimtab does not."""
    assert C.acceptance_reference(d_before=1.0, d_after=1.2)
    assert not C.acceptance_reference(d_before=1.0, d_after=1.0)
    assert not C.acceptance(d_before=1.0, d_after=1.2, diff_before=0.4, diff_after=0.0)


def test_correlation_balances_anticorrelated_operators() -> None:
    # two correlated heavy operators on one node, their anti-phase twins on the other
    ops = np.stack([X, X, 0.6 - X, 0.6 - X])
    assign = np.array([0, 0, 1, 1])
    before = loadstats.variances(loadstats.node_series(ops, assign, 2)).mean()
    a = G.initial_placement(ops, np.ones(2))
    after = loadstats.variances(loadstats.node_series(ops, a, 2)).mean()
    assert after < before * 1e-6


def test_determinism() -> None:
    x = np.random.default_rng(3).random((20, 10))
    assert (
        G.initial_placement(x, np.ones(4)).tolist() == G.initial_placement(x, np.ones(4)).tolist()
    )


def test_the_three_methods_make_different_plans_on_one_drifting_pair() -> None:
    """Node 1 carries four falling series (0.2, 0.1, 0.1, 0.2) and a rising 0.1 (mean 0.35),
    node 0 one rising 0.2 (mean 0.1): one imbalanced pair.

    * One-way offloads half the gap (0.125): the heaviest eligible unit, the first falling 0.2,
      which flattens node 0 (0.2 up + 0.2 down) and leaves node 1 swinging (0.4 down, 0.1 up).
    * Selective moves each unit whose score clears 0.2: both falling 0.2s; node 0 then swings
      0.4 down against 0.2 up, node 1 0.2 down against 0.1 up (means 0.3 and 0.15).
    * Two-way pools the six and re-places them (the greedy, units it moved for nothing sent
      back, then the variance descent on the pair): a falling 0.2 and a falling 0.1 go, so
      both nodes swing 0.1 net (means 0.25 and 0.2), the lowest max divergent load of the three.
    """
    down = 1.0 - (0.5 + 0.5 * np.sin(2 * np.pi * T / 10))
    up = 1.0 - down
    x = np.stack([0.2 * down, 0.1 * down, 0.1 * down, 0.2 * up, 0.1 * up, 0.2 * down])
    start = np.array([1, 1, 1, 0, 1, 1])
    rounds = {
        m: C.pairwise_round(x, start.copy(), np.ones(2), method=m)
        for m in ("oneway", "twoway", "selective")
    }
    plans = {m: r.assignment.tolist() for m, r in rounds.items()}
    assert plans["oneway"] == [0, 1, 1, 0, 1, 1]
    assert plans["selective"] == [0, 1, 1, 0, 1, 0]
    assert plans["twoway"] == [0, 1, 0, 0, 1, 1]
    flat = loadstats.node_series(x, np.array(plans["oneway"]), 2)[0]
    assert np.ptp(flat) < 1e-9  # one-way's receiver: a rising and a falling 0.2
    max_d = {m: r.pairs[0]["max_d_after"] for m, r in rounds.items()}
    assert max_d["twoway"] < min(max_d["oneway"], max_d["selective"]) - 0.05


def test_two_way_sends_back_units_the_greedy_moved_for_nothing() -> None:
    """Node 0 holds a rising and a falling 0.3 and a flat 0.02 (the greedy's plan), the flat
    one and the rising one came from node 1. Sending the flat one back lowers node 0 and keeps
    node 1 (0.22) under it: kept in place. Sending the rising one back would leave node 1 at
    mean 0.35 plus its swing, above the greedy's max divergent load: it stays moved."""
    up = 0.5 + 0.5 * np.sin(2 * np.pi * T / 10)
    x = np.stack([0.3 * up, 0.3 * (1 - up), 0.2 * up, 0.2 * (1 - up), np.full(T.size, 0.02)])
    before = np.array([1, 0, 1, 1, 1])
    greedy = np.array([0, 0, 1, 1, 0])
    kept = greedy.copy()
    migration_cost.keep_in_place(x, before, kept, (0, 1), np.ones(2))
    assert kept.tolist() == [0, 0, 1, 1, 1]

    def max_d(a: np.ndarray) -> float:
        return float(loadstats.divergent(loadstats.node_series(x, a, 2)).max())

    assert max_d(kept) <= max_d(greedy) + 1e-12


def test_a_round_without_pairs_keeps_its_widest_gap_over_live_nodes() -> None:
    """Node means 0.5, 0.2 and 0.42 (one unit each): pairs form on the widest gap, 0.3 >= 0.2;
    with node 1 dead the live nodes' widest gap is 0.08 and no pair forms; a window shorter
    than min_samples judges nothing (None)."""
    x = np.repeat(np.array([[0.5], [0.2], [0.42]]), 10, axis=1)
    a, cap = np.arange(3, dtype=np.int64), np.ones(3)
    both = C.pairwise_round(x, a, cap, method="oneway")
    assert both.pairs and both.widest_gap == pytest.approx(0.3)
    alive = np.array([True, False, True])
    live = C.pairwise_round(x, a, cap, alive, method="oneway")
    assert not live.pairs and live.widest_gap == pytest.approx(0.08)
    short = C.pairwise_round(x[:, :1], a, cap, method="oneway")
    assert short.widest_gap is None
