"""Availability targets: simulator ordering, DPC on Spark, driver failover (active and warm
standby, cold restart), executor kill, passive-standby overhead, controller failover.

Run: .venv/bin/python -m bench.bench_ha  (``driver``: only the driver failover; ``controller``:
only the controller failover; ``sim``: only the simulator's policies; ``dpc``: only DPC on
Spark, live; ``chaos``: only the replay under seeded executor faults; ``kill``: only the
executor kill and the state protection's overhead, the "Availability" section; each of these
has its own section)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.chaos_replay import chaos_runs
from bench.chaos_replay import section as chaos_section
from bench.common import ROOT, environment, write_section
from bench.controller_failover import controller_failover, section
from bench.dpc_spark import section as dpc_section
from bench.driver_failover import section as driver_section
from controller.compare import compare_ha
from controller.replay import replay_sim
from controller.scenario import load_scenario
from controller.testing import alternating_plan

EXE = str(Path(sys.executable).parent / "trimtab")
SC = ROOT / "scenarios" / "seed-groupby-window.yaml"


def sim_rows() -> str:
    """failure-storm under each policy, the sink de-duplicating (as shipped) and not."""
    sc = load_scenario(ROOT / "scenarios/failure-storm.yaml")
    lines = []
    for dedup in (True, False):
        s = sc.model_copy(
            update={"simulator": sc.simulator.model_copy(update={"sink_dedup": dedup})}
        )
        k7 = s.with_controller(ha=s.controller.ha.model_copy(update={"checkpoint_interval": 7}))
        rows = compare_ha(s, ["none", "upstream", "passive", "active"])
        rows.insert(3, {**compare_ha(k7, ["passive"])[0], "ha": "passive, k = 7"})
        for r in rows:
            lines.append(
                f"| {r['ha']} | {'yes' if dedup else 'no'} | {r['runtime_overhead']:.4f} | "
                f"{r['recovery_time_mean']:.2f} | {r['recovery_time_max']:.2f} | "
                f"{r['lost_tuples']:.0f} | {r['duplicates_suppressed']:.0f} | "
                f"{r['duplicate_tuples']:.0f} | {r['guarantee']} |"
            )
    return "\n".join(lines)


def sim_section() -> str:
    """The simulator's availability policies side by side (its own BENCHMARKS section)."""
    return f"""
Command: `.venv/bin/python -m bench.bench_ha sim` ({environment()}; the simulator, deterministic).

`trimtab compare scenarios/failure-storm.yaml --ha upstream,passive,active,none` (targets:
overhead upstream < passive < active; recovery active < passive < upstream). Every column is
measured from the run: the overhead is the availability work the model did over the useful
work (upstream backup: `ack_cost_us`, 1 us, of CPU per tuple a unit takes in, for keeping it
at its producer and acknowledging it; passive: checkpoint CPU per MB of state every k ticks;
active: the replica's work). Lost and duplicated tuples are counted by the sink, which keeps
the sequence ranges it received per stream (`simulator.sink`): lost tuples are its gaps; what a
recovery sends again (upstream backup: the replayed window's output, a stateless unit's
unacknowledged tick; passive: the output since the checkpoint; active: the standby's
unacknowledged tick) is a duplicate where the sink already holds it, dropped when the sink
de-duplicates ("sent again, dropped") and delivered twice when not. The guarantee follows from
the counts (gap: tuples lost; repeating: tuples delivered twice; precise: neither). With the
scenario's checkpoint every 10 ticks, both failures (100 s, 300 s) come just after a checkpoint,
so a passive standby sends nothing again; "k = 7" checkpoints every 7 ticks instead.

| policy | sink de-duplicates | runtime overhead | recovery mean (s) | recovery max (s) | lost | sent again, dropped | delivered twice | guarantee |
|---|---|---|---|---|---|---|---|---|
{sim_rows()}

DPC (Delay, Process and Correct), `scenarios/input-partition-dpc.yaml`: R join S, S unreachable
from 120 s to 150 s, its tuples held at the source and delivered when it heals; a result's
"first" latency is to its first emission (tentative or stable), "stable" to its stable
version. Modelled per tuple (`simulator.dpc`):

| mode | tentative fraction | corrections (tuples) | tentative latency mean (s) | first latency p99 (s) | stable latency mean (s) | stable latency p99 (s) |
|---|---|---|---|---|---|---|
{dpc_rows()}
"""


def dpc_rows() -> str:
    """input-partition-dpc in both DPC modes."""
    sc = load_scenario(ROOT / "scenarios/input-partition-dpc.yaml")
    out = []
    for mode in ("tentative", "block"):
        dpc = sc.controller.ha.dpc.model_copy(update={"mode": mode, "max_delay_s": 2.0})
        s = replay_sim(sc.with_controller(ha=sc.controller.ha.model_copy(update={"dpc": dpc})))
        r = s.summary
        out.append(
            f"| {mode} (max delay 2 s) | {r['tentative_fraction']:.4f} | {r['corrections']:.0f} | "
            f"{r['latency_tentative_mean']:.2f} | {r['latency_first_p99']:.1f} | "
            f"{r['latency_stable_mean']:.2f} | {r['latency_stable_p99']:.1f} |"
        )
    return "\n".join(out)


def _intervals(run: dict) -> float:
    """The affected batch in batch intervals: the trigger interval of a live stream, the
    median batch of a back-to-back replay (where the interval is the batch itself)."""
    return run["affected_batch_s"] / (run["trigger_s"] or run["normal_batch_s"])


def _against(run: dict) -> str:
    """A back-to-back replay's affected batch against the 2-interval target."""
    ratio = run["affected_batch_s"] / run["normal_batch_s"]
    return f"{ratio:.1f} intervals ({'met' if ratio <= 2 else 'not met'})"


def executor_kill(repeat: int = 3) -> dict:
    """Each mode ``repeat`` times; the run with the median affected-batch ratio is kept."""
    out = {}
    for mode in ("kill", "kill-active", "kill-live", "kill-active-live"):
        runs = []
        for _ in range(repeat):
            d = tempfile.mkdtemp()
            r = subprocess.run(
                [sys.executable, "-m", "tests.cluster.fault_runner", mode, d],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=900,
            )
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
            runs.append(json.loads(line[7:]))
            shutil.rmtree(d, ignore_errors=True)
        runs.sort(key=_intervals)
        out[mode] = {**runs[len(runs) // 2], "ratios": [round(_intervals(x), 2) for x in runs]}
    return out


def prepare(work: Path) -> None:
    from spark_adapter.actuator import PlanStore
    from spark_adapter.query import compile_query
    from spark_adapter.source import InputLog

    sc = load_scenario(SC)
    q = compile_query(sc)
    InputLog(work / "input").generate(sc, 8, scale=0.2)
    PlanStore(work / "plans").publish(alternating_plan(q))


def passive_overhead() -> dict[str, float]:
    """Throughput with no state protection, with a state snapshot every 2 batches (passive),
    and with replicated cached state (active), on the same input. A batch's time here is the
    sum of all its phases, snapshot and commit included."""
    from spark_adapter.pipeline import PipelineOptions, SparkPipeline
    from spark_adapter.query import compile_query
    from spark_adapter.session import make_session

    spark = make_session("local-cluster[2,1,1024]", "trimtab-bench-ha")
    sc = load_scenario(SC)
    q = compile_query(sc)
    plan = alternating_plan(q)
    rates: dict[str, list[float]] = {}
    for mode in ("none", "passive", "active") * 3:  # interleaved: warm-up effects hit all
        work = Path(tempfile.mkdtemp())
        opts = PipelineOptions(
            2, snapshot_every=2 if mode == "passive" else 0, replicate_state=mode == "active"
        )
        p = SparkPipeline(spark, q, work, opts)
        p.input.generate(sc, 10, scale=0.3)
        p.plans.publish(plan)
        p.run_available()
        batches = sorted(p.stats)[2:]
        rows = sum(int(p.stats[b].rows.sum()) for b in batches)
        secs = sum(sum(p.stats[b].info["phases"].values()) for b in batches)
        rates.setdefault(mode, []).append(rows / secs)
        p.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    spark.stop()
    return {m: float(np.median(v)) for m, v in rates.items()}


def main() -> None:
    if sys.argv[1:] in ([], ["chaos"]):
        chaos = chaos_section(chaos_runs())
        write_section("Chaos replay", chaos)
        print(chaos)
        if sys.argv[1:] == ["chaos"]:
            return
    if sys.argv[1:] in ([], ["dpc"]):
        dpc = dpc_section()
        write_section("DPC on Spark", dpc)
        print(dpc)
        if sys.argv[1:] == ["dpc"]:
            return
    if sys.argv[1:] in ([], ["driver"]):  # the driver's failover: active, warm, cold
        drv = driver_section()
        write_section("Driver failover", drv)
        print(drv)
        if sys.argv[1:] == ["driver"]:
            return
    if sys.argv[1:] in ([], ["sim"]):
        sim = sim_section()
        write_section("Availability in the simulator", sim)
        print(sim)
        if sys.argv[1:] == ["sim"]:
            return
    if sys.argv[1:] in ([], ["controller"]):
        ctl = (
            f"Command: `.venv/bin/python -m bench.bench_ha controller` ({environment()}).\n"
            + section(controller_failover())
        )
        write_section("Controller failover", ctl)
        print(ctl)
        if sys.argv[1:] == ["controller"]:
            return
    kills = executor_kill()
    ek, ea = kills["kill"], kills["kill-active"]
    live_rows = "\n".join(
        f"| {label} | {r['trigger_s']:.0f} | {r['normal_batch_s']:.1f} | {r['affected_batch_s']:.1f} | "
        f"{_intervals(r):.2f} (runs: {r['ratios']}) | {r['recovered_after_s']:.1f} | "
        f"{r['output_matches']} |"
        for label, r in (
            ("one copy", kills["kill-live"]),
            ("replicated (active)", kills["kill-active-live"]),
        )
    )
    trig = kills["kill-live"]["trigger_s"]
    lead = kills["kill-live"]["lead_s"]
    ov = passive_overhead()
    base, snap, act = ov["none"], ov["passive"], ov["active"]
    body = f"""
Command: `.venv/bin/python -m bench.bench_ha kill` ({environment()}; pyspark 4.3, local-cluster[2,1,1024]).

Spark, `kill -9` of an executor 0.8 s into batch 2 (zipf-hotkey-shift, upstream backup, reliable
state checkpoints every 2 batches; target: the affected batch within 2 batch intervals):

| cached state | affected batch (s) | median batch (s) | batch intervals | output = reference |
|---|---|---|---|---|
| one copy (upstream backup only) | {ek["affected_batch_s"]:.1f} | {ek["normal_batch_s"]:.1f} | {ek["affected_batch_s"] / ek["normal_batch_s"]:.1f} (runs: {ek["ratios"]}) | {ek["output_matches"]} |
| replicated on two executors (active) | {ea["affected_batch_s"]:.1f} | {ea["normal_batch_s"]:.1f} | {ea["affected_batch_s"] / ea["normal_batch_s"]:.1f} (runs: {ea["ratios"]}) | {ea["output_matches"]} |

Median of 3 runs per row (all three ratios shown). With one copy the dead executor's cached
state is recomputed from lineage since the last checkpoint; with two copies only the dead
executor's running tasks are re-run. Reducers retry a dead executor's shuffle blocks after
200 ms, twice (`spark.shuffle.io.retryWait`/`maxRetries` in the session defaults), instead of
Spark's 3 x 5 s. Back to back, the batch interval is the batch itself (100% load): the survivor
redoes the dead executor's share of the executor work after its own, so what the fault adds
depends on how much of a batch is executor work rather than the batch's fixed driver-side cost.
Runs spread widely (all three are shown); the replacement executor, which joins during or right
after the affected batch and starts its Python workers cold, is a likely cause that this bench
does not separate out. Against the target: one copy {_against(ek)}, replicated {_against(ea)}.
At 100% load 2 intervals is about what the fault costs by construction when a batch is mostly
executor work (one executor does both halves); the live stream below, with headroom, is the
setting the target is meant for.

The same fault in a live stream, the way the pipeline runs in production
(`tests.cluster.fault_runner kill-live|kill-active-live`): a writer adds one tick of input
every {trig:.0f} s, the query runs on a {trig:.0f} s processing-time trigger (`trimtab pipeline run
--trigger-s {trig:.0f}`; normal batches take well under the trigger, the headroom a stream runs
with), and the kill hits the first batch after 21 s whose predecessor read its segment at the
trigger it landed before (the start-up backlog drained: the steady state). Each segment lands
{lead:.1f} s before a trigger fires (Spark's trigger fires on multiples of the interval since
the epoch). Latency is from a segment's arrival to its batch's commit; a segment queued when it
waited longer than a trigger interval plus a normal batch (unqueued it takes the lead plus its
batch), and "backlog gone" is the time from the fault until the last segment that queued was
committed (the replacement executor's cold start included):

| cached state | trigger (s) | median batch (s) | affected batch (s) | trigger intervals | backlog gone (s) | output = reference |
|---|---|---|---|---|---|---|
{live_rows}

The driver's own failover (active, warm and cold) has its section, "Driver failover".

Runtime overhead of state protection (seed-groupby-window x 0.3, median of 3 interleaved runs;
a batch's time includes its snapshot and commit; target: passive ≤ 10% at the default k = 2):
none {base:.0f} tuples/s; passive (Parquet snapshot every 2 batches) {snap:.0f} tuples/s, overhead
{(1 - snap / base) * 100:.1f}%; active (replicated cached state) {act:.0f} tuples/s, overhead
{(1 - act / base) * 100:.1f}%.
"""
    write_section("Availability", body)
    print(body)


if __name__ == "__main__":
    main()
