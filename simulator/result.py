"""A simulator run's output: per-tick series as pandas frames, and the helpers that build them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SimResult", "log_frame", "stream_series"]


@dataclass
class SimResult:
    """Per-tick time series of a run, as pandas DataFrames (one row per tick)."""

    node_load: pd.DataFrame
    node_util: pd.DataFrame
    backlog_s: pd.DataFrame
    streams: pd.DataFrame
    totals: dict[str, float]
    plans: list[tuple[float, int, str]] = field(default_factory=list)
    shed: pd.DataFrame | None = None
    placement: pd.DataFrame | None = None  # units per node after each plan (index: time)
    events: pd.DataFrame | None = None  # faults: time_s, kind, node
    nodes: pd.Series | None = None  # running nodes per tick (scaling)


def stream_series(
    rec: dict[str, np.ndarray], wout: np.ndarray, t: int, index: pd.Index
) -> pd.DataFrame:
    """Tuple accounting and the completion-weighted latency per tick, summed over streams."""
    lat, comp = rec["latency"][:t], rec["completed"][:t]
    per_tick_lat = np.divide(
        (lat * comp).sum(axis=1),
        comp.sum(axis=1),
        out=lat.mean(axis=1),
        where=comp.sum(axis=1) > 0,
    )
    sums = {k: rec[k][:t].sum(axis=1) for k in ("arrived", "admitted", "dropped")}
    return pd.DataFrame(
        {
            **sums,
            "completed": comp.sum(axis=1),
            "queued": rec["queued"][:t].sum(axis=1),
            "lost": rec["lost"][:t].sum(axis=1),
            "latency_s": per_tick_lat,
            "weighted_out": wout[:t],
        },
        index=index,
    )


def log_frame(
    log: Sequence[tuple[float, Any]], columns: list[str], default: np.ndarray
) -> pd.DataFrame:
    """A (time, row) log as a frame indexed by time; one ``default`` row at 0 when empty."""
    return pd.DataFrame(
        [row for _, row in log] or [default],
        index=pd.Index([ts for ts, _ in log] or [0.0], name="time_s"),
        columns=columns,
    )
