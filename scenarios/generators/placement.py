"""Placement's workloads: anti-phased periodic streams (correlation) and bursty ones (ROD)."""

from __future__ import annotations

from pathlib import Path

from .common import chain, nodes, write


def anticorrelated_diurnal(out: Path) -> None:
    """40 operators on 8 nodes over two anti-phased pairs of sine streams and a bursty one."""
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
        out,
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


def bursty_rod(out: Path) -> None:
    """ROD's setting: 10 nodes, 50 operators, 4 bursty streams."""
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
        out,
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


def write_all(out: Path) -> None:
    anticorrelated_diurnal(out)
    bursty_rod(out)
