"""Run reports: time series to CSV, PNG plots and one self-contained HTML page.

Plot functions take data and return a ``matplotlib.figure.Figure``; they never save or show.
``write_report`` is the caller that decides where things go.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from core import loadstats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from controller.replay import ReplayResult

__all__ = ["plot_correlation", "plot_heatmap", "plot_node_load", "plot_shed", "write_report"]


def _xlabel(df: pd.DataFrame) -> str:
    return "micro-batch" if df.index.name == "batch" else "time (s)"


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(8, 4), layout="constrained")


def plot_node_load(node_load: pd.DataFrame) -> Figure:
    """Node load (cores) over time, one line per node."""
    fig = _figure()
    ax = fig.add_subplot()
    for col in node_load.columns:
        ax.plot(node_load.index, node_load[col], lw=0.8, label=str(col))
    ax.set_xlabel(_xlabel(node_load))
    ax.set_ylabel("load (cores)")
    ax.set_title("Node load over time")
    if len(node_load.columns) <= 12:
        ax.legend(fontsize="small", ncols=2)
    return fig


def plot_heatmap(node_load: pd.DataFrame) -> Figure:
    """Heat map of node load: nodes x time."""
    fig = _figure()
    ax = fig.add_subplot()
    im = ax.imshow(
        node_load.to_numpy().T,
        aspect="auto",
        interpolation="nearest",
        extent=(
            float(node_load.index[0]),
            float(node_load.index[-1]),
            len(node_load.columns) - 0.5,
            -0.5,
        ),
    )
    ax.set_yticks(range(len(node_load.columns)), [str(c) for c in node_load.columns])
    ax.set_xlabel(_xlabel(node_load))
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
    ax.set_xlabel("time (s)")
    ax.set_ylabel("keep fraction")
    ax.set_title("Shed fractions over time")
    ax.legend(fontsize="small")
    return fig


def _png(fig: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=90)


def write_report(result: ReplayResult, out_dir: str | Path) -> Path:
    """Write CSV series, PNG plots, ``summary.json``, ``decisions.json`` and ``report.html``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = result.series
    s.node_load.to_csv(out / "node_load.csv")
    s.node_util.to_csv(out / "node_util.csv")
    s.backlog_s.to_csv(out / "backlog_s.csv")
    s.streams.to_csv(out / "streams.csv")
    (out / "summary.json").write_text(json.dumps(result.summary, indent=2, default=float))
    (out / "decisions.json").write_text(
        json.dumps([d.__dict__ for d in result.decisions], indent=1, default=float)
    )
    half = len(s.node_load) // 2
    figs: dict[str, Any] = {
        "node_load.png": plot_node_load(s.node_load),
        "heatmap.png": plot_heatmap(s.node_load),
        "correlation_before.png": plot_correlation(
            s.node_load.iloc[: max(half, 2)], "Node correlation, first half"
        ),
        "correlation_after.png": plot_correlation(
            s.node_load.iloc[half:], "Node correlation, second half"
        ),
    }
    if s.shed is not None:
        figs["shed.png"] = plot_shed(s.shed)
    for name, fig in figs.items():
        _png(fig, out / name)
    rows = "".join(
        f"<tr><td>{k}</td><td>{v:.6g}</td></tr>"
        if isinstance(v, float)
        else f"<tr><td>{k}</td><td>{v}</td></tr>"
        for k, v in result.summary.items()
    )
    imgs = "".join(
        f'<h2>{name[:-4].replace("_", " ")}</h2><img src="data:image/png;base64,'
        f'{base64.b64encode((out / name).read_bytes()).decode()}"/>'
        for name in figs
    )
    html = (
        "<!doctype html><html><head><meta charset='utf-8'><title>trimtab report</title></head>"
        f"<body><h1>trimtab report: {result.summary.get('scenario', '')}</h1>"
        f"<table border='1' cellpadding='3'>{rows}</table>{imgs}</body></html>"
    )
    (out / "report.html").write_text(html)
    return out
