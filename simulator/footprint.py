"""What a replay of a scenario holds in memory, and whether it fits this machine.

The simulator records every tick: load, utilisation and backlog per node, load per unit, nine
series per stream (arrivals offered and held, admitted, dropped, completed, queued, lost,
latency, sink ranges) and two more (weighted output, live nodes); building the rates takes
about five more floats per stream and tick. A scenario whose run would need more than a
quarter of the machine's memory is refused before anything is allocated: its ``rates`` alone
filled 19 GB within 15 s at a billion ticks.
"""

from __future__ import annotations

from core.scenario import Scenario

__all__ = ["footprint_problem", "values_per_tick"]

PER_NODE, PER_UNIT, PER_STREAM, PER_TICK = 3, 1, 14, 2
SHARE = 4  # at most 1/SHARE of the machine's memory


def values_per_tick(n: int, m: int, d: int) -> int:
    """Floats the simulator holds per tick for ``n`` nodes, ``m`` units and ``d`` streams."""
    return PER_NODE * n + PER_UNIT * m + PER_STREAM * d + PER_TICK


def footprint_problem(scenario: Scenario, machine_bytes: int) -> str | None:
    """Why replaying ``scenario`` would not fit a machine of ``machine_bytes`` (None: it
    fits), naming ``duration_s`` and ``tick_s``.

    >>> from core.scenario import load_model
    >>> sc = load_model("scenarios/seed-shedding-2node.yaml", Scenario)
    >>> footprint_problem(sc, 24 << 30) is None
    True
    >>> print(footprint_problem(sc.model_copy(update={"duration_s": 1e9}), 24 << 30))
    duration_s: 1e+09 s at tick_s 1.0 is 1,000,000,000 ticks, and a replay holds 40 values per tick (2 nodes, 4 units, 2 streams): 298.0 GiB, more than a quarter of this machine's 24.0 GiB; shorten duration_s or lengthen tick_s
    """
    net = scenario.network()
    n, m, d = len(scenario.cluster.nodes), net.units().m, len(net.streams)
    per = values_per_tick(n, m, d)
    need = scenario.ticks * per * 8
    if need <= machine_bytes / SHARE:
        return None
    gib = 1 << 30
    return (
        f"duration_s: {scenario.duration_s:g} s at tick_s {scenario.tick_s} is "
        f"{scenario.ticks:,} ticks, and a replay holds {per} values per tick ({n} nodes, {m} "
        f"units, {d} streams): {need / gib:.1f} GiB, more than a quarter of this machine's "
        f"{machine_bytes / gib:.1f} GiB; shorten duration_s or lengthen tick_s"
    )
