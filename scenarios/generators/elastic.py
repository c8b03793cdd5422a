"""Continuous optimization's workloads: anti-phased load that ramps up and down, in the
simulator and on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import chain, nodes, piecewise, spark_count_k, write

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
    return piecewise(*pieces)


def write_all(out: Path) -> None:
    """Continuous optimization: the input ramps from 0.3x to 2x one node's capacity and back;
    the two streams are anti-phased, so which operators share a node decides its peaks."""
    write(
        out,
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
        out,
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
