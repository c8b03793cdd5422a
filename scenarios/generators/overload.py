"""Overload and failures in the simulator: an input ramp to twice the capacity, a failure storm."""

from __future__ import annotations

from pathlib import Path

from .common import chain, nodes, write


def overload_ramp(out: Path) -> None:
    """Two streams ramp to 2x the capacity; two queries share a prefix."""
    write(
        out,
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


def failure_storm(out: Path) -> None:
    """6 nodes: two kills, a permanent loss and a slow node."""
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
        out,
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


def write_all(out: Path) -> None:
    overload_ramp(out)
    failure_storm(out)
