"""An input that goes silent (Borealis's Delay, Process and Correct), simulated and on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import nodes, write


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


def write_all(out: Path) -> None:
    """An input that goes silent: Borealis's Delay, Process and Correct."""
    dpc = {"dpc": {"mode": "tentative", "max_delay_s": 2.0}}
    write(
        out,
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
        out,
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
