from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shedding.window_drops import block_size, early_keep_mask, window_floor, window_uniform


@settings(deadline=None)
@given(st.integers(1, 12), st.integers(1, 60), st.floats(0.0, 1.0), st.integers(-50, 500))
def test_early_keep_matches_the_window_rule(w: int, block: int, keep: float, p0: int) -> None:
    panes = np.arange(p0, p0 + 40)
    got = early_keep_mask(panes, w, keep, block)
    for p, g in zip(panes, got, strict=True):
        js = np.arange(p - w + 1, p + 1)
        assert g == bool((window_uniform(js, block) < keep).any())


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12),
    st.floats(0.0, 1.0),
    st.floats(-5.0, 150.0),
)
def test_floor_is_the_min_keep_of_every_batch_that_could_feed_the_window(
    keeps: list[float], keep_now: float, start: float
) -> None:
    next_wm = np.cumsum(np.full(len(keeps), 10.0))  # watermarks only grow
    f = window_floor([start], next_wm, keeps, keep_now)[0]
    feeders = [k for k, wm in zip(keeps, next_wm, strict=True) if wm >= start] + [keep_now]
    assert f == min(feeders)


def test_blocks_free_most_tuples_of_sliding_windows() -> None:
    panes = np.arange(100_000)
    w = 10
    tuple_wise = 1 - early_keep_mask(panes, w, 0.5, 1).mean()
    blocked = 1 - early_keep_mask(panes, w, 0.5, block_size(w)).mean()
    assert tuple_wise < 0.01  # each window alone: a tuple is freed only if all 10 are dropped
    assert blocked > 0.3  # blocks of 4w windows: most dropped blocks free their tuples


@settings(deadline=None)
@given(
    st.integers(1, 12),
    st.lists(st.floats(0.0, 1.0), min_size=0, max_size=8),
    st.floats(0.0, 1.0),
    st.integers(-50, 500),
    st.booleans(),
)
def test_floor_keep_matches_the_window_rule(
    w: int, keeps: list[float], keep_now: float, p0: int, blocked: bool
) -> None:
    """A tuple is kept iff one of its windows has u(j) < floor_j so far, window by window."""
    from shedding.window_drops import floor_keep_mask, floor_steps

    slide, block = 2.0, (block_size(w) if blocked else 1)
    next_wm = (p0 + np.arange(len(keeps)) * 7.0) * slide  # watermarks only grow
    th, val, default = floor_steps(next_wm, keeps, keep_now)
    panes = np.arange(p0, p0 + 60)
    got = floor_keep_mask(panes, w, slide, block, th, val, default)
    for p, g in zip(panes, got, strict=True):
        js = np.arange(p - w + 1, p + 1)
        floors = window_floor(js * slide, next_wm, keeps, keep_now)
        assert g == bool((window_uniform(js, block) < floors).any())
    # never more than this batch's keep alone would keep
    assert (got <= early_keep_mask(panes, w, default, block)).all()
