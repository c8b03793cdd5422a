"""How a run adapts to a change: latency before and after each drift or fault, and the control
rounds until latency is back.

For every time the scenario lists (``Scenario.drift_times``: the later pieces of piecewise
rates, and the faults): the completion-weighted mean latency over the ``span_s`` (120 s)
before and after it, and ``adaptation_rounds``: the control rounds from the change until the
``recover_s`` (60 s) rolling mean latency, measured over a window that lies after the change,
is back within ``factor`` (2x) of its level before; None if it never is. A run that did not
suffer at all therefore needs ``recover_s / interval_s`` rounds, the shortest possible answer.
A change is listed only when the run holds at least ``recover_s`` after it (a run cut short
by ``--ticks`` cannot tell "not back yet" from "never").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["adaptation"]


def adaptation(
    streams: pd.DataFrame,
    times: list[float],
    interval_s: float,
    span_s: float = 120.0,
    recover_s: float = 60.0,
    factor: float = 2.0,
) -> list[dict[str, Any]]:
    """Adaptation figures per change time, from a run's per-tick ``latency_s`` and
    ``completed`` (indexed by time in seconds).

    >>> idx = pd.Index(np.arange(0.0, 600.0, 1.0), name="time_s")
    >>> lat = np.where((idx >= 300) & (idx < 400), 1.0, 0.1)  # a 100 s bump after a change
    >>> s = pd.DataFrame({"latency_s": lat, "completed": 1.0}, index=idx)
    >>> a = adaptation(s, [300.0], 10.0)[0]
    >>> round(a["latency_before_s"], 3), round(a["latency_after_s"], 3), a["adaptation_rounds"]
    (0.1, 0.85, 16)
    >>> [a["at_s"] for a in adaptation(s, [300.0, 550.0, 700.0], 10.0)]  # 550: 50 s of run after
    [300.0]
    """
    t = streams.index.to_numpy(dtype=float)
    lat = streams["latency_s"].to_numpy(dtype=float)
    w = streams["completed"].to_numpy(dtype=float)
    cw = np.concatenate([[0.0], np.cumsum(w)])
    clw = np.concatenate([[0.0], np.cumsum(lat * w)])

    def mean(lo: float, hi: float) -> float | None:
        """Completion-weighted mean latency over ticks with lo <= t < hi."""
        a, b = np.searchsorted(t, lo, "left"), np.searchsorted(t, hi, "left")
        if b <= a:
            return None
        weight = cw[b] - cw[a]
        return float((clw[b] - clw[a]) / weight) if weight > 0 else float(lat[a:b].mean())

    out = []
    end = float(t[-1]) + (t[1] - t[0] if t.size > 1 else 1.0) if t.size else 0.0
    for at in times:
        if end - at < recover_s:
            continue
        before, after = mean(at - span_s, at), mean(at, at + span_s)
        rounds = None
        if before is not None:
            limit = factor * max(before, 1e-9)
            for k in range(
                math.ceil(recover_s / interval_s), math.ceil((end - at) / interval_s) + 1
            ):
                m = mean(at + k * interval_s - recover_s, at + k * interval_s)
                if m is not None and m <= limit:
                    rounds = k
                    break
        out.append(
            {
                "at_s": at,
                "latency_before_s": before,
                "latency_after_s": after,
                "adaptation_rounds": rounds,
            }
        )
    return out
