"""The best placement known in advance on ``scenarios/spark-anticorrelated.yaml``: what any
placement can gain over LLF there, run on Spark (bench only, not a controller).

The oracle knows the workload: every split of the 16 key groups over the 2 partitions is scored
by the modelled share of the load on its busier partition at each tick of one period of the
waves (each group's share of the declared keys at that tick); it takes the split whose worst
tick is the least (ties: the least mean). It holds that split from the first batch. LLF, the
oracle and correlation-twoway (in the controller loop) then run on Spark in one session, each
twice, the order reversed in the second pass, after a short warm-up replay.

Run: .venv/bin/python -m bench.bench_policies_spark oracle
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, cluster_session, environment, warm_up, write_section
from controller.calibration import read_batches
from controller.placements import PLACEMENTS, _KeepsPlan
from controller.scenario import ScenarioFile, load_scenario
from controller.spark_replay import replay_spark
from controller.wiring import make_policy, spark_context
from core.workload import key_epochs, key_group_shares

ORACLE_SCALE = 5.0  # the placement part's rate (about 5000 tuples/s)
ORACLE_WARMUP = 24
ORACLE_BATCHES = ORACLE_WARMUP + 24
ORACLE_METHODS = ("llf", "oracle", "correlation-twoway")
ORACLE_REPEATS = 2
MAX_GROUPS = 20  # 2^(groups - 1) splits are scored


def initial_assignment(sc: ScenarioFile, method: str, scale: float) -> list[int]:
    """The plan ``method`` starts from on this pipeline over 2 partitions at ``scale`` x its
    rate (its load model, no measurement)."""
    from spark_adapter.query import compile_query

    ctx = spark_context(sc, compile_query(sc), 2, scale)
    plan = make_policy(sc, method, ctx=ctx).initial_plan()
    return plan.placement.as_array().tolist()


def group_shares(sc: ScenarioFile, groups: int) -> np.ndarray:
    """Each key group's modelled share of the load at each tick of one period of the waves,
    (ticks, groups), from the scenario's declared keys."""
    keys = sc.streams[0].keys
    if keys.waves is None:
        raise ValueError(f"{sc.name}: its keys have no waves, so no period to place over")
    epochs = key_epochs(keys, sc.duration_s)
    times = np.arange(0.0, keys.waves.period_s, sc.tick_s)
    return np.stack([key_group_shares(epochs.probs_at(float(t)), groups) for t in times])


def busier_share(shares: np.ndarray, plans: np.ndarray) -> np.ndarray:
    """The share of the load on the busier of 2 partitions, (plans, ticks), for plans
    (plans, groups) of 0s and 1s.

    >>> busier_share(np.array([[0.5, 0.3, 0.2]]), np.array([[0, 1, 1], [0, 0, 1]])).tolist()
    [[0.5], [0.8]]
    """
    on0 = (plans == 0).astype(float) @ shares.T
    return np.maximum(on0, 1.0 - on0)


def best_split(shares: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The split of the groups over 2 partitions whose busier partition's worst tick carries
    the least share (ties: the least mean), with that max and mean; group 0 on partition 0.

    >>> plan, worst, _ = best_split(np.array([[0.4, 0.1, 0.3, 0.2], [0.1, 0.4, 0.2, 0.3]]))
    >>> plan.tolist(), round(worst, 2)
    ([0, 0, 1, 1], 0.5)
    """
    g = shares.shape[1]
    if not 2 <= g <= MAX_GROUPS:
        raise ValueError(f"best_split: {g} groups; 2 to {MAX_GROUPS} can be scored exhaustively")
    plans = np.zeros((2 ** (g - 1), g), dtype=np.int64)
    plans[:, 1:] = (np.arange(2 ** (g - 1))[:, None] >> np.arange(g - 1)) & 1
    busier = busier_share(shares, plans)
    worst, mean = busier.max(axis=1), busier.mean(axis=1)
    i = int(np.lexsort((mean, np.round(worst, 12)))[0])
    return plans[i], float(worst[i]), float(mean[i])


class Oracle(_KeepsPlan):
    """A plan given in advance, held (after a failure its units return to it)."""

    name = "oracle"
    initial_note = "oracle: the best split of the key groups' modelled loads over a period"

    def __init__(self, plan: np.ndarray) -> None:
        super().__init__({})
        self.fixed = np.asarray(plan, dtype=np.int64)

    def initial(self, ctx: Any, unit_x: Any) -> np.ndarray:
        if ctx.units.op_index.size != self.fixed.size:
            n = ctx.units.op_index.size
            raise ValueError(f"oracle: a plan of {self.fixed.size} units for {n}")
        self.plan = self.fixed.copy()
        return self.fixed.copy()


@contextmanager
def oracle_method(plan: np.ndarray) -> Iterator[None]:
    """``oracle`` a placement method for as long as the block runs (bench only)."""
    PLACEMENTS["oracle"] = lambda _params: Oracle(plan)
    try:
        yield
    finally:
        del PLACEMENTS["oracle"]


def runs_in_order() -> list[tuple[int, str]]:
    """(repeat, method), the order reversed in every other repeat."""
    out = []
    for r in range(1, ORACLE_REPEATS + 1):
        out += [(r, m) for m in (ORACLE_METHODS if r % 2 else ORACLE_METHODS[::-1])]
    return out


def oracle_runs(sc: ScenarioFile, plan: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """Each method's runs on local-cluster[2,1,1024], every output checked."""

    spark = cluster_session("trimtab-bench-oracle")
    work = Path(tempfile.mkdtemp(prefix="trimtab-bench-oracle-"))
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in ORACLE_METHODS}
    try:
        warm_up(spark, sc, work, "hash", 1.0)
        with oracle_method(plan):
            for r, m in runs_in_order():
                s = replay_spark(
                    sc,
                    batches=ORACLE_BATCHES,
                    placement=m,
                    partitions=2,
                    scale=ORACLE_SCALE,
                    interval_batches=2,
                    workdir=work / f"{m}-{r}",
                    spark=spark,
                    warmup_batches=ORACLE_WARMUP,
                ).summary
                if not s["output_matches_reference"]:
                    raise RuntimeError(f"{m}: output differs from the reference")
                timed = read_batches(work / f"{m}-{r}")[ORACLE_WARMUP:]
                s["busier"] = [float(b.busy_s.max() / b.busy_s.sum()) for b in timed]
                runs[m].append(s)
                print(m, r, round(s["batch_duration_p50"], 2), round(s["batch_duration_p99"], 2))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return runs


def oracle_section() -> None:
    sc = load_scenario(ROOT / "scenarios" / "spark-anticorrelated.yaml")
    llf = np.asarray(initial_assignment(sc, "llf", ORACLE_SCALE))
    shares = group_shares(sc, llf.size)
    plan, worst, mean = best_split(shares)
    runs = oracle_runs(sc, plan)
    p99 = {m: float(np.mean([s["batch_duration_p99"] for s in rs])) for m, rs in runs.items()}
    p50 = {m: float(np.mean([s["batch_duration_p50"] for s in rs])) for m, rs in runs.items()}
    l_busier = busier_share(shares, llf[None, :])[0]
    modelled = {"llf": (l_busier.max(), l_busier.mean()), "oracle": (worst, mean)}
    rows = []
    for m, rs in runs.items():
        mx, mn = modelled.get(m, (np.nan, np.nan))
        share = f"{mx:.1%} / {mn:.1%}" if m in modelled else "its own (in the loop)"
        got = np.concatenate([s["busier"] for s in rs])
        each = ", ".join(f"{s['batch_duration_p99']:.2f}" for s in rs)
        rows.append(
            f"| {m} | {share} | {got.max():.1%} / {got.mean():.1%} | {p50[m]:.2f} | {p99[m]:.2f} | "
            f"{each} | "
            f"{p99[m] / p99['llf']:.2f} | "
            f"{np.mean([s['migrations'] for s in rs]):.1f} | "
            f"{all(s['output_matches_reference'] for s in rs)} |"
        )
    ratio = p99["oracle"] / p99["llf"]
    verdict = "below" if ratio <= 0.75 else "above"
    corr = p99["correlation-twoway"] / p99["llf"]
    noise = (
        f" correlation-twoway came below the oracle: a run's p99 of "
        f"{ORACLE_BATCHES - ORACLE_WARMUP} batches is about its slowest batch, and the costs "
        f"placement does not decide vary from run to run (see each run's p99)."
        if corr < ratio
        else ""
    )
    write_section(
        "Policies on Spark: the best placement known in advance",
        f"""
Command: `.venv/bin/python -m bench.bench_policies_spark oracle` ({environment()}; pyspark 4.3,
local-cluster[2,1,1024]).

What any placement can gain over LLF on `spark-anticorrelated` at {ORACLE_SCALE:g}x its rate (the
placement part's workload and loop): an oracle (bench only, not a controller) scores every split
of the {plan.size} key groups over the 2 partitions by the modelled share of the load on its busier
partition at each {sc.tick_s:g} s tick of a period of the waves and holds the split whose worst
tick is the least, from the first batch. {ORACLE_BATCHES} batches, the last
{ORACLE_BATCHES - ORACLE_WARMUP} timed; each method {ORACLE_REPEATS} times in one session, the
order reversed in the second pass, after a short warm-up replay; the figures are the means
over its runs. Busier share: the share of the load on the plan's busier partition, worst / mean
(a perfect mix of the two classes gives 50%); modelled: over the ticks of a period, from the
declared keys; measured: over the timed batches of every run, the busier partition's share of
the partitions' busy time in the fold.

| placement | busier share, modelled | busier share, measured | batch p50 (s) | batch p99 (s) | p99 of each run (s) | p99 vs LLF | units moved | output = reference |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

The best split known in advance has a batch p99 of {ratio:.2f}x LLF's, {verdict} the 0.75x the
target asks of correlation placement, and a batch p50 of {p50["oracle"] / p50["llf"]:.2f}x
LLF's; correlation-twoway, which learns the phases in the loop, {corr:.2f}x (p50
{p50["correlation-twoway"] / p50["llf"]:.2f}x).{noise}
""",
    )
    print("\n".join(rows))
