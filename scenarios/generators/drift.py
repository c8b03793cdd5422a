"""The adaptive loop's drift scenarios: a phase flip, a chain that arrives, two rates that swap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import chain, nodes, piecewise, write

DRIFT_PERIOD_S = 20  # one "day" of the drift scenarios; their window holds one period


def _sine(base: float, phase: float) -> dict[str, Any]:
    return {
        "kind": "sine",
        "base": base,
        "amplitude": 0.9 * base,
        "period_s": DRIFT_PERIOD_S,
        "phase_s": phase,
    }


def write_all(out: Path) -> None:
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
        out,
        "diurnal-phase-flip",
        {
            "description": "Heavy and medium chains in two phases (A, B: half a 20 s period "
            "apart); at 600 s the medium stream s1 flips from phase B to A. A node that paired "
            "a heavy A operator with s1's now peaks above its capacity: the placement must "
            "change although no node's mean load did.",
            **common,
            "streams": streams(
                piecewise((0, _sine(1000, half)), (600, _sine(1000, 0))), _sine(1000, 0)
            ),
            "operators": ops,
            "expect": expect,
        },
    )
    late = piecewise((0, {"kind": "constant", "rate": 0}), (600, _sine(1000, half)))
    write(
        out,
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
        out,
        "rate-swap",
        {
            "description": "The phase-A/B workload whose medium streams swap their mean rates at "
            "600 s: s1 (phase B) goes from 1400 to 600 tuples/s and s3 (phase A) from 600 to "
            "1400, so the nodes that held s3's operators gain load and the phases shift to A.",
            **common,
            "streams": streams(
                piecewise((0, _sine(1400, half)), (600, _sine(600, half))),
                piecewise((0, _sine(600, 0)), (600, _sine(1400, 0))),
            ),
            "operators": ops,
            "expect": expect,
        },
    )
