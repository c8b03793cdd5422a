"""The live micro-batch timeline: batches take what arrived, overruns merge segments."""

from __future__ import annotations

import numpy as np
import pytest

from controller.live_batches import live_timeline, predicted_live
from core.batch_model import BatchModel

FIXED = BatchModel(task_overhead_s=0.1, batch_overhead_s=0.9)  # 1 s per batch


def test_a_batch_that_keeps_up_takes_one_segment() -> None:
    """0.5 s of work per 2 s segment: every batch is 1.5 s and takes one segment, which waits
    half a trigger (arrival at 1, 3, 5 s; batches at 2, 4, 6 s)."""
    b = live_timeline(np.full((4, 2), 0.25), 2.0, FIXED, 2.0)
    assert [x["start_s"] for x in b] == [2.0, 4.0, 6.0, 8.0]
    assert [x["segments"] for x in b] == [1, 1, 1, 1]
    assert all(x["duration_s"] == pytest.approx(1.5) for x in b)
    assert [lat for x in b for lat in x["latency_s"]] == pytest.approx([2.5] * 4)


def test_an_overrun_starts_the_next_batch_at_once_with_every_segment_that_arrived() -> None:
    """Segment 0 carries 4 s of work on one node: its batch (start 2 s) ends at 7 s, after
    segments 1-3 arrived (3, 5, 7 s). The next batch starts at once and takes the three."""
    load = np.zeros((4, 2))
    load[0, 0] = 2.0  # cores over a 2 s tick: 4 s of work
    load[1:, 1] = 0.1
    b = live_timeline(load, 2.0, FIXED, 2.0)
    assert [(x["start_s"], x["segments"]) for x in b] == [(2.0, 1), (7.0, 3)]
    assert b[0]["duration_s"] == pytest.approx(5.0)
    assert b[1]["duration_s"] == pytest.approx(1.0 + 3 * 0.2)  # one fixed cost for three
    assert b[1]["latency_s"] == pytest.approx([8.6 - 3, 8.6 - 5, 8.6 - 7])


def test_predicted_live_summarises_the_timeline() -> None:
    load = np.vstack([np.full((3, 2), 0.25), np.full((3, 2), 1.5)])  # keeps up, then falls behind
    p = predicted_live(load, 2.0, FIXED, 2.0, skip=0)
    b = live_timeline(load, 2.0, FIXED, 2.0)
    assert p["predicted_batches"] == len(b) < 6  # behind: later batches merge segments
    assert p["predicted_backlog_max"] == max(x["segments"] for x in b) > 1
    assert p["predicted_batch_duration_p99"] == pytest.approx(
        np.percentile([x["duration_s"] for x in b], 99)
    )


def test_a_warming_driver_takes_longer_over_its_first_batches() -> None:
    """With a warm-up the fixed cost falls with the batch number: the timeline charges batch k
    ``fixed_s(k)`` (1.2 s at the first, 1.0 s at the anchor), so the first batch is the longest
    though every segment holds the same work; without one every batch pays 1 s."""
    from core.batch_model import Warmup

    warm = FIXED.model_copy(update={"warmup": Warmup(slope_s=0.2, at_batch=np.e - 1, floor_s=0.5)})
    b = live_timeline(np.full((4, 2), 0.25), 2.0, warm, 2.0)
    d = [x["duration_s"] for x in b]
    assert d[0] == pytest.approx(1.7) and d[0] > d[1] > d[2] > d[3], d
    assert [x["duration_s"] for x in live_timeline(np.full((4, 2), 0.25), 2.0, FIXED, 2.0)] == [
        pytest.approx(1.5)
    ] * 4
