"""A replay on local-cluster under a seeded random sequence of executor kills and stops.

Invoked by test_failures.py in its own process (one SparkContext per process).
Usage: python -m tests.cluster.chaos_runner SEED WORKDIR

The user's path: ``replay_spark`` with the controller in the loop and its executor monitor
(``faults.watching``, at the scenario's detector timeouts, here 2 s / 4 s), under the
``active`` availability policy (cached state on two executors: a lost executor loses no
state; under ``none`` the stopped batch refolded the state from its lineage, 13.4 s). Between batches the
runner draws the next fault from the seed: ``kill`` (SIGKILL: the master starts a replacement),
``pause`` (SIGSTOP for less than the failure timeout: a straggler, not fenced) or ``stop``
(SIGSTOP for longer: fenced). It strikes one of two live executors ``STRIKE_S`` (0.8 s) after a batch ends, into the next
batch (0.46-0.65 s into it, measured);
before a fault it asks for the second executor back if a fencing released it, so that one
always survives. Prints the schedule, the fenced executors and the replay's summary as JSON.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

from controller.scenario import load_scenario
from controller.spark_replay import replay_spark
from spark_adapter.batchstats import read_batch_stats
from spark_adapter.faults import executor_pids, kill_executor, stop_executor
from spark_adapter.session import make_session

ROOT = Path(__file__).resolve().parents[2]
BATCHES = 14
FAULTS = 4
SUSPECT_S, FAIL_S = 2.0, 4.0
STRIKE_S = 0.8  # how far into its batch a fault strikes
KINDS = ("kill", "pause", "stop")


def schedule(seed: int) -> list[tuple[int, str]]:
    """(batch, fault) pairs: ``FAULTS`` batches between the third and the third-last, at
    least two apart (each fault's recovery is its own), each with a fault drawn uniformly."""
    rng = np.random.default_rng(seed)
    while True:
        at = np.sort(rng.choice(np.arange(3, BATCHES - 2), FAULTS, replace=False))
        if np.all(np.diff(at) >= 2):
            break
    return [(int(b), str(rng.choice(KINDS))) for b in at]


def batch_spans(workdir: Path) -> list[list[float]]:
    """[started_at, ended_at] (wall clock) of each batch, from its statistics file."""
    stats = [read_batch_stats(f) for f in sorted((workdir / "metrics").glob("batch-*.json"))]
    return [[st.info["started_at"], st.info["started_at"] + st.duration_s] for st in stats]


def recoveries(faults: list[dict], fencings: list[dict], spans: list[list[float]]) -> list[dict]:
    """Each fenced fault's batch, measured: when the fault struck and when the monitor fenced
    the executor (seconds into the batch), and how long the batch ran after the fencing."""
    fenced = {f["executor"]: f["at"] for f in fencings}
    out = []
    for f in faults:
        if f.get("executor") not in fenced or "struck_at" not in f:
            continue
        start, end = spans[f["batch"]]
        at = fenced[f["executor"]]
        out.append(
            {
                "fault": f["fault"],
                "batch": f["batch"],
                "struck_s": round(f["struck_at"] - start, 3),
                "fenced_s": round(at - start, 3),
                "detection_s": round(at - f["struck_at"], 3),
                "after_fence_s": round(end - at, 3),
                "batch_s": round(end - start, 3),
            }
        )
    return out


def main(seed: int, workdir: str) -> None:
    sc = load_scenario(ROOT / "scenarios" / "zipf-hotkey-shift.yaml")
    ha = sc.controller.ha.model_copy(  # active: cached state on two executors
        update={"policy": "active", "heartbeat_timeout_s": SUSPECT_S, "failure_timeout_s": FAIL_S}
    )
    sc = sc.with_controller(ha=ha)
    spark = make_session(
        "local-cluster[2,1,1024]",
        "trimtab-chaos",
        {
            "spark.executor.memory": "640m",
            "spark.sql.shuffle.partitions": "2",
            "spark.network.timeout": "30s",
            "spark.network.timeoutInterval": "10s",
            "spark.executor.heartbeatInterval": "2s",
            "spark.deploy.maxExecutorRetries": "20",
        },
    )
    jsc, app = spark.sparkContext._jsc.sc(), spark.sparkContext.applicationId
    no_locality = getattr(spark.sparkContext._jvm, "scala.collection.immutable.Map$")
    no_locality = no_locality.__getattr__("MODULE$").empty()
    plan = dict(schedule(seed))
    done: list[dict] = []

    def two_live(timeout_s: float = 90.0) -> list[str]:
        deadline = time.monotonic() + timeout_s
        jsc.requestTotalExecutors(2, 0, no_locality)  # a fencing released one: ask again
        while time.monotonic() < deadline:
            live = sorted(executor_pids(app))
            if len(live) >= 2 and jsc.getExecutorMemoryStatus().size() >= 3:
                return live
            time.sleep(0.3)
        return sorted(executor_pids(app))

    def between(finished: int, total: int) -> None:
        kind = plan.get(finished)  # strikes the batch after ``finished`` batches
        if kind is None:
            return
        live = two_live()
        if len(live) < 2:
            done.append({"batch": finished, "fault": kind, "skipped": "one executor"})
            return
        target = live[int(np.random.default_rng(seed + finished).integers(len(live)))]
        fire = {
            "kill": lambda: kill_executor(app, target),
            "pause": lambda: stop_executor(app, target, SUSPECT_S * 0.6),
            "stop": lambda: stop_executor(app, target, 30.0),
        }[kind]
        record = {"batch": finished, "fault": kind, "executor": target}

        def strike() -> None:
            record["struck_at"] = time.time()
            fire()

        threading.Timer(STRIKE_S, strike).start()
        done.append(record)

    res = replay_spark(
        sc,
        master="local-cluster[2,1,1024]",
        batches=BATCHES,
        spark=spark,
        workdir=workdir,
        progress=between,
    )
    s = res.summary
    out = {
        "seed": seed,
        "schedule": schedule(seed),
        "faults": done,
        "executors_fenced": s["executors_fenced"],
        "executor_fencings": s["executor_fencings"],
        "recoveries": recoveries(done, s["executor_fencings"], batch_spans(Path(workdir))),
        "executors_warmed": s["executors_warmed"],
        "output_matches_reference": s["output_matches_reference"],
        "lost_tuples": s["lost_tuples"],
        "duplicate_tuples": s["duplicate_tuples"],
        "durations": s["batch_duration_s_per_batch"],
        "detection_bound_s": FAIL_S + 0.5,  # the failure timeout and one poll
        "strike_s": STRIKE_S,
    }
    spark.stop()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
