"""The seed queries: the two-node shedding example, a windowed group-by and a join."""

from __future__ import annotations

from pathlib import Path

from .common import nodes, write


def seed_shedding_2node(out: Path) -> None:
    """The slides' two-node example: LP keeps (0.2, 0.4)."""
    write(
        out,
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


def seed_queries(out: Path) -> None:
    """SELECT ... GROUP BY k over a sliding window, and R join S then group by."""
    write(
        out,
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
        out,
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


def write_all(out: Path) -> None:
    seed_shedding_2node(out)
    seed_queries(out)
