"""Run reports: time series as CSV, PNG plots and one self-contained HTML page.

``write_report`` saves a run's series into a directory and renders it; ``render_run_dir``
renders again from the saved files (``trimtab report RUN_DIR``). Plot functions take data and
return a ``matplotlib.figure.Figure``; they never save or show.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from controller.migration_causes import describe
from controller.report_html import page
from core import loadstats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from controller.replay import ReplayResult

__all__ = [
    "plot_correlation",
    "plot_heatmap",
    "plot_node_load",
    "plot_note",
    "plot_placement",
    "plot_recovery",
    "plot_shed",
    "render_run_dir",
    "write_report",
]


def _x_axis(ax: Any, df: pd.DataFrame) -> None:
    """Label the x axis by the series' index: micro-batches (whole ticks only) or seconds."""
    if df.index.name == "batch":
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("micro-batch")
    else:
        ax.set_xlabel("time (s)")


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(8, 4), layout="constrained")


def plot_note(title: str, text: str) -> Figure:
    """A figure that says what happened instead of drawing an empty frame."""
    fig = _figure()
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=13, color="#555")
    return fig


def _to_end(df: pd.DataFrame, end: float) -> pd.DataFrame:
    """A step series carried on to the run's end (its last value held)."""
    if len(df) and float(df.index[-1]) < end:
        last = df.iloc[[-1]].copy()
        last.index = pd.Index([end], name=df.index.name)
        return pd.concat([df, last])
    return df


def plot_node_load(node_load: pd.DataFrame) -> Figure:
    """Node load (cores) over time, one line per node."""
    fig = _figure()
    ax = fig.add_subplot()
    for col in node_load.columns:
        ax.plot(node_load.index, node_load[col], lw=0.8, label=str(col))
    _x_axis(ax, node_load)
    ax.set_ylabel("load (cores)")
    ax.set_title("Node load over time")
    if len(node_load.columns) <= 12:
        ax.legend(fontsize="small", ncols=2)
    return fig


def plot_heatmap(node_load: pd.DataFrame) -> Figure:
    """Heat map of node load: nodes x time."""
    fig = _figure()
    ax = fig.add_subplot()
    x0, x1 = float(node_load.index[0]), float(node_load.index[-1])
    im = ax.imshow(
        node_load.to_numpy().T,
        aspect="auto",
        interpolation="nearest",
        extent=(x0, x1 if x1 > x0 else x0 + 1, len(node_load.columns) - 0.5, -0.5),
    )
    ax.set_yticks(range(len(node_load.columns)), [str(c) for c in node_load.columns])
    _x_axis(ax, node_load)
    ax.set_ylabel("node")
    ax.set_title("Load heat map")
    fig.colorbar(im, ax=ax, label="cores")
    return fig


def plot_correlation(node_load: pd.DataFrame, title: str = "Node load correlation") -> Figure:
    """Correlation matrix of node load series."""
    fig = _figure()
    ax = fig.add_subplot()
    c = loadstats.correlation(node_load.to_numpy().T)
    im = ax.imshow(c, vmin=-1, vmax=1, cmap="coolwarm")
    names = [str(x) for x in node_load.columns]
    ax.set_xticks(range(len(names)), names, rotation=90)
    ax.set_yticks(range(len(names)), names)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="rho")
    return fig


def plot_shed(shed: pd.DataFrame) -> Figure:
    """Keep fraction per stream over time (a step plot)."""
    fig = _figure()
    ax = fig.add_subplot()
    for col in shed.columns:
        ax.step(shed.index, shed[col], where="post", label=str(col))
    ax.set_ylim(-0.05, 1.05)
    _x_axis(ax, shed)
    ax.set_ylabel("keep fraction")
    ax.set_title("Shed fractions over time")
    ax.legend(fontsize="small")
    return fig


def plot_placement(placement: pd.DataFrame) -> Figure:
    """Operators per node after each plan change (a stacked step area)."""
    fig = _figure()
    ax = fig.add_subplot()
    x = placement.index.to_numpy(dtype=float)
    ax.stackplot(x, placement.to_numpy().T, labels=[str(c) for c in placement.columns], step="post")
    _x_axis(ax, placement)
    ax.set_ylabel("operators")
    ax.set_title("Placement over time")
    if len(placement.columns) <= 12:
        ax.legend(fontsize="small", ncols=2, loc="upper left")
    return fig


def plot_recovery(
    events: pd.DataFrame, decisions: list[dict[str, Any]], nodes: list[str]
) -> Figure:
    """Faults and the controller's recovery decisions on a timeline."""
    fig = _figure()
    ax = fig.add_subplot()
    marks = {"kill": "x", "lose": "X", "slow": "v", "partition": "s", "restore": "o"}
    for kind, grp in events.groupby("kind") if len(events) else []:
        y = [nodes.index(n) if n in nodes else 0 for n in grp["node"]]
        ax.scatter(grp["time_s"], y, marker=marks.get(str(kind), "."), s=60, label=f"fault: {kind}")
    rec = [d for d in decisions if str(d.get("kind", "")).startswith("recover")]
    for d in rec:
        ax.axvline(float(d.get("time_s", 0.0)), color="green", lw=1, alpha=0.6)
    if rec:
        ax.plot([], [], color="green", label="recovery decision")
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_xlabel("time (s)")
    ax.set_title("Recovery timeline")
    if len(events) or rec:
        ax.legend(fontsize="small")
    return fig


def plot_nodes(nodes: pd.DataFrame) -> Figure:
    """Running nodes over time (scaling; a step plot)."""
    fig = _figure()
    ax = fig.add_subplot()
    ax.step(nodes.index, nodes.iloc[:, 0], where="post")
    ax.set_ylim(0, float(nodes.iloc[:, 0].max()) + 1)
    _x_axis(ax, nodes)
    ax.set_ylabel("running nodes")
    ax.set_title("Running nodes over time")
    return fig


def _png(fig: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=90)


# what a run writes only when it has them (a Spark run: no shed, placement or fault series)
OPTIONAL_FILES = ("comparison.json", "nodes.csv", "shed.csv", "placement.csv", "events.csv")


def write_report(
    result: ReplayResult, out_dir: str | Path, comparison: list[dict[str, Any]] | None = None
) -> Path:
    """Save the run's series (CSV), summary and decisions (JSON), then render the report;
    ``comparison``: the summaries of runs to show side by side (the demo's hash and trimtab)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in OPTIONAL_FILES:  # a run before this one in the directory: not this run's
        (out / name).unlink(missing_ok=True)
    if comparison:
        (out / "comparison.json").write_text(json.dumps(comparison, indent=1, default=float))
    s = result.series
    s.node_load.to_csv(out / "node_load.csv")
    s.node_util.to_csv(out / "node_util.csv")
    s.backlog_s.to_csv(out / "backlog_s.csv")
    s.streams.to_csv(out / "streams.csv")
    if s.nodes is not None and s.nodes.nunique() > 1:
        s.nodes.to_csv(out / "nodes.csv")
    for name in ("shed", "placement", "events"):
        df = getattr(s, name, None)
        if df is not None:
            df.to_csv(out / f"{name}.csv", index=name != "events")
    (out / "summary.json").write_text(json.dumps(result.summary, indent=2, default=float))
    (out / "decisions.json").write_text(
        json.dumps([d.__dict__ for d in result.decisions], indent=1, default=float)
    )
    return render_run_dir(out)


def _read(out: Path, name: str, index: bool = True) -> pd.DataFrame | None:
    """``name.csv`` of a run directory (None when absent), or ValueError naming the file: a
    series is indexed by ``time_s`` (a Spark run's by ``batch``) and holds finite numbers, the events table has its three
    columns (a file cut short or not trimtab's fails here, before anything is rendered)."""
    p = out / f"{name}.csv"
    if not p.exists():
        return None
    try:
        df = pd.read_csv(p, index_col=0) if index else pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not a CSV table ({str(e).splitlines()[0]})") from None
    first = df.index.name if index else (df.columns[0] if len(df.columns) else None)
    if first not in ("time_s", "batch") or (not index and list(df.columns)[1:] != ["kind", "node"]):
        raise ValueError(
            f"{p}: not a trimtab run's series (it starts with {first!r}, not 'time_s' or 'batch')"
        )
    numbers = (df if index else df[[first]]).apply(pd.to_numeric, errors="coerce")
    bad = ~np.isfinite(numbers.to_numpy(dtype=float)).all(axis=1)
    if index:
        bad |= ~np.isfinite(pd.to_numeric(df.index, errors="coerce").to_numpy(dtype=float))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{p}: row {row + 2} is not all numbers (a file cut short?)")
    return df


def _read_json(out: Path, name: str, kind: type) -> Any:
    """``name.json`` of a run directory (an empty ``kind`` when absent), or ValueError naming
    the file."""
    p = out / f"{name}.json"
    if not p.exists():
        return kind()
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(data, kind):
        raise ValueError(f"{p}: not a trimtab run's {name} (a JSON {kind.__name__} is expected)")
    return data


def render_run_dir(run_dir: str | Path) -> Path:
    """Render PNG plots and ``report.html`` from a run directory's saved files; every file is
    read and checked before anything is written."""
    out = Path(run_dir)
    if not out.is_dir():
        what = "no such directory" if not out.exists() else "not a directory"
        raise FileNotFoundError(f"{out}: {what} (a run directory written by replay --report)")
    node_load = _read(out, "node_load")
    if node_load is None or not (out / "summary.json").exists():
        raise FileNotFoundError(
            f"{out}: not a run directory (node_load.csv and summary.json are needed)"
        )
    summary = _read_json(out, "summary", dict)
    decisions = _read_json(out, "decisions", list)
    comparison = _read_json(out, "comparison", list)
    for name in ("placement", "shed", "nodes"):
        _read(out, name)
    _read(out, "events", index=False)
    figs = _figures(out, node_load, decisions)
    for name, fig, _ in figs:
        _png(fig, out / name)
    for stale in ("correlation_before.png", "correlation_after.png"):  # older reports' names
        (out / stale).unlink(missing_ok=True)
    lines = [f"{k} = {_text(summary[k])}" for k in REPORT_KEYS if k in summary]
    html = page(out, summary, [(n, h) for n, _, h in figs], decisions, comparison)
    (out / "report.html").write_text(html)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return out


def _text(v: Any) -> str:
    """A figure in ``summary.txt``: "n/a" for one not measured, causes on one line.

    >>> _text(0.123456), _text(None), _text({"pairwise": 2}), _text(3)
    ('0.1235', 'n/a', 'pairwise 2', '3')
    """
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return describe(v)
    return "n/a" if v is None else str(v)


REPORT_KEYS = (
    "throughput",
    "mean_latency",
    "p99_latency",
    "node_load_variance_mean",
    "migrations",
    "migrations_by_cause",
    "pairwise_moves",
    "dropped_fraction",
    "lost_tuples",
    "node_seconds",
    "scale_actions",
)


def _load_figures(node_load: pd.DataFrame) -> list[tuple[str, Any, str]]:
    """Node load over time, its heat map and the node correlation in each half of the run."""
    half = len(node_load) // 2
    return [
        ("node_load.png", plot_node_load(node_load), "Node load over time"),
        ("heatmap.png", plot_heatmap(node_load), "Load heat map"),
        (
            "correlation_first_half.png",
            plot_correlation(node_load.iloc[: max(half, 2)], "Node correlation, first half"),
            "Node correlation, first half of the run",
        ),
        (
            "correlation_second_half.png",
            plot_correlation(node_load.iloc[half:], "Node correlation, second half"),
            "Node correlation, second half of the run",
        ),
    ]


def _figures(
    out: Path, node_load: pd.DataFrame, decisions: list[Any]
) -> list[tuple[str, Any, str]]:
    """The report's figures: (file name, figure, heading); a note where nothing happened."""
    end = float(node_load.index[-1]) if len(node_load) else 0.0
    figs = (  # no load at all: no batch read a row (a stream of rate 0)
        _load_figures(node_load)
        if len(node_load)
        else [("node_load.png", plot_note("Node load", "No load was measured"), "Node load")]
    )
    placement = _read(out, "placement")
    moved = placement is not None and len(placement.drop_duplicates()) > 1
    figs.append(
        (
            "placement.png",
            plot_placement(_to_end(placement, end))
            if moved and placement is not None
            else plot_note(
                "Placement over time", "Nothing moved: the placement stayed as it started"
            ),
            "Placement over time",
        )
    )
    shed = _read(out, "shed")
    shedding = shed is not None and len(shed) and bool((shed < 1.0 - 1e-12).to_numpy().any())
    figs.append(
        (
            "shed.png",
            plot_shed(_to_end(shed, end))
            if shedding and shed is not None
            else plot_note("Shed fractions over time", "No shedding: every stream was kept whole"),
            "Shedding over time",
        )
    )
    nodes = _read(out, "nodes")
    if nodes is not None:
        figs.append(("nodes.png", plot_nodes(nodes), "Running nodes over time (scaling)"))
    events = _read(out, "events", index=False)
    recovered = [d for d in decisions if str(d.get("kind", "")).startswith("recover")]
    if (events is None or not len(events)) and not recovered:
        fig = plot_note("Recovery timeline", "No faults and no recovery decisions")
    else:
        fig = plot_recovery(
            events if events is not None else pd.DataFrame(columns=["time_s", "kind", "node"]),
            decisions,
            [str(c) for c in node_load.columns],
        )
    figs.append(("recovery.png", fig, "Faults and recovery"))
    return figs
