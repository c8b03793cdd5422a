"""The adaptive loop: how each placement method recovers from a drift, what the stale-placement
trigger adds, whether the stationary case stays calm, and how long a global step takes (the
oracle's rows from ``bench.oracle_adaptive``, the timings from ``bench.step_times``).

Run: .venv/bin/python -m bench.bench_adaptive
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.common import ROOT, environment, write_section
from bench.oracle_adaptive import oracle_switches
from bench.step_times import control_round_times, global_step_times
from controller.compare import mean_adaptation
from controller.replay import replay_sim
from controller.scenario import ScenarioFile, load_scenario

SEEDS = 3
RANDOM_SEEDS = 20  # a random start varies much more from seed to seed than a drift does
METHODS = ["llf", "correlation-oneway", "correlation-twoway", "correlation-selective"]
DRIFTS = ["diurnal-phase-flip", "chain-arrival", "rate-swap"]
VARIANTS: dict[str, dict[str, Any]] = {
    "": {},
    " (trigger off)": {"params": {"stale_trigger": 0.0}},
    " (not migration-aware)": {"migration_aware": False},
}


def _with(sc: ScenarioFile, update: dict[str, Any]) -> ScenarioFile:
    """The scenario with placement settings changed (``params`` merged into the method's)."""
    p = sc.controller.placement
    update = dict(update)
    params = {**p.params, **update.pop("params", {})}
    return sc.with_controller(placement=p.model_copy(update={"params": params, **update}))


def run(
    sc: ScenarioFile, method: str, update: dict[str, Any] | None = None, seeds: int = SEEDS
) -> dict[str, Any]:
    """Mean over ``seeds`` of the summary keys this bench reports, and the decisions' kinds."""
    sc = _with(sc, update or {})
    runs = [replay_sim(sc, placement=method, seed=sc.seed + s) for s in range(seeds)]
    keys = ("mean_latency", "p99_latency", "migrations")
    out: dict[str, Any] = {k: float(np.mean([r.summary[k] for r in runs])) for k in keys}
    out["per_seed"] = {k: [float(r.summary[k]) for r in runs] for k in keys}
    out["adaptation"] = mean_adaptation([r.summary["adaptation"] for r in runs])
    # each run's stale-trigger firings: applied (a re-placement) or held
    fired = [
        [d.applied for d in r.decisions if d.reason.startswith("stale placement")] for r in runs
    ]
    out["stale_reruns"] = float(np.mean([sum(f) for f in fired]))
    out["stale_held"] = float(np.mean([len(f) - sum(f) for f in fired]))
    out["global_moves"], out["later_moves"] = _moves_split(runs)
    if method.startswith("correlation-"):  # the pair-wise rounds' own moves (of migrations)
        out["per_seed"]["pairwise_moves"] = [float(r.summary["pairwise_moves"]) for r in runs]
        out["pairwise_moves"] = float(np.mean(out["per_seed"]["pairwise_moves"]))
    return out


def _moves_split(runs: list[Any]) -> tuple[float, float]:
    """Units moved by the first global step, and by every round after it (mean over runs)."""
    first, later = [], []
    for r in runs:
        moved = [
            (d.reason.startswith("global correlation"), float(d.details.get("moved", 0)))
            for d in r.decisions
            if d.applied and d.kind.startswith("place")
        ]
        first.append(sum(m for g, m in moved if g))
        later.append(sum(m for g, m in moved if not g))
    return float(np.mean(first)), float(np.mean(later))


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "never" if x is None else format(x, spec)


def _row(name: str, label: str, r: dict[str, Any]) -> str:
    a = r["adaptation"][0] if r["adaptation"] else {}
    return (
        f"| {name} | {label} | {_fmt(a.get('latency_before_s'))} | "
        f"{_fmt(a.get('latency_after_s'))} | {_fmt(a.get('adaptation_rounds'), '.1f')} | "
        f"{r['mean_latency']:.3f} | {r['migrations']:.1f} | {r['stale_reruns']:.1f} |"
    )


def drift_table() -> tuple[str, dict[str, dict[str, Any]]]:
    """Every drift scenario: LLF, and each correlation method as shipped (trigger on,
    migration-aware), with the trigger off (Borealis: one global step, then pair-wise
    rounds), and not migration-aware; chain-arrival also from a random start."""
    rows, results = [], {}
    for name in DRIFTS:
        sc = load_scenario(ROOT / f"scenarios/{name}.yaml")
        configs = [("llf", "llf", {}, SEEDS)] + [
            (m + suffix, m, update, SEEDS)
            for m in METHODS[1:]
            for suffix, update in VARIANTS.items()
        ]
        if name == "chain-arrival":
            for m in METHODS[1:]:
                configs += [
                    (f"{m} (random start)", m, {"initial": "random"}, RANDOM_SEEDS),
                    (
                        f"{m} (random start, trigger off)",
                        m,
                        {"initial": "random", "params": {"stale_trigger": 0.0}},
                        RANDOM_SEEDS,
                    ),
                ]
        for label, method, update, seeds in configs:
            r = run(sc, method, update, seeds)
            results[f"{name}/{label}"] = r
            rows.append(_row(name, label, r))
    return "\n".join(rows), results


def paired(a: list[float], b: list[float]) -> str:
    """``a`` against ``b`` run on the same seeds: the mean per-seed difference a - b with its
    standard error, and the seeds where a is below, equal to and above b.

    >>> paired([1.0, 2.0, 3.0], [2.0, 2.0, 5.0])
    '-1 +/- 0.577 (below on 2, equal on 1, above on 0 of 3 seeds)'
    """
    d = np.asarray(a) - np.asarray(b)
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    return (
        f"{d.mean():.3g} +/- {se:.3g} (below on {int((d < 0).sum())}, equal on "
        f"{int((d == 0).sum())}, above on {int((d > 0).sum())} of {d.size} seeds)"
    )


def targets(res: dict[str, dict[str, Any]]) -> str:
    """The issue's targets, each with the figures it is judged on."""

    def after(key: str) -> float:
        return float(res[key]["adaptation"][0]["latency_after_s"])

    lines = []
    flip = "diurnal-phase-flip"
    for m in METHODS[1:]:
        rounds = res[f"{flip}/{m}"]["adaptation"][0]["adaptation_rounds"]
        a, llf, off = after(f"{flip}/{m}"), after(f"{flip}/llf"), after(f"{flip}/{m} (trigger off)")
        lines.append(
            f"- {flip}, {m}: adaptation rounds {_fmt(rounds, '.1f')} (target at most 6); "
            f"latency after {a:.3f} s = {a / llf:.2f} x LLF's (target at most 0.5) and "
            f"{a / off:.2f} x the trigger-off run's (target at most 0.2)"
        )
    for suffix in ("", ", trigger off"):
        rnd = {m: res[f"chain-arrival/{m} (random start{suffix})"] for m in METHODS[1:]}
        one, two = rnd["correlation-oneway"], rnd["correlation-twoway"]
        lines.append(
            f"- chain-arrival from a random start{suffix}: two-way's mean latency "
            f"{two['mean_latency']:.3f} s against one-way's {one['mean_latency']:.3f} s (target: "
            "at most); migrations "
            + ", ".join(f"{m.split('-')[1]} {r['migrations']:.1f}" for m, r in rnd.items())
            + " (target: selective fewest)"
        )
        sel = rnd["correlation-selective"]["per_seed"]["migrations"]
        lines.append(
            "  - paired by seed: two-way's mean latency minus one-way's "
            + paired(two["per_seed"]["mean_latency"], one["per_seed"]["mean_latency"])
            + "; selective's migrations minus one-way's "
            + paired(sel, one["per_seed"]["migrations"])
            + ", minus two-way's "
            + paired(sel, two["per_seed"]["migrations"])
            + "; of the migrations, the pair-wise rounds' own: "
            + ", ".join(f"{m.split('-')[1]} {r['pairwise_moves']:.1f}" for m, r in rnd.items())
        )
    return "\n".join(lines)


def oracle_rows(
    method: str = "correlation-twoway", seeds: int = SEEDS
) -> tuple[str, list[str], list[dict[str, Any]]]:
    """``diurnal-phase-flip`` with the oracle that knows the post-flip plan
    (``bench.oracle_adaptive``): rows of the drift table, the times each switch was applied,
    and the figures."""
    name = "diurnal-phase-flip"
    sc = load_scenario(ROOT / f"scenarios/{name}.yaml")
    switches = oracle_switches(sc, method, seeds)
    rows = [_row(name, f"oracle, {label}", r) for label, r, _ in switches]
    swaps = [f"switched at {', '.join(f'{t:.0f}' for t in ts)} s" for _, _, ts in switches]
    return "\n".join(rows), swaps, [r for _, r, _ in switches]


def interval_table(intervals: tuple[int, ...] = (1, 2, 5, 10, 20)) -> str:
    """diurnal-phase-flip with the control round every 1 to 20 s: two-way as shipped against
    the trigger off. The shorter the round, the earlier the trigger first fires, on a window
    that shows the flip only in part; such a firing is held (no re-placement pays yet), and the
    trigger must fire again once the window shows the whole flip."""
    sc = load_scenario(ROOT / "scenarios/diurnal-phase-flip.yaml")
    rows = []
    for iv in intervals:
        for label, update in (("", {}), (" (trigger off)", {"params": {"stale_trigger": 0.0}})):
            r = run(sc.with_controller(interval_s=iv), "correlation-twoway", update)
            a = r["adaptation"][0]
            rounds = a["adaptation_rounds"]
            secs = "never" if rounds is None else f"{rounds * iv:.0f}"
            rows.append(
                f"| {iv} | correlation-twoway{label} | {secs} | {a['latency_after_s']:.3f} | "
                f"{r['mean_latency']:.3f} | {r['stale_held']:.1f} | {r['stale_reruns']:.1f} |"
            )
    return "\n".join(rows)


def stationary_table() -> str:
    sc = load_scenario(ROOT / "scenarios/anticorrelated-diurnal.yaml")
    rows = []
    for m in [*METHODS[1:], *(f"{m} (not migration-aware)" for m in METHODS[1:])]:
        method, _, variant = m.partition(" ")
        r = run(sc, method, {"migration_aware": False} if variant else {})
        share = r["later_moves"] / r["global_moves"] if r["global_moves"] else float("nan")
        rows.append(
            f"| {m} | {r['global_moves']:.0f} | {r['later_moves']:.0f} | {share:.1%} | "
            f"{r['stale_reruns']:.1f} | {r['mean_latency']:.4f} |"
        )
    return "\n".join(rows)


def main() -> None:
    t_drift, res = drift_table()
    t_targets = targets(res)
    t_oracle, t_swaps, oracle = oracle_rows()
    flip = [res[f"diurnal-phase-flip/{m}"]["adaptation"][0] for m in METHODS[1:]]
    o_at, o_after = (o["adaptation"][0] for o in oracle)
    t_interval = interval_table()
    t_stat = stationary_table()
    t_time = global_step_times()
    t_round = control_round_times()
    write_section(
        "Adaptive loop",
        f"""
Command: `.venv/bin/python -m bench.bench_adaptive` ({environment()}).

Drift at 600 s, simulator, mean of {SEEDS} seeds ({RANDOM_SEEDS} from a random start). Latency
before and after: the mean over the 120 s before and after the drift; rounds: control rounds
(10 s) until the 60 s rolling mean latency, measured over a window after the drift, is back
within 2x of its level before (6 is the least possible, "never" if some run never is).
Each correlation method runs as shipped (stale-placement trigger on, migration-aware), with the
trigger off (Borealis: one global step, then pair-wise rounds only), and not migration-aware.
Reruns: re-placements the trigger made.

| scenario | placement | latency before (s) | latency after (s) | rounds | mean latency (s) | migrations | reruns |
|---|---|---|---|---|---|---|---|
{t_drift}

Against the targets:

{t_targets}

Paired by seed: the same {RANDOM_SEEDS} seeds, so the same random start, run with each method;
a mean difference within about two standard errors of 0 is a tie between the two methods on
this workload, not an ordering, whichever side of the target its mean falls on. The
pair-wise rounds' own moves are where the methods' rules differ (one-way moves at most half a
pair's load gap, selective while an operator's score is at least 0.2, two-way re-places both
nodes' operators); the rest of a run's migrations are the stale trigger's re-placements, the
same rule for the three (another method's initial plan, here random, skips the first global
step: pair-wise rounds from the start).

The least the flip's target asks, measured with an oracle (bench only, not a controller): it
knows the plan correlation-twoway settles on for the workload after the flip (a run with s1 in
its new phase from the start) and switches to it in one round, the round at the flip or the
first round after it (mean of {SEEDS} seeds; {"; ".join(t_swaps)}):

| scenario | placement | latency before (s) | latency after (s) | rounds | mean latency (s) | migrations | reruns |
|---|---|---|---|---|---|---|---|
{t_oracle}

How to read it. On `diurnal-phase-flip` no node's mean load changes at the flip, so no node
pair differs by the pair threshold and no pair-wise round runs: the stale-placement trigger
alone sees the flip (node variance doubles), the same for the three methods, hence their
equal rows; with it off they never recover. The oracle measures what the target asks: only the
switch made at the flip itself, before any round has seen a sample of it, takes
{_fmt(o_at["adaptation_rounds"], ".0f")} rounds. The first in-phase peak after the flip (605 s)
comes before the first round that can see it (610 s); the same plan switched to in that round
takes {_fmt(o_after["adaptation_rounds"], ".0f")} rounds (latency after the flip
{o_after["latency_after_s"]:.3f} s), the three methods
{", ".join(_fmt(x["adaptation_rounds"], ".0f") for x in flip)} (latency after
{", ".join(f"{x['latency_after_s']:.3f}" for x in flip)} s). The pair-wise methods differ
where pairs form: from a random start (and in the hand-checked test of
`tests/placement/test_correlation.py`). Migration-aware and not give the same rows where every
move removes far more overload than its pause costs; the stationary table shows where it
differs.

`diurnal-phase-flip` by control interval (mean of {SEEDS} seeds; recovered: rounds until
recovered x the interval, in seconds; held: firings that led to no re-placement because none
was worth its pauses yet):

| interval (s) | placement | recovered after (s) | latency after (s) | mean latency (s) | held | reruns |
|---|---|---|---|---|---|---|
{t_interval}

Three rules of the trigger show here, each with a test in `tests/controller/test_adaptive.py`
(the figures for the rules they replaced were measured while making the change, not in this
run):

- A held firing keeps the last global step's baseline and backs off (the next firing needs 2x,
  4x, up to 8x `stale_rounds` worse rounds). With 2 s rounds the trigger fires while overload
  lingers after the first re-placement, holds twice (retry after 4, then 8 rounds) and
  re-places on the third. The rule before took the drifted state as the new baseline: with 5 s
  rounds its first firing saw the flip half-way and was held, the variance then grew less than
  2x more, and the run never recovered (latency after 0.392 s, as with the trigger off).
- The overload limit is absolute (2 x 0.01 cores) when moves are migration-aware. With the
  third candidate below and a limit relative to what the last re-placement left, 1 s rounds
  re-placed at 605 s on a window that showed the flip in part, and the limit then accepted the
  overload that plan left: never recovered, latency after 0.114 s. (Before either change the
  605 s firing was held, the trigger fired again at 621 s on variance, and 1 s rounds
  recovered with latency after 0.072 s; now 0.024 s.)
- Besides the global step and the variance descent, the trigger weighs the global step refined
  by an overload descent (`placement/overload_descent.py`). With 20 s rounds it fires at 640 s
  on the window 620-640 s, in which the bursty stream is off; there every plan whose node means
  are balanced (the global step's objective) puts light phase-A units beside a heavy phase-A
  one, and the global step alone removes no overload. Without the refinement the run never
  recovered (latency after 0.350 s).

Stationary `anticorrelated-diurnal` (no drift; target: migrations after the global step at
most 5% of the global step's):

| placement | units moved by the global step | moved after it | share | reruns | mean latency (s) |
|---|---|---|---|---|---|
{t_stat}

Global step time (k = 10; target: the whole step at most 1 s at 100 x 10,000 and at most 15 s
at 1,000 x 100,000). The greedy takes a block of units per scoring while more than 32 remain
(`placement/correlation_greedy.py`); "exact" is the spec's greedy, one unit per scoring, and the
variance ratio compares their plans' mean node variance. The last column is the whole step's
variance over the block greedy's alone (what the later passes add):

| nodes | units | exact greedy (s) | greedy with blocks (s) | variance, blocks / exact | whole global step (s) | variance, whole step / greedy |
|---|---|---|---|---|---|---|
{t_time}

One control round without a global step (target: at most 100 ms at 100 x 10,000; best of 3;
the units of a quarter of the nodes load 50% more, so the round has pairs to balance), and a
round in which the stale trigger fires (the loads 20% above its baseline's, so nodes overload:
the global step, its overload-descent refinement, the variance descent and their scoring; no
target, the global step's is 1 s):

| placement | nodes | units | round (ms) | units moved | plan chosen |
|---|---|---|---|---|---|
{t_round}
""",
    )
    print(t_drift, t_targets, t_oracle, *t_swaps, t_interval, t_stat, t_time, t_round, sep="\n\n")


if __name__ == "__main__":
    main()
