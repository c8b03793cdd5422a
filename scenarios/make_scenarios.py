"""Writes the shipped scenario files. Run: python scenarios/make_scenarios.py

The larger scenarios (tens of operators) are generated so that their structure is explicit
here; the YAML files are committed and are what users read and replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


def chain(stream: str, prefix: str, costs: list[float], sel: float = 1.0) -> list[dict[str, Any]]:
    ops, src = [], stream
    for i, c in enumerate(costs):
        oid = f"{prefix}{i}"
        ops.append({"id": oid, "kind": "map", "inputs": [src], "cost_us": c, "selectivity": sel})
        src = oid
    return ops


def nodes(n: int, cap: float = 1.0) -> dict[str, Any]:
    return {"nodes": [{"id": f"n{i}", "capacity": cap, "latency_ms": 1.0} for i in range(n)]}


def count_k(inputs: list[str], cost_us: float) -> dict[str, Any]:
    """The Spark scenarios' keyed windowed count: 8 key groups, 12 s windows sliding by 3 s."""
    return {
        "id": "count_k",
        "kind": "aggregate",
        "inputs": inputs,
        "cost_us": cost_us,
        "key_groups": 8,
        "window": {"size_s": 12, "slide_s": 3},
        "params": {"key": "k", "agg": "count"},
    }


def spark_count_k(
    rate: dict[str, Any], shifts: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Streams and operators of the Spark load-shape scenarios: one zipf stream at ``rate``
    (its hot keys rotating at ``shifts``) into a keyed windowed count (2 ms a row, 8 key
    groups, 12 s windows sliding by 3 s)."""
    keys: dict[str, Any] = {"space": 1000, "distribution": "zipf", "s": 0.8}
    if shifts:
        keys["shifts"] = shifts
    return {
        "streams": [{"id": "s", "rate": rate, "keys": keys}],
        "operators": [count_k(["s"], 2000.0)],
    }


def split_branches(enrich_us: float) -> list[dict[str, Any]]:
    """Stream s parsed once (0.1 ms a row) and split: an enrichment (``enrich_us`` a row) and
    a direct branch (0.1 ms), the operators ``parse``, ``enrich`` and ``direct``."""
    return [
        {"id": "parse", "kind": "map", "inputs": ["s"], "cost_us": 100.0},
        {
            "id": "enrich",
            "kind": "map",
            "inputs": ["parse"],
            "cost_us": enrich_us,
            "params": {"expr": "v * 2"},
        },
        {"id": "direct", "kind": "map", "inputs": ["parse"], "cost_us": 100.0},
    ]


def write(name: str, sc: dict[str, Any]) -> None:
    sc = {"schema_version": 1, "name": name, **sc}
    (HERE / f"{name}.yaml").write_text(yaml.safe_dump(sc, sort_keys=False, width=100))


def main() -> None:
    write(
        "seed-shedding-2node",
        {
            "description": "The slides' two-node shedding example: LP keeps (0.2, 0.4) for a total of 0.6.",
            "duration_s": 60,
            "tick_s": 1.0,
            "cluster": {"nodes": [{"id": "A", "capacity": 1.0}, {"id": "B", "capacity": 1.0}]},
            "streams": [
                {"id": "s1", "rate": {"kind": "constant", "rate": 1.0}},
                {"id": "s2", "rate": {"kind": "constant", "rate": 1.0}},
            ],
            "operators": [
                {"id": "a1", "kind": "map", "inputs": ["s1"], "cost_us": 1e6},
                {"id": "b1", "kind": "map", "inputs": ["a1"], "cost_us": 3e6},
                {"id": "a2", "kind": "map", "inputs": ["s2"], "cost_us": 2e6},
                {"id": "b2", "kind": "map", "inputs": ["a2"], "cost_us": 1e6},
            ],
            "controller": {
                "interval_s": 10,
                "placement": {
                    "method": "fixed",
                    "fixed": {"a1": "A", "a2": "A", "b1": "B", "b2": "B"},
                },
                "shedding": {"method": "lp", "headroom": 1.0},
            },
        },
    )
    # 4 sine streams in two anti-phased pairs: s0/s1 feed 4 heavy operators each, s2/s3 feed 8
    # medium ones; a bursty stream feeds a light chain: 40 operators on 8 nodes. Load-only
    # placement puts a heavy operator and medium ones of mixed phase on each node, so half the
    # nodes peak together; anti-correlated pairs keep every node flat.
    streams, ops = [], []
    shapes = [
        (0, [400.0] * 4 + [10.0] * 3),
        (60, [400.0] * 4 + [10.0] * 3),
        (0, [200.0] * 8),
        (60, [200.0] * 8),
    ]
    for k, (ph, costs) in enumerate(shapes):
        streams.append(
            {
                "id": f"s{k}",
                "rate": {
                    "kind": "sine",
                    "base": 1000,
                    "amplitude": 900,
                    "period_s": 120,
                    "phase_s": ph,
                },
            }
        )
        ops += chain(f"s{k}", f"c{k}_", costs)
    streams.append(
        {
            "id": "s4",
            "rate": {
                "kind": "bursty",
                "low": 400,
                "high": 1200,
                "on_s": 15,
                "off_s": 25,
                "jitter": 0.2,
            },
        }
    )
    ops += chain("s4", "c4_", [10.0] * 10)
    write(
        "anticorrelated-diurnal",
        {
            "description": "8 nodes, 40 operators: two anti-phased pairs of periodic streams and a bursty "
            "one, so operator loads are anti-correlated across chains.",
            "seed": 1,
            "duration_s": 1200,
            "cluster": nodes(8),
            "streams": streams,
            "operators": ops,
            "controller": {
                "interval_s": 10,
                "window_k": 10,
                "placement": {"method": "least-loaded"},
            },
        },
    )
    # bursty-rod: 10 nodes, 50 operators, 4 bursty streams.
    streams, ops = [], []
    for k in range(4):
        streams.append(
            {
                "id": f"s{k}",
                "rate": {
                    "kind": "bursty",
                    "low": 300,
                    "high": 1500 + 200 * k,
                    "on_s": 10 + 5 * k,
                    "off_s": 15,
                    "phase_s": 7 * k,
                    "jitter": 0.2,
                },
            }
        )
    # Ten queries of five operators; each starts with a union of two streams, so operator loads
    # mix streams (as in ROD's experiments); costs vary along each query.
    pairs = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (1, 2), (0, 1), (2, 3), (0, 2), (1, 3)]
    for q, (a, b) in enumerate(pairs):
        ops.append(
            {
                "id": f"q{q}_u",
                "kind": "union",
                "inputs": [f"s{a}", f"s{b}"],
                "cost_us": 20.0 + 5 * q,
            }
        )
        costs = [60.0 + 11 * ((q + i) % 5) for i in range(1, 5)]
        ops += chain(f"q{q}_u", f"q{q}_", costs, sel=0.95)
    write(
        "bursty-rod",
        {
            "description": "ROD's setting: 10 nodes, 50 operators over 4 bursty streams.",
            "seed": 2,
            "duration_s": 600,
            "cluster": nodes(10),
            "streams": streams,
            "operators": ops,
            "controller": {"placement": {"method": "rod"}},
        },
    )
    write(
        "zipf-hotkey-shift",
        {
            "description": "Zipf 1.3 keys whose hot set rotates every 150 s; a keyed windowed count.",
            "seed": 3,
            "duration_s": 600,
            "cluster": nodes(10),
            "streams": [
                {
                    "id": "events",
                    "rate": {"kind": "constant", "rate": 20000},
                    "keys": {
                        "space": 10000,
                        "distribution": "zipf",
                        "s": 1.3,
                        "shifts": [
                            {"at_s": 150, "rotate": 50},
                            {"at_s": 300, "rotate": 50},
                            {"at_s": 450, "rotate": 50},
                        ],
                    },
                }
            ],
            "operators": [
                {"id": "parse", "kind": "map", "inputs": ["events"], "cost_us": 20},
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["parse"],
                    "cost_us": 200,
                    "key_groups": 50,
                    "window": {"size_s": 10, "slide_s": 10},
                    "state_bytes_per_key_group": 2e5,
                },
            ],
            "controller": {"partitioner": "dchoices"},
        },
    )
    write(
        "zipf-moderate",
        {
            "description": "Zipf 1.0 over 10,000 keys: a skew that two choices (PKG) can balance.",
            "seed": 4,
            "duration_s": 300,
            "cluster": nodes(10),
            "streams": [
                {
                    "id": "events",
                    "rate": {"kind": "constant", "rate": 20000},
                    "keys": {"space": 10000, "distribution": "zipf", "s": 1.0},
                }
            ],
            "operators": [
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["events"],
                    "cost_us": 40,
                    "key_groups": 10,
                    "window": {"size_s": 10, "slide_s": 10},
                }
            ],
            "controller": {"partitioner": "pkg"},
        },
    )
    write(
        "seed-groupby-window",
        {
            "description": "SELECT k, count(*) FROM s WHERE v > 10 GROUP BY k, window 60 s slide 1 s.",
            "seed": 5,
            "duration_s": 300,
            "cluster": nodes(2),
            "streams": [
                {
                    "id": "s",
                    "rate": {"kind": "sine", "base": 3000, "amplitude": 1000, "period_s": 60},
                    "keys": {"space": 1000, "distribution": "zipf", "s": 1.3},
                }
            ],
            "operators": [
                {
                    "id": "filter_v",
                    "kind": "filter",
                    "inputs": ["s"],
                    "cost_us": 15,
                    "selectivity": 0.9,
                    "params": {"column": "v", "op": ">", "value": 10},
                },
                {
                    "id": "count_k",
                    "kind": "aggregate",
                    "inputs": ["filter_v"],
                    "cost_us": 200,
                    "key_groups": 8,
                    "window": {"size_s": 60, "slide_s": 1},
                    "params": {"key": "k", "agg": "count"},
                    "state_bytes_per_key_group": 5e4,
                },
            ],
            "controller": {
                "interval_s": 5,
                "window_k": 5,
                "placement": {"method": "least-loaded"},
                "partitioner": "dchoices",
            },
        },
    )
    write(
        "seed-join-groupby",
        {
            "description": "R join S on R.a = S.b (window 5 min slide 30 s), S.c < 100, group by R.a, count.",
            "seed": 6,
            "duration_s": 600,
            "cluster": nodes(3),
            "streams": [
                {
                    "id": "R",
                    "rate": {"kind": "constant", "rate": 1000},
                    "keys": {"space": 500, "distribution": "zipf", "s": 1.1},
                },
                {
                    "id": "S",
                    "rate": {"kind": "sine", "base": 800, "amplitude": 400, "period_s": 120},
                    "keys": {"space": 500, "distribution": "uniform"},
                },
            ],
            "operators": [
                {
                    "id": "filter_c",
                    "kind": "filter",
                    "inputs": ["S"],
                    "cost_us": 10,
                    "selectivity": 0.4,
                    "params": {"column": "c", "op": "<", "value": 100},
                },
                {
                    "id": "join_ab",
                    "kind": "join",
                    "inputs": ["R", "filter_c"],
                    "cost_us": 150,
                    "selectivity": 0.5,
                    "key_groups": 6,
                    "window": {"size_s": 300, "slide_s": 30},
                    "params": {"left_key": "a", "right_key": "b"},
                },
                {
                    "id": "count_a",
                    "kind": "aggregate",
                    "inputs": ["join_ab"],
                    "cost_us": 60,
                    "key_groups": 6,
                    "window": {"size_s": 300, "slide_s": 30},
                    "params": {"key": "a", "agg": "count"},
                },
            ],
        },
    )
    lat = [1, 2, 5, 11]
    write(
        "heterogeneous-1-2-5-11",
        {
            "description": "4 workers whose latency (time per unit of work) is in ratio 1:2:5:11.",
            "seed": 7,
            "duration_s": 300,
            "cluster": {
                "nodes": [
                    {"id": f"w{i}", "capacity": round(1.0 / x, 4), "latency_ms": float(x)}
                    for i, x in enumerate(lat)
                ]
            },
            "streams": [
                {
                    "id": "events",
                    "rate": {"kind": "constant", "rate": 4000},
                    "keys": {"space": 5000, "distribution": "zipf", "s": 1.1},
                }
            ],
            "operators": [
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["events"],
                    "cost_us": 80,
                    "key_groups": 16,
                    "window": {"size_s": 10, "slide_s": 10},
                }
            ],
            "controller": {"partitioner": "ecapa"},
        },
    )
    write(
        "overload-ramp",
        {
            "description": "Input ramps to 2x the cluster's capacity; two queries share a prefix (a split).",
            "seed": 8,
            "duration_s": 600,
            "cluster": nodes(3),
            "streams": [
                {
                    "id": "a",
                    "rate": {"kind": "ramp", "start": 1000, "end": 4000, "from_s": 60, "to_s": 420},
                },
                {
                    "id": "b",
                    "rate": {"kind": "ramp", "start": 1000, "end": 4000, "from_s": 60, "to_s": 420},
                },
            ],
            "operators": [
                {"id": "pa", "kind": "map", "inputs": ["a"], "cost_us": 100},
                {"id": "qa1", "kind": "map", "inputs": ["pa"], "cost_us": 300, "weight": 1.0},
                {"id": "qa2", "kind": "map", "inputs": ["pa"], "cost_us": 150, "weight": 2.0},
                {"id": "pb", "kind": "map", "inputs": ["b"], "cost_us": 150},
                {"id": "qb", "kind": "map", "inputs": ["pb"], "cost_us": 200, "weight": 1.0},
            ],
            "controller": {"interval_s": 5, "shedding": {"method": "lp", "headroom": 0.95}},
        },
    )
    streams = [
        {
            "id": f"s{k}",
            "rate": {
                "kind": "sine",
                "base": 900,
                "amplitude": 300,
                "period_s": 90,
                "phase_s": 20 * k,
            },
        }
        for k in range(3)
    ]
    ops = []
    for k in range(3):
        ops += chain(f"s{k}", f"f{k}_", [150.0, 200.0, 120.0, 180.0])
        ops[-1].update(
            kind="aggregate", window={"size_s": 30, "slide_s": 5}, state_bytes_per_key_group=20e6
        )
    write(
        "failure-storm",
        {
            "description": "6 nodes: two kills, a permanent loss and a slow node.",
            "seed": 9,
            "duration_s": 600,
            "cluster": nodes(6),
            "streams": streams,
            "operators": ops,
            "faults": [
                {"at_s": 100, "kind": "kill", "node": "n1", "duration_s": 30},
                {"at_s": 200, "kind": "slow", "node": "n2", "factor": 3.0, "duration_s": 60},
                {"at_s": 300, "kind": "lose", "node": "n3"},
                {"at_s": 420, "kind": "kill", "node": "n4", "duration_s": 20},
            ],
            "controller": {"ha": {"policy": "upstream"}},
        },
    )

    drift_scenarios()
    elastic_scenarios()
    dpc_scenarios()
    overload_spark()
    bursty_rod_spark()
    split_spark()


def _piecewise(*pieces: tuple[float, dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "piecewise", "pieces": [{"from_s": t, "rate": r} for t, r in pieces]}


DRIFT_PERIOD_S = 20  # one "day" of the drift scenarios; their window holds one period


def _sine(base: float, phase: float) -> dict[str, Any]:
    return {
        "kind": "sine",
        "base": base,
        "amplitude": 0.9 * base,
        "period_s": DRIFT_PERIOD_S,
        "phase_s": phase,
    }


def drift_scenarios() -> None:
    """The adaptive loop's test cases: a workload that needs correlation-aware placement, with a
    drift at 600 s (a stream's phase flips, a new chain arrives, two streams swap rates).

    Two heavy chains (4 operators of 400 us, 0.4 cores each at the mean rate), one in phase A
    and one in phase B (half a period later), and two medium chains (8 operators of 100 us),
    A and B; rates swing 10%..190% of the mean over a 20 s period. At 60% mean utilisation a
    node peaks at 0.96 when its units are all of one phase: a load-only placement (LLF) is
    fine, just. After the drift, a node that keeps a heavy A operator with A-phase medium ones
    peaks above its capacity; only a placement that knows the phases keeps every node below it.
    The window holds one period (20 samples), so means and correlations are the period's.
    """
    half = DRIFT_PERIOD_S / 2
    bursty = {"kind": "bursty", "low": 400, "high": 1200, "on_s": 15, "off_s": 25, "jitter": 0.2}
    common = {
        "seed": 1,
        "duration_s": 1200,
        "cluster": nodes(8),
        "controller": {
            "interval_s": 10,
            "window_k": DRIFT_PERIOD_S,
            "placement": {"method": "correlation-twoway"},
        },
    }
    ops = (
        chain("s0", "c0_", [400.0] * 4)
        + chain("s1", "c1_", [100.0] * 8)
        + chain("s2", "c2_", [400.0] * 4)
        + chain("s3", "c3_", [100.0] * 8)
        + chain("s4", "c4_", [10.0] * 10)
    )

    def streams(s1: dict[str, Any], s3: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"id": "s0", "rate": _sine(1000, 0)},
            {"id": "s1", "rate": s1},
            {"id": "s2", "rate": _sine(1000, half)},
            {"id": "s3", "rate": s3},
            {"id": "s4", "rate": bursty},
        ]

    expect = {"max_mean_latency_s": 0.1, "zero_lost_tuples": True}
    write(
        "diurnal-phase-flip",
        {
            "description": "Heavy and medium chains in two phases (A, B: half a 20 s period "
            "apart); at 600 s the medium stream s1 flips from phase B to A. A node that paired "
            "a heavy A operator with s1's now peaks above its capacity: the placement must "
            "change although no node's mean load did.",
            **common,
            "streams": streams(
                _piecewise((0, _sine(1000, half)), (600, _sine(1000, 0))), _sine(1000, 0)
            ),
            "operators": ops,
            "expect": expect,
        },
    )
    late = _piecewise((0, {"kind": "constant", "rate": 0}), (600, _sine(1000, half)))
    write(
        "chain-arrival",
        {
            "description": "The phase-A/B workload with a new 4-operator chain (150 us, phase B) "
            "whose stream s5 starts at 600 s (its operators are placed, idle, from the start).",
            **common,
            "streams": [
                *streams(_sine(1000, half), _sine(1000, 0)),
                {"id": "s5", "rate": late},
            ],
            "operators": ops + chain("s5", "c5_", [150.0] * 4),
            "expect": expect,
        },
    )
    write(
        "rate-swap",
        {
            "description": "The phase-A/B workload whose medium streams swap their mean rates at "
            "600 s: s1 (phase B) goes from 1400 to 600 tuples/s and s3 (phase A) from 600 to "
            "1400, so the nodes that held s3's operators gain load and the phases shift to A.",
            **common,
            "streams": streams(
                _piecewise((0, _sine(1400, half)), (600, _sine(600, half))),
                _piecewise((0, _sine(600, 0)), (600, _sine(1400, 0))),
            ),
            "operators": ops,
            "expect": expect,
        },
    )
    write(
        "heterogeneous-spark",
        {
            "description": "A keyed windowed count over Zipf(1.1) keys on two nodes whose "
            "speeds are 1:3 (on Spark: partition 0's task spends 3x the operators' CPU, "
            "wherever it runs; in the simulator: node capacities 1 and 3). Partitioners that "
            "measure node speed (Consistent Grouping, E-CAPA) should give the fast node three "
            "quarters.",
            "seed": 21,
            "duration_s": 120,
            "tick_s": 2.0,
            "cluster": {
                "nodes": [
                    {"id": "n0", "capacity": 1.0, "latency_ms": 3.0},
                    {"id": "n1", "capacity": 3.0, "latency_ms": 1.0},
                ]
            },
            "streams": [
                {
                    "id": "s",
                    "rate": {"kind": "constant", "rate": 1000},
                    "keys": {"space": 20000, "distribution": "zipf", "s": 1.1},
                }
            ],
            "operators": [
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["s"],
                    "cost_us": 200,
                    "key_groups": 8,
                    "window": {"size_s": 4, "slide_s": 2},
                    "params": {"agg": "count"},
                }
            ],
            "controller": {"window_k": 3, "partitioner": "ecapa"},
            "spark": {"partition_speeds": [1.0, 3.0]},
        },
    )


ELASTIC_LEVELS = [0.3, 0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.0, 2.0, 2.0, 1.8, 1.5, 1.2, 0.9, 0.6, 0.3]
ELASTIC_LEVELS += [0.3, 0.3, 0.3, 0.3]  # one level per 60 s (one period of the pair)


def _elastic_pair(phase: float) -> dict[str, Any]:
    """One of the anti-phased pair: a 60 s sine whose mean follows ELASTIC_LEVELS (cores of
    work for the pair together: a chain costs 1 ms per tuple, so 500 tuples/s per level)."""
    pieces = [
        (
            60.0 * i,
            {
                "kind": "sine",
                "base": 500 * lv,
                "amplitude": 450 * lv,
                "period_s": 60,
                "phase_s": phase,
            },
        )
        for i, lv in enumerate(ELASTIC_LEVELS)
    ]
    return _piecewise(*pieces)


def elastic_scenarios() -> None:
    """Continuous optimization: the input ramps from 0.3x to 2x one node's capacity and back;
    the two streams are anti-phased, so which operators share a node decides its peaks."""
    write(
        "elastic-ramp",
        {
            "description": "Two anti-phased streams (60 s period) whose joint load ramps from 0.3 "
            "to 2.0 cores and back (one node is 1 core), on up to 4 nodes: scale out and in "
            "with the load, pair anti-phased operators on the nodes that run.",
            "seed": 5,
            "duration_s": 60 * len(ELASTIC_LEVELS),
            "cluster": nodes(4),
            "streams": [
                {"id": "s0", "rate": _elastic_pair(0.0)},
                {"id": "s1", "rate": _elastic_pair(30.0)},
            ],
            "operators": chain("s0", "a", [250.0] * 4) + chain("s1", "b", [250.0] * 4),
            "simulator": {"node_startup_s": 10.0},
            "controller": {
                "interval_s": 10,
                "window_k": 60,  # one period of the pair: shorter windows see noise as correlation
                "placement": {"method": "correlation-twoway"},
                "shedding": {"method": "lp"},  # only at the ceiling (4 nodes)
                "scaling": {
                    "enabled": True,
                    "target_utilization": 0.7,
                    "min_nodes": 1,
                    "max_nodes": 4,
                    "scale_in_after_s": 60,
                },
            },
        },
    )

    # the same shape for Spark: a keyed count whose input steps from 0.3 to 1.2 executor-cores
    # of work and back (3 s ticks, so a batch's fixed cost leaves room; at --scale 0.1 a tick
    # of the high rate costs 3.6 CPU-seconds: one executor falls behind, two keep up)
    low, high = 1500.0, 6000.0
    write(
        "spark-elastic-ramp",
        {
            "description": "A keyed windowed count whose load steps from 0.3 to 1.2 executor-cores "
            "and back (at replay scale 0.1): on local-cluster the controller scales from 1 to 2 "
            "executors and back without halting the query.",
            "seed": 9,
            "duration_s": 84,
            "tick_s": 3.0,
            "cluster": nodes(2),
            "simulator": {"rate_scale": 0.1},  # the simulator at the Spark replay's scale
            **spark_count_k({"kind": "step", "rate": low, "steps": [[18.0, high], [48.0, low]]}),
            "controller": {
                "interval_s": 6,
                "window_k": 4,
                "placement": {"method": "least-loaded"},
                "scaling": {
                    "enabled": True,
                    "min_nodes": 1,
                    "max_nodes": 2,
                    "scale_in_after_s": 12,
                },
            },
        },
    )


def overload_spark() -> None:
    """The overload ramp for Spark: shedding, not scaling, is the answer (2 partitions fixed).
    Its stream is parsed once and split into an expensive and a cheap branch that meet at the
    keyed count, so the LP has a choice (drop the expensive branch after the split) where
    uniform shedding drops both alike."""
    # at --scale 0.1: about 0.4 and 4 executor-cores of work. The low rate leaves a batch
    # room: the split costs a batch about 0.35 s more fixed work than one branch did (1.2-1.3 s
    # at the median, 1.7-1.85 s nine batches in ten), and at 0.6 cores the LP shed a little
    # of the enriched branch in the warm-up and after the ramp, where it should keep all
    low, high = 1000.0, 10000.0
    keys = {
        "space": 1000,
        "distribution": "zipf",
        "s": 0.8,
        "shifts": [{"at_s": 30.0, "rotate": 750}],
    }
    write(
        "spark-overload-ramp",
        {
            "description": "A keyed windowed count on 2 partitions whose input ramps from 0.4 "
            "to 4 executor-cores of work (twice what the 2 partitions hold, at replay scale "
            "0.1) from 30 s to 54 s, holds until 72 s, and falls back: the LP sheds through "
            "the peak and lifts its drops after it. The stream is parsed once and split: each "
            "row goes through an enrichment (2.4 ms a row) and straight on (0.1 ms), and both "
            "branches feed the count, where every row is worth the same; so the LP drops the "
            "enriched branch first (after the split), where uniform shedding drops both "
            "alike. The hot keys change as the ramp starts "
            "(the zipf ranking rotates by three quarters of the key space at 30 s), so the key groups' "
            "loads before it differ from the declared mean and correlation placement moves "
            "key groups. The first 30 s let a live pipeline warm up and the controller fill "
            "its window before the ramp.",
            "seed": 10,
            "duration_s": 102,
            "tick_s": 3.0,
            "cluster": nodes(2),
            "simulator": {"rate_scale": 0.1},
            "streams": [
                {
                    "id": "s",
                    "rate": {
                        "kind": "piecewise",
                        "pieces": [
                            {
                                "from_s": 0.0,
                                "rate": {
                                    "kind": "ramp",
                                    "start": low,
                                    "end": high,
                                    "from_s": 30.0,
                                    "to_s": 54.0,
                                },
                            },
                            {"from_s": 72.0, "rate": {"kind": "constant", "rate": low}},
                        ],
                    },
                    "keys": keys,
                }
            ],
            "operators": [
                *split_branches(2400.0),
                {"id": "merged", "kind": "union", "inputs": ["enrich", "direct"], "cost_us": 0.0},
                count_k(["merged"], 700.0),
            ],
            "controller": {
                "interval_s": 6,
                "window_k": 4,
                "placement": {"method": "correlation-twoway"},
                "shedding": {"method": "lp", "headroom": 0.9},
            },
        },
    )


def split_spark() -> None:
    """LP shedding after a split on Spark: a shared prefix whose two branches cost 7:1."""
    keys = {"space": 1000, "distribution": "zipf", "s": 0.8}
    write(
        "spark-split-shed",
        {
            "description": "Two input streams into one keyed windowed count on 2 partitions, "
            "at about twice what the partitions hold (replay scale 0.1). Stream s is parsed "
            "once and split: each row goes both through an expensive enrichment (3 ms a row) "
            "and straight on (0.1 ms); stream t passes a 2 ms UDF. Every row reaching the count "
            "is worth the same, so the LP drops the enriched branch first (a drop after the "
            "split), then t at its input, and keeps the cheap branch; uniform shedding drops "
            "every location alike.",
            "seed": 14,
            "duration_s": 60,
            "tick_s": 3.0,
            "cluster": nodes(2),
            "simulator": {"rate_scale": 0.1},
            "streams": [
                {"id": "s", "rate": {"kind": "constant", "rate": 3000.0}, "keys": keys},
                {"id": "t", "rate": {"kind": "constant", "rate": 3000.0}, "keys": keys},
            ],
            "operators": [
                *split_branches(3000.0),
                {"id": "t_udf", "kind": "map", "inputs": ["t"], "cost_us": 2000.0},
                {
                    "id": "merged",
                    "kind": "union",
                    "inputs": ["enrich", "direct", "t_udf"],
                    "cost_us": 0.0,
                },
                count_k(["merged"], 1000.0),
            ],
            "controller": {
                "interval_s": 6,
                "window_k": 4,
                "placement": {"method": "least-loaded"},
                "shedding": {"method": "lp", "headroom": 0.9},
            },
        },
    )


def bursty_rod_spark() -> None:
    """ROD's setting on Spark: two bursty streams into one keyed count, hot on different keys."""

    def stream(sid: str, phase: float, rotate: int) -> dict[str, Any]:
        keys: dict[str, Any] = {"space": 1000, "distribution": "zipf", "s": 1.2}
        if rotate:
            keys["shifts"] = [{"at_s": 0.0, "rotate": rotate}]
        rate = {"kind": "bursty", "low": 400, "high": 4000, "on_s": 8, "off_s": 12}
        return {"id": sid, "rate": {**rate, "phase_s": phase}, "keys": keys}

    write(
        "spark-bursty-rod",
        {
            "description": "Two bursty input streams into one keyed windowed count on 2 "
            "partitions (8 key groups, 2 ms a row): each bursts to 10x its low rate for 8 s in "
            "20 (two 4 s micro-batches in five), anti-phased, and the two are hot on different "
            "keys (zipf 1.2, the second's ranking rotated by half the key space), so a key "
            "group's load follows one "
            "stream's bursts. ROD places the key groups at deployment so that every partition "
            "takes a like part of each stream; least-loaded fill balances the mean load only. "
            "The largest burst rate a placement sustains is the figure that tells them apart.",
            "seed": 11,
            "duration_s": 60,
            "tick_s": 4.0,
            "cluster": nodes(2),
            "simulator": {"rate_scale": 0.1},
            "streams": [stream("a", 0.0, 0), stream("b", 12.0, 500)],
            "operators": [
                {
                    "id": "count_k",
                    "kind": "aggregate",
                    "inputs": ["a", "b"],
                    "cost_us": 2000.0,
                    "key_groups": 8,
                    "window": {"size_s": 4, "slide_s": 2},
                    "params": {"agg": "count"},
                }
            ],
            "controller": {"interval_s": 8, "window_k": 5, "placement": {"method": "rod"}},
        },
    )


def _rs_join(space: int, size_s: float, slide_s: float) -> dict[str, Any]:
    """R (Zipf keys) join S (uniform keys) on the key, counted per key and window."""
    window = {"size_s": size_s, "slide_s": slide_s}
    return {
        "streams": [
            {
                "id": "R",
                "rate": {"kind": "constant", "rate": 1000},
                "keys": {"space": space, "distribution": "zipf", "s": 1.1},
            },
            {
                "id": "S",
                "rate": {"kind": "constant", "rate": 800},
                "keys": {"space": space, "distribution": "uniform"},
            },
        ],
        "operators": [
            {
                "id": "join_rs",
                "kind": "join",
                "inputs": ["R", "S"],
                "cost_us": 150,
                "selectivity": 0.5,
                "key_groups": 6,
                "window": dict(window),
            },
            {
                "id": "count_k",
                "kind": "aggregate",
                "inputs": ["join_rs"],
                "cost_us": 60,
                "key_groups": 6,
                "window": dict(window),
                "params": {"key": "k", "agg": "count"},
            },
        ],
    }


def dpc_scenarios() -> None:
    """An input that goes silent: Borealis's Delay, Process and Correct."""
    dpc = {"dpc": {"mode": "tentative", "max_delay_s": 2.0}}
    write(
        "input-partition-dpc",
        {
            "description": "R join S on the key (window 60 s, slide 10 s), counted per key; S "
            "is unreachable from 120 s to 150 s. DPC in tentative mode: the join's results "
            "wait at most 2 s for S, are then emitted tentative from R alone, and are "
            "corrected once S's backlog arrives.",
            "seed": 12,
            "duration_s": 300,
            "cluster": nodes(3),
            **_rs_join(500, 60, 10),
            "faults": [{"at_s": 120.0, "kind": "partition", "stream": "S", "duration_s": 30.0}],
            "controller": {
                "interval_s": 5,
                "window_k": 6,
                "placement": {"method": "least-loaded"},
                "ha": dpc,
            },
        },
    )
    write(
        "spark-silent-input",
        {
            "description": "DPC on Spark, live: R join S on the key (window 8 s, slide 4 s), "
            "counted per key, 2 s ticks (a live writer paces one tick per 2 s trigger, so "
            "event time keeps wall time). S goes silent at 12 s for 10 s (a partition fault "
            "in a replay; `trimtab inject silence-stream S --seconds 10` live); results wait "
            "at most 2 s for it, go out tentative from R alone, and are corrected once S's "
            "backlog arrives.",
            "seed": 13,
            "duration_s": 48,
            "tick_s": 2.0,
            "cluster": nodes(2),
            **_rs_join(200, 8, 4),
            "faults": [{"at_s": 12.0, "kind": "partition", "stream": "S", "duration_s": 10.0}],
            "controller": {
                "interval_s": 4,
                "window_k": 4,
                "placement": {"method": "least-loaded"},
                "ha": dpc,
            },
        },
    )


if __name__ == "__main__":
    main()
