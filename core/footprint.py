"""What an input asks of this machine's memory, checked before anything is allocated.

An input whose run would need more than a quarter of the physical memory (``SHARE``) is
refused, naming the field or flag, in one wording (``memory_problem``). The estimates:

* a replay (``footprint_problem``): the simulator records every tick load, utilisation and
  backlog per node, load per unit, nine series per stream (arrivals offered and held,
  admitted, dropped, completed, queued, lost, latency, sink ranges) and two more (weighted
  output, live nodes); building the rates takes about five more floats per stream and tick.
  A billion ticks' rates alone filled 19 GB within 15 s;
* a cluster: the node-pair load statistics (correlations) of every round, about 12 values a
  pair (10,000 nodes peaked at 3.5 GB with least-loaded and 8.5 GB with correlation placement;
  50,000 nodes filled the machine's 24 GB);
* a key space (``key_space_problem``): each key's probability and hash, 62 bytes a key
  measured at 10 and 50 million keys; a billion keys filled the machine's 24 GB;
* an input segment (``segment_problem``): a tick's rows are built in memory before they are
  written, 125 bytes a row measured at 10 and 20 million rows.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from core.scenario import Scenario
from core.workload import rates

__all__ = [
    "GIB",
    "SHARE",
    "footprint_problem",
    "free_space",
    "key_space_problem",
    "log_disk_problem",
    "machine_memory",
    "memory_problem",
    "points_problem",
    "routed_problem",
    "segment_problem",
    "tables_problem",
    "values_per_tick",
]

SHARE = 4  # an input may ask at most 1/SHARE of the machine's memory
GIB = 1 << 30
PER_NODE, PER_UNIT, PER_STREAM, PER_TICK = 3, 1, 14, 2
PER_NODE_PAIR = 12  # node-pair statistics (10,000 nodes: 3.5 GB with LLF, 8.5 GB correlation)
BYTES_PER_KEY = 64
BYTES_PER_ROW = 128


def machine_memory() -> int:
    """This machine's physical memory, bytes.

    >>> machine_memory() > 1 << 20
    True
    """
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_problem(need: float, what: str, machine: int) -> str | None:
    """Why ``need`` bytes for ``what`` are too many for a machine of ``machine`` bytes (None:
    they fit).

    >>> memory_problem(1 << 30, "x", 24 * GIB) is None
    True
    >>> memory_problem(8 * GIB, "10 keys", 24 * GIB)
    "10 keys: about 8.0 GiB, more than a quarter of this machine's 24.0 GiB"
    >>> memory_problem(3e20, "x", 24 * GIB), memory_problem(float("inf"), "y", 24 * GIB)
    ("x: about 2.79e+11 GiB, more than a quarter of this machine's 24.0 GiB", "y: more than this machine's 24.0 GiB")
    """
    if need <= machine / SHARE:
        return None
    gib, have = need / GIB, f"this machine's {machine / GIB:.1f} GiB"
    if not math.isfinite(gib):
        return f"{what}: more than {have}"
    amount = f"{gib:.1f}" if gib < 1e5 else f"{gib:.3g}"
    return f"{what}: about {amount} GiB, more than a quarter of {have}"


def values_per_tick(n: int, m: int, d: int) -> int:
    """Floats the simulator holds per tick for ``n`` nodes, ``m`` units and ``d`` streams."""
    return PER_NODE * n + PER_UNIT * m + PER_STREAM * d + PER_TICK


def key_space_problem(space: int, where: str, machine_bytes: int) -> str | None:
    """Why modelling a key space of ``space`` keys (``where`` names it) would not fit a
    machine of ``machine_bytes`` (None: it fits).

    >>> key_space_problem(10**7, "keys", 24 << 30) is None
    True
    >>> print(key_space_problem(10**9, "streams.0.keys.space", 24 << 30))
    streams.0.keys.space: 1,000,000,000 keys at 64 bytes each to model: about 59.6 GiB, more than a quarter of this machine's 24.0 GiB
    """
    what = f"{where}: {space:,} keys at {BYTES_PER_KEY} bytes each to model"
    return memory_problem(space * BYTES_PER_KEY, what, machine_bytes)


def footprint_problem(scenario: Scenario, machine_bytes: int) -> str | None:
    """Why replaying ``scenario`` would not fit a machine of ``machine_bytes`` (None: it
    fits), naming a stream's ``keys.space``, ``cluster.nodes``, or ``duration_s`` and
    ``tick_s``.

    >>> from core.scenario import load_model
    >>> sc = load_model("scenarios/seed-shedding-2node.yaml", Scenario)
    >>> footprint_problem(sc, 24 << 30) is None
    True
    >>> print(footprint_problem(sc.model_copy(update={"duration_s": 1e9}), 24 << 30))
    duration_s: 1e+09 s at tick_s 1.0 is 1,000,000,000 ticks, and a replay holds 40 values per tick (2 nodes, 4 units, 2 streams): about 298.0 GiB, more than a quarter of this machine's 24.0 GiB
    """
    for i, st in enumerate(scenario.streams):
        if problem := key_space_problem(st.keys.space, f"streams.{i}.keys.space", machine_bytes):
            return problem
    n = len(scenario.cluster.nodes)
    pairs = f"cluster.nodes: {n:,} nodes, whose pairs' load statistics take {PER_NODE_PAIR} values a pair"
    if problem := memory_problem(n * n * PER_NODE_PAIR * 8, pairs, machine_bytes):
        return problem
    net = scenario.network()
    m, d = net.units().m, len(net.streams)
    per = values_per_tick(n, m, d)
    what = (
        f"duration_s: {scenario.duration_s:g} s at tick_s {scenario.tick_s} is "
        f"{scenario.ticks:,} ticks, and a replay holds {per} values per tick ({n} nodes, {m} "
        f"units, {d} streams)"
    )
    return memory_problem(scenario.ticks * per * 8, what, machine_bytes)


def segment_problem(scenario: Scenario, scale: float, machine_bytes: int) -> str | None:
    """Why the busiest tick's segment of ``scenario`` at ``scale`` would not fit a machine of
    ``machine_bytes`` (None: it fits): a segment's rows are built in memory before they are
    written.

    >>> from core.scenario import load_model
    >>> sc = load_model("scenarios/seed-groupby-window.yaml", Scenario)
    >>> segment_problem(sc, 1.0, 24 << 30) is None
    True
    >>> print(segment_problem(sc, 1e6, 24 << 30))
    the busiest tick's segment: 4,000,000,000 rows (the streams' rates x scale 1e+06) at 128 bytes each: about 476.8 GiB, more than a quarter of this machine's 24.0 GiB
    """
    peak = float(rates(scenario).sum(axis=1).max()) * scale
    what = (
        f"the busiest tick's segment: {peak:,.0f} rows (the streams' rates x scale {scale:g}) "
        f"at {BYTES_PER_ROW} bytes each"
    )
    return memory_problem(peak * BYTES_PER_ROW, what, machine_bytes)


BYTES_PER_ROUTED = 96  # a tuple of the key stream ``partition`` replays (10 and 30 million: 80-86)
_TABLES = {"capa": (4, 1), "ecapa": (4, 1), "dalton": (9, 27)}  # bytes a key: per worker, own


def routed_problem(tuples: float, where: str, machine_bytes: int) -> str | None:
    """Why holding a key stream of ``tuples`` keys (``where`` names its source) for
    ``partition`` would not fit a machine of ``machine_bytes`` (None: it fits).

    >>> print(routed_problem(1e10, "streams.0.rate", 24 << 30))
    streams.0.rate: 10,000,000,000 tuples of the key stream at 96 bytes each: about 894.1 GiB, more than a quarter of this machine's 24.0 GiB
    """
    what = f"{where}: {tuples:,.0f} tuples of the key stream at {BYTES_PER_ROUTED} bytes each"
    return memory_problem(tuples * BYTES_PER_ROUTED, what, machine_bytes)


def tables_problem(
    names: list[str],
    workers: int,
    sources: int,
    key_space: int,
    window: int,
    machine_bytes: int,
) -> str | None:
    """Why partitioners ``names`` with ``sources`` source instances would not fit a machine
    of ``machine_bytes`` (None: they fit): each instance of CAPA, E-CAPA and Dalton holds a
    table of key-space rows (per worker) and buffers of a window (measured with tracemalloc
    at 10 and 100 workers, 10,000 and 100,000 keys; at 4,096 sources the estimate is 12.1 GB
    (11.3 GiB) where the run peaked at 13.3 GB).

    >>> names = ["hash", "capa", "ecapa", "dalton"]
    >>> print(tables_problem(names, 10, 4096, 10_000, 20_000, 24 << 30))
    --sources: 4096 source instances of capa, ecapa, dalton (10 workers, 10,000 keys, windows of 20,000 tuples): about 11.3 GiB, more than a quarter of this machine's 24.0 GiB
    >>> tables_problem(names, 10, 64, 10_000, 20_000, 24 << 30) is None
    True
    """
    tables = {x: _TABLES[x.split("-")[0]] for x in names if x.split("-")[0] in _TABLES}
    per_source = [key_space * (w * workers + own) + 16 * window for w, own in tables.values()]
    what = (
        f"--sources: {sources} source instances of {', '.join(tables)} ({workers} workers, "
        f"{key_space:,} keys, windows of {window:,} tuples)"
    )
    return memory_problem(sources * sum(per_source), what, machine_bytes)


BYTES_PER_WINDOW_ROUTED = 4096  # partition: a window's metrics per partitioner (Dalton: 2.9 KB)
BYTES_PER_WINDOW_PROFILED = 32  # input profile: a window's rate and churn (10^8 windows: 16 B)


def windows_problem(
    span_s: float, window_s: float, bytes_per_window: float, where: str, machine_bytes: int
) -> str | None:
    """Why windows of ``window_s`` over events spanning ``span_s`` seconds, at
    ``bytes_per_window`` each, would not fit a machine of ``machine_bytes`` (None: they fit).
    Such a span is mostly a time column in another unit, or a stray row's time.

    >>> windows_problem(3600.0, 1.0, BYTES_PER_WINDOW_ROUTED, "--trace", 24 << 30) is None
    True
    >>> print(windows_problem(1e308, 1.0, 32, "ts", 24 << 30))
    ts: the events span 1e+308 s, 1e+308 windows of 1 s at 32 bytes each (is the column in seconds, or is a row's time wrong?): more than this machine's 24.0 GiB
    """
    windows = span_s / window_s
    what = (
        f"{where}: the events span {span_s:.4g} s, {windows:.4g} windows of {window_s:g} s at "
        f"{bytes_per_window:g} bytes each (is the column in seconds, or is a row's time wrong?)"
    )
    return memory_problem(windows * bytes_per_window, what, machine_bytes)


def points_problem(points: int, streams: int, nodes: int, machine_bytes: int) -> str | None:
    """Why ``points`` quasi-Monte Carlo points of the feasible-set ratio over ``streams``
    input streams and ``nodes`` nodes would not fit a machine of ``machine_bytes`` (None: they
    fit). A point's peak is ``8 (4 d + 1) + 12 n`` bytes, an upper bound of what tracemalloc
    measured from 2 to 20 streams and 2 to 200 nodes (104 to 1832 bytes).

    >>> points_problem(2**14, 3, 2, 24 << 30) is None
    True
    >>> print(points_problem(10**9, 3, 2, 24 << 30))
    --points: 1,000,000,000 points over 3 streams and 2 nodes at 128 bytes each: about 119.2 GiB, more than a quarter of this machine's 24.0 GiB
    """
    per = 8 * (4 * streams + 1) + 12 * nodes
    what = (
        f"--points: {points:,} points over {streams} streams and {nodes} nodes at {per} bytes each"
    )
    return memory_problem(points * per, what, machine_bytes)


BYTES_PER_ROW_ON_DISK = 48  # a segment's Parquet row (a 330-row segment: 13 KB with its footer)
BYTES_PER_SEGMENT_FILE = 4096


def size_text(n_bytes: float) -> str:
    """A size in the unit that shows it: GiB from 1 GiB, MiB from 1 MiB, else KiB.

    >>> size_text(17225.7 * GIB), size_text(165_000), size_text(3 * 2**20), size_text(0)
    ('17225.7 GiB', '161.1 KiB', '3.0 MiB', '0.0 KiB')
    """
    for unit, size in (("GiB", GIB), ("MiB", 2**20)):
        if n_bytes >= size:
            return f"{n_bytes / size:.1f} {unit}"
    return f"{n_bytes / 1024:.1f} KiB"


def free_space(path: Path) -> int:
    """Bytes free on the file system that ``path`` (or its nearest existing parent) is on."""
    p = path.resolve()
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def log_disk_problem(
    scenario: Scenario, scale: float, segments: int, flag: str, free_bytes: int
) -> str | None:
    """Why ``segments`` ticks of ``scenario`` at ``scale``, written as an input log's segments
    (after the scenario's end its ticks come round again), would not fit ``free_bytes``
    (None: they fit), naming ``flag``.

    >>> from core.scenario import load_model
    >>> sc = load_model("scenarios/seed-groupby-window.yaml", Scenario)
    >>> log_disk_problem(sc, 0.1, 300, "--segments", 50 * GIB) is None
    True
    >>> print(log_disk_problem(sc, 0.1, 10**9, "--segments", 50 * GIB))
    --segments: 1,000,000,000 segments of 300,000,001,474 rows in all, at 48 bytes a row and 4096 a file: about 17225.7 GiB, more than the 50.0 GiB free where the log goes
    """
    per_tick = rates(scenario).sum(axis=1) * scale
    laps, rest = divmod(segments, per_tick.size)
    rows = laps * float(per_tick.sum()) + float(per_tick[:rest].sum())
    need = rows * BYTES_PER_ROW_ON_DISK + segments * BYTES_PER_SEGMENT_FILE
    if need <= free_bytes:
        return None
    return (
        f"{flag}: {segments:,} segments of {rows:,.0f} rows in all, at {BYTES_PER_ROW_ON_DISK} "
        f"bytes a row and {BYTES_PER_SEGMENT_FILE} a file: about {size_text(need)}, more than "
        f"the {size_text(free_bytes)} free where the log goes"
    )
