"""Simulator speed: operator-ticks per second at growing sizes.

Run: .venv/bin/python -m bench.bench_simulator
The baseline in the same run is the bare per-tick numpy work every fluid model needs
(unit loads = coefficients @ admitted rates, node loads by bincount); the ratio shows the
simulator's overhead on top of it.
"""

from __future__ import annotations

import numpy as np

from bench.common import best_of, environment, write_section
from controller.scenario import ScenarioFile
from core.plans import Placement, Plan
from simulator import Simulator


def scenario(n: int, m: int, d: int = 5, ticks: int = 200) -> ScenarioFile:
    per = m // d
    ops = []
    for k in range(d):
        src = f"s{k}"
        for i in range(per):
            ops.append({"id": f"o{k}_{i}", "kind": "map", "inputs": [src], "cost_us": 1.0})
            src = f"o{k}_{i}"
    return ScenarioFile.model_validate(
        {
            "name": "bench",
            "duration_s": ticks,
            "seed": 0,
            "cluster": {"nodes": [{"id": f"n{i}"} for i in range(n)]},
            "streams": [
                {
                    "id": f"s{k}",
                    "rate": {
                        "kind": "sine",
                        "base": 1000,
                        "amplitude": 500,
                        "period_s": 60,
                        "phase_s": 7 * k,
                    },
                }
                for k in range(d)
            ],
            "operators": ops,
        }
    )


def main() -> None:
    rows = []
    for n, m in [(10, 100), (100, 1000), (100, 10000)]:
        sc = scenario(n, m)

        def run() -> Simulator:
            sim = Simulator(sc)
            a = tuple(i % n for i in range(sim.m))
            sim.apply(
                Plan(placement=Placement(units=sim.units.ids, nodes=sim.cluster.ids, assignment=a))
            )
            sim.step(sim.T)
            return sim

        sim = run()
        t_sim = best_of(lambda sim=sim: (setattr(sim, "t", 0), sim.step(sim.T)))
        coeff, assign, arr = sim.ucoeff, sim.assign, sim.arrivals

        def bare() -> None:
            for t in range(arr.shape[0]):
                u = coeff @ arr[t]
                np.bincount(assign, weights=u, minlength=n)

        t_bare = best_of(bare)
        ticks = sim.T
        rows.append((n, m, ticks, m * ticks / t_sim, t_sim / t_bare))
        print(
            f"n={n} m={m}: {m * ticks / t_sim:,.0f} operator-ticks/s, {t_sim / t_bare:.1f}x bare numpy"
        )
    table = "\n".join(f"| {n} | {m} | {t} | {ops:,.0f} | {r:.1f}x |" for n, m, t, ops, r in rows)
    met = ", ".join(f"{n} x {m}: {'met' if ops >= 1e7 else 'not met'}" for n, m, _, ops, _ in rows)
    write_section(
        "Simulator speed",
        f"""
Command: `.venv/bin/python -m bench.bench_simulator` ({environment()}).
Target: at least 10^7 operator-ticks per second. Baseline: the bare per-tick numpy work
(unit loads and node loads) on the same arrays, in the same run.

| nodes | operators | ticks | operator-ticks/s | time vs bare numpy |
|---|---|---|---|---|
{table}

Against the target ({met}): the ratio to the bare numpy work of the same run is the figure to
compare across runs and machines.
""",
    )


if __name__ == "__main__":
    main()
