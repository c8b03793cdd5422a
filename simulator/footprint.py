"""What a replay of a scenario holds in memory, and whether it fits this machine.

The simulator records every tick: load, utilisation and backlog per node, load per unit, nine
series per stream (arrivals offered and held, admitted, dropped, completed, queued, lost,
latency, sink ranges) and two more (weighted output, live nodes); building the rates takes
about five more floats per stream and tick. A scenario whose run would need more than a
quarter of the machine's memory is refused before anything is allocated: its ``rates`` alone
filled 19 GB within 15 s at a billion ticks. So is a key space whose probabilities would not fit
(a billion keys filled the machine's 24 GB).
"""

from __future__ import annotations

from core.scenario import Scenario

__all__ = ["footprint_problem", "key_space_problem", "values_per_tick"]

PER_NODE, PER_UNIT, PER_STREAM, PER_TICK = 3, 1, 14, 2
BYTES_PER_KEY = 64  # a key's probabilities and hashes (10 million keys: 620 MB in a replay)
SHARE = 4  # at most 1/SHARE of the machine's memory
GIB = 1 << 30


def key_space_problem(space: int, where: str, machine_bytes: int) -> str | None:
    """Why modelling a key space of ``space`` keys (``where`` names it) would not fit a
    machine of ``machine_bytes`` (None: it fits): each key's probability and hash are held.

    >>> key_space_problem(10**7, "keys", 24 << 30) is None
    True
    >>> print(key_space_problem(10**9, "streams.0.keys.space", 24 << 30))
    streams.0.keys.space: 1,000,000,000 keys take about 59.6 GiB to model (64 bytes a key), more than a quarter of this machine's 24.0 GiB
    """
    need = space * BYTES_PER_KEY
    if need <= machine_bytes / SHARE:
        return None
    return (
        f"{where}: {space:,} keys take about {need / GIB:.1f} GiB to model ({BYTES_PER_KEY} "
        f"bytes a key), more than a quarter of this machine's {machine_bytes / GIB:.1f} GiB"
    )


def values_per_tick(n: int, m: int, d: int) -> int:
    """Floats the simulator holds per tick for ``n`` nodes, ``m`` units and ``d`` streams."""
    return PER_NODE * n + PER_UNIT * m + PER_STREAM * d + PER_TICK


def footprint_problem(scenario: Scenario, machine_bytes: int) -> str | None:
    """Why replaying ``scenario`` would not fit a machine of ``machine_bytes`` (None: it
    fits), naming a stream's ``keys.space``, or ``duration_s`` and ``tick_s``.

    >>> from core.scenario import load_model
    >>> sc = load_model("scenarios/seed-shedding-2node.yaml", Scenario)
    >>> footprint_problem(sc, 24 << 30) is None
    True
    >>> print(footprint_problem(sc.model_copy(update={"duration_s": 1e9}), 24 << 30))
    duration_s: 1e+09 s at tick_s 1.0 is 1,000,000,000 ticks, and a replay holds 40 values per tick (2 nodes, 4 units, 2 streams): 298.0 GiB, more than a quarter of this machine's 24.0 GiB; shorten duration_s or lengthen tick_s
    """
    for i, st in enumerate(scenario.streams):
        if problem := key_space_problem(st.keys.space, f"streams.{i}.keys.space", machine_bytes):
            return problem
    net = scenario.network()
    n, m, d = len(scenario.cluster.nodes), net.units().m, len(net.streams)
    per = values_per_tick(n, m, d)
    need = scenario.ticks * per * 8
    if need <= machine_bytes / SHARE:
        return None
    return (
        f"duration_s: {scenario.duration_s:g} s at tick_s {scenario.tick_s} is "
        f"{scenario.ticks:,} ticks, and a replay holds {per} values per tick ({n} nodes, {m} "
        f"units, {d} streams): {need / GIB:.1f} GiB, more than a quarter of this machine's "
        f"{machine_bytes / GIB:.1f} GiB; shorten duration_s or lengthen tick_s"
    )
