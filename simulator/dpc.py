"""Delay, Process and Correct (DPC) for unreachable inputs, in the simulator.

Borealis's DPC (Balazinska, Balakrishnan, Madden, Stonebraker, "Fault-tolerance in the Borealis
distributed stream processing system", SIGMOD 2005): when an input stream becomes unreachable,
the operators that combine it with other streams

* **delay** their results by at most ``max_delay_s``, hoping the stream comes back;
* then **process** what did arrive and emit TENTATIVE results;
* and when the stream is back with its backlog, **correct**: recompute the affected results
  and emit them again, STABLE, each once.

``block`` mode is the other end of the trade-off: results that depend on the stream wait for it,
and nothing tentative is emitted.

Here an outage is a ``partition`` fault naming a stream. Its tuples are held at the source and
arrive, as a backlog, when it heals (``hold_arrivals``: the simulator runs the shifted arrival
series, so tuples are conserved). A stream's *partners* are the streams it meets at an operator
with several inputs; their results depend on it. ``account`` turns the run's per-tick
completions and latencies into what DPC adds: tentative output, corrections, and the latency
of the first (possibly tentative) and of the stable version of every result. The model is per
tuple, not per window: a partner's tuple completed during the outage stands for the result it
contributes to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from core.scenario import Scenario
from core.topology import QueryNetwork

__all__ = ["Outage", "account", "hold_arrivals", "outages", "partners"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Outage:
    """Stream ``stream`` (its index) unreachable from tick ``start`` to tick ``end`` (excl.)."""

    stream: int
    start: int
    end: int


def outages(scenario: Scenario, streams: list[str], ticks: int) -> list[Outage]:
    """The scenario's input outages (``Scenario.input_outages``), clipped to the run."""
    return [
        Outage(streams.index(s), min(a, ticks), min(b, ticks - 1))
        for s, a, b in scenario.input_outages()
    ]


def partners(net: QueryNetwork) -> NDArray[np.bool_]:
    """``(d, d)``: streams i and j meet at an operator with several inputs (i != j).

    Each operator's source streams are followed through the network; an operator fed by more
    than one of them makes them partners.
    """
    streams = list(net.streams)
    d = len(streams)
    ops = {o.id: o for o in net.operators}
    memo: dict[str, frozenset[int]] = {}

    def sources(x: str) -> frozenset[int]:
        if x in streams:
            return frozenset({streams.index(x)})
        if x not in memo:
            memo[x] = frozenset().union(*(sources(i) for i in ops[x].inputs))
        return memo[x]

    out = np.zeros((d, d), dtype=bool)
    for o in net.operators:
        if len(o.inputs) > 1:
            src = sorted(sources(o.id))
            out[np.ix_(src, src)] = True
    np.fill_diagonal(out, False)
    return out


def hold_arrivals(arrivals: Array, spans: list[Outage]) -> Array:
    """The arrival series with each outage's tuples held at the source and delivered, as one
    backlog, at the tick it heals.

    >>> a = np.ones((6, 2))
    >>> hold_arrivals(a, [Outage(1, 1, 4)])[:, 1].tolist()
    [1.0, 0.0, 0.0, 0.0, 4.0, 1.0]
    """
    out = arrivals.copy()
    for o in spans:
        held = out[o.start : o.end, o.stream].sum()
        out[o.start : o.end, o.stream] = 0.0
        out[o.end, o.stream] += held
    return out


def _hold_wait(arrivals: Array, o: Outage, tick_s: float) -> float:
    """Mean seconds a held tuple waited at the source (arrival to the heal)."""
    a = arrivals[o.start : o.end, o.stream]
    waits = (o.end - np.arange(o.start, o.end)) * tick_s
    return float((a * waits).sum() / a.sum()) if a.sum() > 0 else 0.0


def account(
    completed: Array,
    latency: Array,
    arrivals: Array,
    spans: list[Outage],
    meets: NDArray[np.bool_],
    mode: str,
    max_delay_s: float,
    tick_s: float,
) -> dict[str, float]:
    """DPC's figures for a run: ``tentative_fraction`` (of the output tuples, emitted tentative
    first), ``corrections`` (tuples re-emitted stable), the mean latency of tentative results,
    the p99 latency of every result's first emission (tentative or stable: what a reader
    waits for) and the mean and p99 latency of stable results (a result's stable version, for
    a tentative one its correction).

    ``completed`` and ``latency`` are the run's ``(T, d)`` completions and mean latencies per
    tick; ``arrivals`` the series before holding (for the held tuples' wait).

    >>> c, lat = np.ones((8, 2)), np.full((8, 2), 0.1)
    >>> a = np.ones((8, 2))
    >>> r = account(c, lat, a, [Outage(1, 2, 5)], np.array([[0, 1], [1, 0]], bool),
    ...             "tentative", 1.0, 1.0)
    >>> r["corrections"], r["tentative_fraction"]  # partner results from the outage to the heal
    (5.0, 0.3125)
    >>> account(c, lat, a, [Outage(1, 2, 5)], np.array([[0, 1], [1, 0]], bool),
    ...         "block", 1.0, 1.0)["tentative_fraction"]
    0.0
    """
    if mode not in ("block", "tentative"):
        raise ValueError(f"ha.dpc.mode: {mode!r} is not block or tentative")
    stable = latency.copy()  # latency of each tick's results' stable version
    first = latency.copy()  # latency of their first emission
    tentative = np.zeros_like(completed)
    for o in spans:
        healed = _held_stream(completed, arrivals, o, tick_s, stable, first)
        for p in np.flatnonzero(meets[o.stream]):
            _partner(completed, o, healed, p, mode, max_delay_s, tick_s, stable, first, tentative)
    total = float(completed.sum())
    tent_total = float(tentative.sum())
    return {
        "tentative_fraction": tent_total / total if total else 0.0,
        "corrections": tent_total,
        "latency_tentative_mean": float((first * tentative).sum() / tent_total)
        if tent_total
        else 0.0,
        "latency_first_p99": _p99(first, completed),
        "latency_stable_mean": float((stable * completed).sum() / total) if total else 0.0,
        "latency_stable_p99": _p99(stable, completed),
    }


def _held_stream(
    completed: Array, arrivals: Array, o: Outage, tick_s: float, stable: Array, first: Array
) -> int:
    """Add the hold to the silent stream's held results (the first of its completions from
    the heal on, FIFO); the tick its backlog is through."""
    s, t_idx = o.stream, np.arange(completed.shape[0])
    held = arrivals[o.start : o.end, s].sum()
    done = np.cumsum(np.where(t_idx >= o.end, completed[:, s], 0.0))
    first_held = (t_idx >= o.end) & (done - completed[:, s] < held)
    wait = _hold_wait(arrivals, o, tick_s)
    stable[first_held, s] += wait
    first[first_held, s] += wait
    after = np.flatnonzero((t_idx >= o.end) & (done >= held - 1e-9))
    return int(after[0]) if after.size else completed.shape[0] - 1


def _partner(
    completed: Array,
    o: Outage,
    healed: int,
    p: int,
    mode: str,
    max_delay_s: float,
    tick_s: float,
    stable: Array,
    first: Array,
    tentative: Array,
) -> None:
    """A partner stream's results from the outage to the heal: they wait for it (block), or
    wait at most the delay, go out tentative and are corrected at the heal (tentative)."""
    t_idx = np.arange(completed.shape[0])
    during = (t_idx >= o.start) & (t_idx < healed)
    until_heal = (healed - t_idx) * tick_s
    stable[during, p] += until_heal[during]
    if mode == "block":
        first[during, p] += until_heal[during]
        return
    delay = np.clip((o.start - t_idx) * tick_s + max_delay_s, 0.0, None)
    first[during, p] += np.minimum(delay, until_heal)[during]
    tent = during & (until_heal > delay)  # emitted before the heal: tentative
    tentative[tent, p] += completed[tent, p]


def _p99(latency: Array, weight: Array) -> float:
    """The 99th percentile of ``latency`` weighted by ``weight`` (the tuples completed)."""
    w = weight.ravel()
    if w.sum() <= 0:
        return 0.0
    order = np.argsort(latency.ravel())
    cw = np.cumsum(w[order])
    return float(latency.ravel()[order][np.searchsorted(cw, 0.99 * cw[-1])])
