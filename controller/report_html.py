"""The report's one HTML page: a run's figures in plain words with units, the side-by-side
comparison when the run had one (the demo's hash against trimtab), the decision timeline and
the plots, self-contained (images inline, no scripts, no external files)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from controller.migration_causes import describe

__all__ = ["FIGURES", "page"]

# summary key -> (what it is, unit, how to format)
FIGURES: dict[str, tuple[str, str, str]] = {
    "throughput": ("tuples completed per second", "tuples/s", "{:,.0f}"),
    "weighted_throughput": ("weighted output per second", "tuples/s", "{:,.1f}"),
    "mean_latency": ("mean latency", "s", "{:.3f}"),
    "p99_latency": ("99th-percentile latency", "s", "{:.3f}"),
    "batch_duration_p50": ("median micro-batch duration", "s", "{:.3f}"),
    "batch_duration_p99": ("99th-percentile micro-batch duration", "s", "{:.3f}"),
    "node_load_variance_mean": ("node-load variance (mean over the window)", "cores²", "{:.4f}"),
    "mean_pairwise_node_correlation": ("mean pairwise node-load correlation", "-1 to 1", "{:.3f}"),
    "migrations": ("units moved between nodes", "moves", "{:,.0f}"),
    "migrations_by_cause": ("of them, by the rule that moved them", "moves", "{}"),
    "pairwise_moves": ("of them, by the method's own pair-wise rounds", "moves", "{:,.0f}"),
    "plan_versions": ("plans published", "plans", "{:,.0f}"),
    "dropped_fraction": ("input dropped by shedding", "%", "{:.2%}"),
    "rows_in": ("input rows", "rows", "{:,.0f}"),
    "rows_out": ("output rows", "rows", "{:,.0f}"),
    "lost_tuples": ("tuples lost", "tuples", "{:,.0f}"),
    "duplicate_tuples": ("tuples delivered twice", "tuples", "{:,.0f}"),
    "duplicates_suppressed": ("tuples sent again, dropped by the sink", "tuples", "{:,.0f}"),
    "partials_merged": ("partial results merged across partitions", "partials", "{:,.0f}"),
    "state_rows_moved": ("state rows moved between partitions", "rows", "{:,.0f}"),
    "output_matches_reference": ("output equal to the reference", "", "{}"),
    "ticks": ("ticks (simulator) or micro-batches (Spark)", "", "{:,.0f}"),
}

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .7em;border-bottom:1px solid #eee;
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
.note{color:#666}img{max-width:100%;border:1px solid #eee}details{margin:.5em 0}
"""


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if key == "migrations_by_cause" and isinstance(v, dict):
        return html.escape(describe(v))
    spec = FIGURES.get(key, ("", "", "{:.4g}"))[2]
    try:
        return spec.format(v)
    except (TypeError, ValueError):
        return html.escape(str(v))


def _label(key: str) -> str:
    what, unit, _ = FIGURES[key]
    return f"{html.escape(what)}" + (f" ({html.escape(unit)})" if unit else "")


def _summary(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_label(k)}</td><td class='n'>{_fmt(k, summary[k])}</td></tr>"
        for k in FIGURES
        if k in summary
    )
    return f"<table>{rows}</table>"


def _comparison(runs: list[dict[str, Any]]) -> str:
    if len(runs) < 2:
        return ""
    names = [
        html.escape(str(r.get("run", r.get("placement", f"run {i}")))) for i, r in enumerate(runs)
    ]
    head = "<tr><th></th>" + "".join(f"<th>{n}</th>" for n in names) + "</tr>"
    rows = "".join(
        f"<tr><td>{_label(k)}</td>"
        + "".join(f"<td class='n'>{_fmt(k, r.get(k))}</td>" for r in runs)
        + "</tr>"
        for k in FIGURES
        if any(k in r for r in runs)
    )
    return f"<h2>Side by side</h2><table>{head}{rows}</table>"


def _adaptation(summary: dict[str, Any]) -> str:
    """Each drift or fault the scenario lists: latency before and after, rounds until back."""
    changes = summary.get("adaptation") or []
    if not changes:
        return ""
    rows = "".join(
        f"<tr><td class='n'>{a['at_s']:g}</td><td class='n'>{_fmt('', a['latency_before_s'])}</td>"
        f"<td class='n'>{_fmt('', a['latency_after_s'])}</td><td class='n'>"
        + ("never" if a["adaptation_rounds"] is None else _fmt("", a["adaptation_rounds"]))
        + "</td></tr>"
        for a in changes
    )
    head = (
        "<tr><th>change at (s)</th><th>mean latency, 120 s before (s)</th>"
        "<th>mean latency, 120 s after (s)</th><th>control rounds until back</th></tr>"
    )
    note = (
        "Rounds until the 60 s rolling mean latency, over a window after the change, is back "
        "within 2x of its level before."
    )
    return f"<h2>Adaptation</h2><p class='note'>{note}</p><table>{head}{rows}</table>"


def _timeline(decisions: list[dict[str, Any]], limit: int = 60) -> str:
    acted = [d for d in decisions if d.get("plan_version") is not None and _changed(d)]
    if not decisions:
        return "<h2>Decisions</h2><p class='note'>No decisions were recorded.</p>"
    shown = acted[:limit]
    rows = "".join(
        f"<tr><td class='n'>{d.get('round', '')}</td><td class='n'>{float(d.get('time_s', 0.0)):.1f}</td>"
        f"<td>{html.escape(str(d.get('kind', '')))}</td><td class='n'>{d.get('plan_version', '')}</td>"
        f"<td>{html.escape(str(d.get('reason', '')))}</td></tr>"
        for d in shown
    )
    note = (
        f"{len(acted)} of {len(decisions)} rounds changed the plan"
        + (f"; the first {limit} are shown" if len(acted) > limit else "")
        + ". Every round, with the numbers behind it, is in decisions.json."
    )
    if not acted:
        return f"<h2>Decisions</h2><p class='note'>No round changed the plan ({len(decisions)} rounds).</p>"
    head = "<tr><th>round</th><th>time (s)</th><th>decision</th><th>plan version</th><th>reason</th></tr>"
    return f"<h2>Decisions that changed the plan</h2><p class='note'>{note}</p><table>{head}{rows}</table>"


def _changed(d: dict[str, Any]) -> bool:
    kind = str(d.get("kind", ""))
    return bool(d.get("applied", True)) and kind not in ("hold", "noop", "none", "")


def page(
    out: Path,
    summary: dict[str, Any],
    figures: list[tuple[str, str]],
    decisions: list[dict[str, Any]],
    comparison: list[dict[str, Any]],
) -> str:
    """The HTML page; ``figures`` are (file name, heading) of PNGs in ``out``."""
    title = html.escape(str(summary.get("scenario", "")))
    sub = ", ".join(
        f"{k}: {html.escape(str(summary[k]))}"
        for k in ("substrate", "placement", "partitioner", "shedding", "ha_policy")
        if summary.get(k) is not None
    )
    imgs = "".join(
        f"<h2>{html.escape(head)}</h2><img alt='{html.escape(head)}' "
        f"src='data:image/png;base64,{base64.b64encode((out / name).read_bytes()).decode()}'/>"
        for name, head in figures
    )
    rest = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))[:300]}</td></tr>"
        for k, v in summary.items()
        if k not in FIGURES and not isinstance(v, dict | list)
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>trimtab report: {title}</title><style>{CSS}</style></head><body>"
        f"<h1>trimtab report: {title}</h1><p class='note'>{sub}</p>"
        f"<h2>Summary</h2>{_summary(summary)}{_comparison(comparison)}{_adaptation(summary)}"
        f"{_timeline(decisions)}"
        f"{imgs}<details><summary>Every other figure of the run</summary><table>{rest}</table>"
        "</details></body></html>"
    )
