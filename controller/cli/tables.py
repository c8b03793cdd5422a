"""How the commands print figures: a table of metrics down the side and one column per run,
the key sets each command shows, and the units in the headers."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.table import Table

from controller.migration_causes import Cause

__all__ = [
    "PREDICTED_KEYS",
    "SPARK_KEYS",
    "SUMMARY_KEYS",
    "adaptation_keys",
    "cause_keys",
    "same_figures",
    "show",
    "table",
    "tie_groups",
    "with_unit",
]


def show(renderable: Any, widen: bool = True) -> None:
    """Print a table whole. A console that is not a terminal (piped or redirected) is 80
    columns, which cut names and numbers to an ellipsis ("3.179e-…"): a table of figures
    (``widen``) prints there at its natural width, unless ``COLUMNS`` sets one. A table of
    prose (decisions' reasons, status) keeps the width; its long cells fold onto more lines,
    as every table's do where it is wider than the width (columns fold rather than cut)."""
    c = Console()
    if widen and not c.is_terminal and "COLUMNS" not in os.environ:  # a width set is kept
        natural = Console(width=10_000).measure(renderable).maximum  # unclamped by 80
        c = Console(width=max(c.width, natural))
    c.print(renderable)


SPARK_KEYS = (
    "batches",
    "batch_duration_p50",
    "batch_duration_p99",
    "rows_in",
    "rows_out",
    "rows_dropped",
    "state_rows_moved",
    "partials_merged",
    "output_matches_reference",
)
# what a replay with --calibration predicts (the simulator's model of the Spark run)
PREDICTED_KEYS = (
    "predicted_batch_duration_p50",
    "predicted_batch_duration_p99",
    "predicted_busiest_partition_s_p50",
    "predicted_live_batch_duration_p50",
    "predicted_live_batch_duration_p99",
    "predicted_live_latency_p50_s",
    "predicted_live_latency_p99_s",
    "predicted_live_backlog_max",
    "predicted_live_batches",
)
SUMMARY_KEYS = (
    "throughput",
    "mean_latency",
    "p99_latency",
    "node_load_variance_mean",
    "mean_pairwise_node_correlation",
    "migrations",
    "dropped_fraction",
    "lost_tuples",
)


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"  # not measured (e.g. no batch timed)
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def table(rows: list[dict[str, Any]], keys: tuple[str, ...], label: str) -> Table:
    """Metrics down the side, one column per run (fits a terminal for several runs); runs
    whose figures all print alike are named under it (a tie is a finding, not a comparison)."""
    keys, rows = cause_keys(keys, rows)
    t = Table(title=None)
    t.add_column("metric", overflow="fold")
    for r in rows:
        t.add_column(str(r.get(label, "")), justify="right", overflow="fold")
    cells = [[_fmt(r.get(k, "")) for r in rows] for k in keys]
    for k, row in zip(keys, cells, strict=True):
        t.add_row(with_unit(k), *row)
    labels = [str(r.get(label, "")) for r in rows]
    ties = tie_groups(labels, list(zip(*cells, strict=True)))
    moved = {n: r.get("pairwise_moves") for n, r in zip(labels, rows, strict=True)}
    t.caption = same_figures(ties, moved if "migrations" in keys else {})
    t.caption_justify = "left"
    return t


def cause_keys(
    keys: tuple[str, ...], rows: list[dict[str, Any]]
) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """Below ``migrations``, a row per cause that moved units in any run (``migrations_by_cause``:
    global step, stale trigger, pair-wise rounds, failover, ...), 0 for a run it moved none in.

    >>> keys, rows = cause_keys(("migrations",), [{"migrations_by_cause": {"pairwise": 2}}, {}])
    >>> keys, [r.get("migrations: pairwise") for r in rows]
    (('migrations', 'migrations: pairwise'), [2, None])
    """
    causes = sorted({c for r in rows for c in r.get("migrations_by_cause") or {}})
    if "migrations" not in keys or not causes:
        return keys, rows
    by = [f"migrations: {c}" for c in causes]
    at = keys.index("migrations") + 1
    out = [
        r | {f"migrations: {c}": r["migrations_by_cause"].get(c, 0) for c in causes}
        if r.get("migrations_by_cause") is not None
        else r
        for r in rows
    ]
    return (*keys[:at], *by, *keys[at:]), out


def tie_groups(labels: list[str], columns: list[tuple[str, ...]]) -> list[list[str]]:
    """The runs whose columns print the same figures, group by group (groups of two or more).

    >>> tie_groups(["a", "b", "c", "d"], [("1", "2"), ("1", "3"), ("1", "2"), ("1", "3")])
    [['a', 'c'], ['b', 'd']]
    >>> tie_groups(["a", "b"], [("1",), ("2",)])
    []
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, col in zip(labels, columns, strict=True):
        groups.setdefault(col, []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def same_figures(ties: list[list[str]], pairwise_moves: dict[str, Any]) -> str | None:
    """A line naming the tied runs; a group of correlation methods whose pair-wise rounds
    moved no unit (the only place where they differ) says so.

    >>> same_figures([["a", "c"], ["b", "d"]], {})
    'the same figures: a = c; b = d'
    >>> same_figures([], {}) is None
    True
    >>> same_figures([["correlation-oneway", "correlation-twoway"]],
    ...              {"correlation-oneway": 0, "correlation-twoway": 0})
    'the same figures: correlation-oneway = correlation-twoway (their pair-wise rounds moved no unit, and they differ only there)'
    """
    out = []
    for g in ties:
        line = " = ".join(g)
        if all(n.startswith("correlation-") and pairwise_moves.get(n) == 0 for n in g):
            line += " (their pair-wise rounds moved no unit, and they differ only there)"
        out.append(line)
    return f"the same figures: {'; '.join(out)}" if out else None


def adaptation_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """Each row's ``adaptation`` (one entry per drift or fault time) as table keys, set on
    the rows in place; the keys in time order. Rounds that never came back read "never".

    >>> rows = [{"adaptation": [{"at_s": 600.0, "latency_before_s": 0.01,
    ...     "latency_after_s": 0.07, "adaptation_rounds": None}]}]
    >>> keys = adaptation_keys(rows)
    >>> keys[-1], rows[0][keys[-1]]
    ('adaptation_rounds after 600 s', 'never')
    """

    def cells(a: dict[str, Any]) -> dict[str, Any]:
        at, rounds = f"{a['at_s']:g} s", a["adaptation_rounds"]
        return {
            f"latency before {at} (s)": a["latency_before_s"],
            f"latency after {at} (s)": a["latency_after_s"],
            f"adaptation_rounds after {at}": "never" if rounds is None else rounds,
        }

    keys: dict[str, None] = {}
    changes = sorted({a["at_s"]: a for r in rows for a in r.get("adaptation") or []}.items())
    for _, a in changes:
        keys.update(dict.fromkeys(cells(a)))
    for r in rows:
        for a in r.get("adaptation") or []:
            r.update({k: "" if v is None else v for k, v in cells(a).items()})
    return tuple(keys)


UNITS = {
    "throughput": "tuples/s",
    "weighted_throughput": "tuples/s",
    "mean_latency": "s",
    "p99_latency": "s",
    "batch_duration_p50": "s",
    "batch_duration_p99": "s",
    "predicted_batch_duration_p50": "s",
    "predicted_batch_duration_p99": "s",
    "predicted_busiest_partition_s_p50": "s",
    "predicted_live_batch_duration_p50": "s",
    "predicted_live_batch_duration_p99": "s",
    "predicted_live_latency_p50_s": "s",
    "predicted_live_latency_p99_s": "s",
    "predicted_live_backlog_max": "segments",
    "predicted_live_batches": "batches",
    "wall_s": "s",
    "node_load_variance_mean": "cores²",
    "node_mean_load_max": "cores",
    "node_mean_load_min": "cores",
    "mean_pairwise_node_correlation": "-1..1",
    "migrations": "moves",
    "pairwise_moves": "moves",
    **{f"migrations: {c}": "moves" for c in Cause},
    "dropped_fraction": "0..1",
    "rows_in": "rows",
    "rows_out": "rows",
    "rows_dropped": "rows",
    "lost_tuples": "tuples",
    "duplicate_tuples": "tuples",
    "duplicates_suppressed": "tuples",
    "corrections": "tuples",
    "latency_tentative_mean": "s",
    "latency_first_p99": "s",
    "latency_stable_mean": "s",
    "latency_stable_p99": "s",
    "state_rows_moved": "rows",
    "partials_merged": "partials",
    "imbalance_mean": "max/mean - 1",
    "imbalance_p95": "max/mean - 1",
    "fragmentation_mean": "workers/key",
    "fragmentation_max": "workers/key",
    "aggregation_cost_mean": "partials",
    "routing_us_per_key": "us",
    "lambda_max_mean": "x fair share",
}


def with_unit(key: str) -> str:
    """A summary key with its unit, for table headers.

    >>> with_unit("mean_latency"), with_unit("scenario")
    ('mean_latency (s)', 'scenario')
    """
    unit = UNITS.get(key)
    return f"{key} ({unit})" if unit else key
