"""A live micro-batch engine's timeline, predicted from the simulator's offered loads.

A replay runs one batch per tick, so a calibrated tick predicts a batch (``predicted_batches``).
A live pipeline does not: its input arrives on the clock and a batch takes every segment that
has arrived by its start, so a batch that overruns its trigger makes the next one larger. This
module replays that timeline with the calibrated batch model:

* segment i (tick i's input) arrives at ``(i + phase) x tick_s``: the writer and the trigger
  are not aligned, and half a tick is the mean of a uniform offset;
* a batch starts at the next trigger time (a multiple of ``trigger_s``) after the previous
  batch started, or at once when the previous one overran it, and only if a segment arrived
  (a streaming query runs no empty batches);
* batch ``k`` takes ``fixed_s(k) + w`` (``BatchModel.fixed_s``: the fixed costs, falling
  as the driver warms up when the calibration fitted a warm-up), with ``w`` the busiest
  node's CPU-seconds over the segments it took (the work is the offered load after drops);
* a segment's latency is its batch's end less its arrival; the backlog of a batch is the
  number of segments it took.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from core.batch_model import BatchModel

__all__ = ["live_timeline", "predicted_live"]

Array = NDArray[np.float64]


def live_timeline(
    node_load: Array, tick_s: float, model: BatchModel, trigger_s: float, phase: float = 0.5
) -> list[dict[str, Any]]:
    """The batches of a live run over offered node loads ``(ticks, nodes)`` (cores): each
    batch's start, duration, segments taken and their latencies.

    Two segments of 1 s of work on one node, a 2 s trigger, 0.5 s of fixed costs: the first
    segment arrives at 1 s and is taken at 2 s (done at 3.5 s); the second arrives at 3 s and
    waits for the batch after it, at 4 s.

    >>> b = live_timeline(np.array([[0.5], [0.5]]), 2.0, BatchModel(batch_overhead_s=0.5), 2.0)
    >>> [(x["start_s"], x["duration_s"], x["segments"]) for x in b]
    [(2.0, 1.5, 1), (4.0, 1.5, 1)]
    """
    load = np.asarray(node_load, dtype=float)
    ticks = load.shape[0]
    arrive = (np.arange(ticks) + phase) * tick_s
    cum = np.vstack([np.zeros((1, load.shape[1])), np.cumsum(load * tick_s, axis=0)])
    out: list[dict[str, Any]] = []
    end, due, i = 0.0, 0.0, 0
    while i < ticks:
        start = max(end, due)
        if arrive[i] > start:  # idle: the first trigger after the next segment arrives
            start = math.ceil(arrive[i] / trigger_s - 1e-9) * trigger_s
        j = int(np.searchsorted(arrive, start, side="right"))
        dur = float(model.fixed_s(len(out))) + float((cum[j] - cum[i]).max())
        end = start + dur
        out.append(
            {
                "start_s": start,
                "duration_s": dur,
                "segments": j - i,
                "latency_s": (end - arrive[i:j]).tolist(),
            }
        )
        due = (math.floor(start / trigger_s + 1e-9) + 1) * trigger_s
        i = j
    return out


def predicted_live(
    node_load: Array, tick_s: float, model: BatchModel, trigger_s: float, skip: int = 1
) -> dict[str, Any]:
    """A live run's batch duration p50/p99 (the first ``skip`` batches left out, as
    ``calibrate`` leaves them out), latency p50/p99 (arrival to commit, every segment), the
    most segments a batch took and the number of batches, predicted."""
    batches = live_timeline(node_load, tick_s, model, trigger_s)
    dur = np.array([b["duration_s"] for b in batches[skip:]] or [np.nan])
    lat = np.array([x for b in batches for x in b["latency_s"]] or [np.nan])
    return {
        "predicted_batch_duration_p50": float(np.percentile(dur, 50)),
        "predicted_batch_duration_p99": float(np.percentile(dur, 99)),
        "predicted_latency_p50_s": float(np.percentile(lat, 50)),
        "predicted_latency_p99_s": float(np.percentile(lat, 99)),
        "predicted_backlog_max": max((b["segments"] for b in batches), default=0),
        "predicted_batches": len(batches),
    }
