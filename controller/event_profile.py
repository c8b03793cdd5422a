"""``trimtab input profile``: what a user's event stream will ask of the controller.

Reads the events as ``input import`` does (same formats, columns and checks), and reports the
rate over time, the key skew (a Zipf fit), the top keys with their share, and the hot set's
churn between windows; optionally a PNG with the rate and the rank-frequency curve. It writes
nothing but the plot it is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from core.footprint import BYTES_PER_WINDOW_PROFILED, machine_memory, windows_problem
from core.keystats import hot_set_churn, rate_series, top_keys, zipf_fit
from spark_adapter.event_import import EventImportError, checked_events

__all__ = ["MIN_WINDOW_S", "profile_events"]

MIN_WINDOW_S = 0.001  # the shortest --window-s


def profile_events(
    paths: list[Path],
    ts_col: str = "ts",
    key_col: str = "key",
    fmt: str | None = None,
    window_s: float = 1.0,
    plot: Path | None = None,
) -> dict[str, Any]:
    """The profile of the events in ``paths`` (bad rows counted and left out)."""
    ev = checked_events(paths, ts_col, key_col, None, fmt)
    ts, keys = ev.ts, ev.keys
    span = float(ts.max() - ts.min()) if ts.size else 0.0
    if problem := windows_problem(
        span, window_s, BYTES_PER_WINDOW_PROFILED, ts_col, machine_memory()
    ):
        raise EventImportError(problem)
    if ts.size and span < MIN_WINDOW_S:  # no window --window-s takes fits: say what is short
        raise EventImportError(
            f"{ts_col}: the events span {span:g} s: a rate over time needs them to span at "
            f"least one window, and the shortest --window-s is {MIN_WINDOW_S:g} s"
        )
    if ts.size and span < window_s:  # one partial window: a rate over time the events lack
        raise EventImportError(  # (1e12 s windows gave 3.6e-09 events/s), and no churn
            f"--window-s: {window_s:g} s is longer than the events' span, {span:g} s: no whole "
            f"window to measure a rate or the hot set's churn in; give at most {span:g} s"
        )
    # whole windows only: the last one ends with the events, part of the way in (a 29 s
    # window over 30 s of events halved the mean rate)
    rate = rate_series(ts, window_s)[: int(span // window_s)]
    top = [
        {"key": _name(ev.raw_keys[np.flatnonzero(keys == k)[0]]), "share": round(share, 6)}
        for k, share in top_keys(keys, 10)
    ]
    out = {
        "events": int(ts.size),
        "bad_rows": ev.bad_rows,
        "span_s": float(ts.max() - ts.min()) if ts.size else 0.0,
        "distinct_keys": int(np.unique(keys).size),
        "rate_per_s": {
            "mean": float(rate.mean()) if rate.size else 0.0,
            "p50": float(np.quantile(rate, 0.5)) if rate.size else 0.0,
            "p99": float(np.quantile(rate, 0.99)) if rate.size else 0.0,
            "max": float(rate.max()) if rate.size else 0.0,
        },
        "zipf_s": None if (s := zipf_fit(keys)) is None else round(s, 3),
        "top_keys": top,
        "hot_set_churn": round(hot_set_churn(ts, keys, window_s), 4),
        "window_s": window_s,
    }
    if plot is not None:
        _plot(rate, keys, window_s, plot)
        out["plot"] = str(plot)
    return out


def _name(raw: Any) -> Any:
    """A key as the user wrote it (numpy scalars as plain numbers)."""
    return raw.item() if isinstance(raw, np.generic) else raw


def _plot(rate: np.ndarray, keys: np.ndarray, window_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, counts = np.unique(keys, return_counts=True)
    freq = np.sort(counts)[::-1]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
    a.plot(np.arange(rate.size) * window_s, rate)
    a.set(xlabel="time since the first event (s)", ylabel="events per second", title="Rate")
    b.loglog(np.arange(1, freq.size + 1), freq, ".")
    b.set(xlabel="key rank", ylabel="events", title="Key skew (rank-frequency)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
