"""A replay under a seeded random sequence of executor faults, run several times: the slowest
batch against the strike offset, the detection bound and 2 normal batches
(``python -m bench.bench_ha chaos``).

Each run is ``tests.cluster.chaos_runner`` in its own process (one SparkContext per process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

from bench.common import ROOT, environment

SEED = 2
RUNS = 3


def chaos_runs(runs: int = RUNS, seed: int = SEED) -> list[dict[str, Any]]:
    """Each run's result (``chaos_runner``'s JSON) with the figures the bound is judged on."""
    out = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="trimtab-chaos-") as d:
            r = subprocess.run(
                [sys.executable, "-m", "tests.cluster.chaos_runner", str(seed), f"{d}/w"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=900,
            )
        line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise RuntimeError(f"chaos_runner failed: {r.stderr[-2000:]}")
        res = json.loads(line[len("RESULT ") :])
        timed = res["durations"][1:]  # the first batch starts the executors
        res["median_s"] = float(np.median(timed))
        res["slowest_s"] = float(max(timed))
        res["bound_s"] = res["strike_s"] + res["detection_bound_s"] + 2 * res["median_s"]
        stop = next(f["batch"] for f in res["faults"] if f["fault"] == "stop")
        res["stopped_batch_s"] = res["durations"][stop]
        out.append(res)
    return out


def section(runs: list[dict[str, Any]]) -> str:
    """The BENCHMARKS section: one row per run."""
    rows = "\n".join(
        f"| {i + 1} | {r['stopped_batch_s']:.1f} | {r['slowest_s']:.1f} | {r['median_s']:.1f} | "
        f"{r['bound_s']:.1f} | {r['slowest_s'] <= r['bound_s']} | "
        f"{', '.join(w['executor'] for w in r['executors_warmed']) or '-'} | "
        f"{r['output_matches_reference']} |"
        for i, r in enumerate(runs)
    )
    sched = ", ".join(f"{k} before batch {b}" for b, k in runs[0]["schedule"])
    return f"""
Command: `.venv/bin/python -m bench.bench_ha chaos` ({environment()}; pyspark 4.3,
local-cluster[2,1,1024]).

`tests.cluster.chaos_runner {SEED}`: `replay --substrate spark` of zipf-hotkey-shift (14
batches back to back, active availability policy, detector at 2 s / 4 s) while a seeded
schedule strikes one of two executors 0.8 s into a batch: {sched} (stop: SIGSTOP past the
failure timeout, fenced; pause: below it, a straggler; kill: SIGKILL). Target: no batch longer
than the time its fault struck into it (0.8 s), the detection bound (4.5 s: the failure
timeout and a poll) and 2 batch intervals (back to back, an interval is the median batch).
{len(runs)} runs:

| run | stopped batch (s) | slowest batch (s) | median batch (s) | bound (s) | within | replacements warmed | output = reference |
|---|---|---|---|---|---|---|---|
{rows}

A fenced executor is ended by pid (the cluster manager reports its exit at once and starts a
replacement). Fencing through Spark's `killExecutor` first, as before, left the stopped batch's
tasks waiting about 5 s after the fencing for the kill the driver had asked for; the stopped
batch then took 11.4-12.0 s. A replacement is warmed by a small batch-shaped job as soon as it
registers: before that, the batch after a replacement joined ran its first tasks on the cold
executor (Python worker start, 2.6 s and 3.7 s tasks) and took 7.9-8.3 s.
"""
