"""The Spark workloads: overload with a split, ROD's bursts, unequal partitions, anti-phased key
groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import count_k, nodes, split_branches, write


def overload_ramp(out: Path) -> None:
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
        out,
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


def split_shed(out: Path) -> None:
    """LP shedding after a split on Spark: a shared prefix whose two branches cost 7:1."""
    keys = {"space": 1000, "distribution": "zipf", "s": 0.8}
    write(
        out,
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


def bursty_rod(out: Path) -> None:
    """ROD's setting on Spark: two bursty streams into one keyed count, hot on different keys."""

    def stream(sid: str, phase: float, rotate: int) -> dict[str, Any]:
        keys: dict[str, Any] = {"space": 1000, "distribution": "zipf", "s": 1.2}
        if rotate:
            keys["shifts"] = [{"at_s": 0.0, "rotate": rotate}]
        rate = {"kind": "bursty", "low": 400, "high": 4000, "on_s": 8, "off_s": 12}
        return {"id": sid, "rate": {**rate, "phase_s": phase}, "keys": keys}

    write(
        out,
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


def heterogeneous(out: Path) -> None:
    """Two partitions whose speeds are 1:3."""
    write(
        out,
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


def anticorrelated(out: Path) -> None:
    """Key groups in two classes whose popularity swings anti-phased: placement decides."""
    write(
        out,
        "spark-anticorrelated",
        {
            "description": "A keyed windowed count whose key groups alternate in popularity: "
            "keys fall in two classes (by their hash, so each of the 16 key groups is in one "
            "class) whose popularity swings anti-phased with a period of 40 s (20 micro-batches "
            "of 2 s). Which key groups share a partition decides the busiest partition in every "
            "batch: groups of one class together peak together; anti-phased groups paired keep "
            "each partition flat. Correlation placement learns the phases from the per-key-group "
            "statistics.",
            "seed": 5,
            "duration_s": 240,
            "tick_s": 2.0,
            "cluster": {"nodes": [{"id": "n0"}, {"id": "n1"}]},
            "streams": [
                {
                    "id": "s",
                    "rate": {"kind": "constant", "rate": 1000},
                    "keys": {
                        "space": 4000,
                        "distribution": "zipf",
                        "s": 0.6,
                        "waves": {"classes": 2, "period_s": 40, "depth": 0.8, "step_s": 4},
                    },
                }
            ],
            "operators": [
                {
                    "id": "count",
                    "kind": "aggregate",
                    "inputs": ["s"],
                    "cost_us": 200,
                    "key_groups": 16,
                    "window": {"size_s": 4, "slide_s": 2},
                    "params": {"agg": "count"},
                }
            ],
            "controller": {
                "interval_s": 2,
                "window_k": 20,
                "placement": {"method": "correlation-twoway"},
            },
            "expect": {"zero_lost_tuples": True},
        },
    )


def write_all(out: Path) -> None:
    overload_ramp(out)
    split_shed(out)
    bursty_rod(out)
    heterogeneous(out)
    anticorrelated(out)
