"""Partitioners' workloads: skewed keys (Zipf), a hot set that moves, unequal workers."""

from __future__ import annotations

from pathlib import Path

from .common import nodes, write


def zipf(out: Path) -> None:
    """Zipf 1.3 with a rotating hot set, and a moderate Zipf 1.0."""
    write(
        out,
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
        out,
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


def heterogeneous(out: Path) -> None:
    """Four workers whose speeds are 1:2:5:11."""
    lat = [1, 2, 5, 11]
    write(
        out,
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


def write_all(out: Path) -> None:
    zipf(out)
    heterogeneous(out)
