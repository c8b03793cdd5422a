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
        res["stop"] = next(r for r in res["recoveries"] if r["fault"] == "stop")
        out.append(res)
    return out


def section(runs: list[dict[str, Any]]) -> str:
    """The BENCHMARKS section: one row per run."""
    rows = "\n".join(
        f"| {i + 1} | {r['stopped_batch_s']:.1f} | {r['stop']['struck_s']:.2f} | "
        f"{r['stop']['fenced_s']:.2f} | {r['stop']['detection_s']:.2f} | "
        f"{r['stop']['after_fence_s']:.2f} | {r['slowest_s']:.1f} | {r['median_s']:.1f} | "
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
schedule strikes one of two executors 0.8 s after the previous batch ended: {sched} (stop: SIGSTOP past the
failure timeout, fenced; pause: below it, a straggler; kill: SIGKILL). Target: no batch longer
than the time its fault struck into it (at most 0.8 s), the detection bound (4.5 s: the failure
timeout and a poll) and 2 batch intervals (back to back, an interval is the median batch).
{len(runs)} runs. Struck at and fenced at: seconds into the stopped batch (the runner's clock
at the SIGSTOP, the monitor's at the fencing); detection: between the two; after the fencing:
the rest of the stopped batch.

| run | stopped batch (s) | struck at (s) | fenced at (s) | detection (s) | after the fencing (s) | slowest batch (s) | median batch (s) | bound (s) | within | replacements warmed | output = reference |
|---|---|---|---|---|---|---|---|---|---|---|---|
{rows}

A fenced executor is ended by pid (the cluster manager reports its exit at once and starts a
replacement). Fencing through Spark's `killExecutor` first, as before, left the stopped batch's
tasks waiting about 5 s after the fencing for the kill the driver had asked for; the stopped
batch then took 11.4-12.0 s. A replacement is warmed by a small batch-shaped job as soon as it
registers: before that, the batch after a replacement joined ran its first tasks on the cold
executor (Python worker start, 2.6 s and 3.7 s tasks) and took 7.9-8.3 s. Both stages of
that job import the fold's modules: the new executor takes a task of its first stage while it
is idle, but the shuffle's stage often ran on the old executor while a batch held the new one,
and the replacement's first fold task then still started its Python worker (event log: 2.4 s
against 0.3-0.7 s warm). With the first stage warming too, batch 7 (the first after a kill's
replacement registered) took 2.8-3.2 s in four runs, against 4.3-5.4 s in five before.

What the batch does after the fencing (Spark's event log of one run, not in the table, 4.6 s
after the fencing):
the survivor's own fold task had waited on the stopped executor's shuffle blocks since the
strike and fails with FetchFailed once the executor is removed (0.1 s after the fencing); a
re-launched attempt of the lost task fails the same way 1.0 s later; the map stage is re-run
for the lost outputs (1.1 s) and both partitions' folds then run one after the other on the
survivor's one core (2.4 s), before the output (0.3 s). The replacement executor registers
after the batch. Runs where the stop found less to redo took about 2 s after the fencing.
"""
