"""DPC on Spark, live: one input silent for 10 s, in ``tentative`` and ``block`` mode.

A paced writer (one 2 s tick per 2 s trigger, so event time keeps wall time) and a live
local[2] driver run ``spark-silent-input``; after segment 5 ``trimtab inject silence-stream S
--seconds 10`` holds S back, and the writer delivers its backlog when the hold ends
(``controller.live_rig.run_silenced``). Run: .venv/bin/python -m bench.bench_ha dpc
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.common import ROOT, environment
from controller.live_rig import run_silenced

SEGMENTS, TRIGGER_S, SILENCE_S, MAX_DELAY_S = 24, 2.0, 10.0, 2.0


def run_mode(tmp: Path, mode: str) -> dict[str, Any]:
    """One live run in ``mode``: the driver's result with its timeline and verification."""
    raw = yaml.safe_load((ROOT / "scenarios" / "spark-silent-input.yaml").read_text())
    raw["faults"] = []  # live: the silence is injected
    raw["controller"]["ha"]["dpc"] = {"mode": mode, "max_delay_s": MAX_DELAY_S}
    sc_path = tmp / f"{mode}.yaml"
    sc_path.write_text(yaml.safe_dump(raw))
    return run_silenced(sc_path, tmp / mode, SEGMENTS, ("S", 5, SILENCE_S), 0.05, TRIGGER_S)


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def section() -> str:
    """Both modes side by side, as a BENCHMARKS section body."""
    with tempfile.TemporaryDirectory(prefix="trimtab-dpc-") as d:
        runs = {m: run_mode(Path(d), m) for m in ("tentative", "block")}
    rows = []
    for mode, r in runs.items():
        t = r["timeline"]
        usual, first = t["usual_latency_p50_s"], t["affected_window_first_max_s"]
        added = None if first is None or usual is None else first - usual
        done = t["corrections_done_after_backlog_s"]
        rows.append(
            f"| {mode} | {_s(t['silence_s'])} | {_s(usual)} | {t['affected_windows']} | "
            f"{_s(first)} | {_s(added)} | {_s(t['affected_first_latency_p99_s'])} | "
            f"{t['tentative_rows']} | {t['corrected_rows']} | {_s(done)}"
            f"{'' if done is None else f' ({done / TRIGGER_S:.1f} triggers)'} | "
            f"{r['verify']['output_matches_reference']} |"
        )
    table = "\n".join(rows)
    return f"""
Command: `.venv/bin/python -m bench.bench_ha dpc` ({environment()}; pyspark 4.3, local[2] driver).

`spark-silent-input` live: a writer paces one 2 s tick per {TRIGGER_S:.0f} s trigger, the
driver runs `trimtab pipeline run --trigger-s {TRIGGER_S:.0f}`, and after segment 5
`trimtab inject silence-stream S --seconds {SILENCE_S:.0f}` holds S back; the writer delivers
S's backlog as one segment when the hold ends. `ha.dpc.max_delay_s` = {MAX_DELAY_S:.0f} s.
A latency is from the arrival of the first segment covering a window's end in R (the stream
that kept flowing) to the commit of the batch that first wrote a row of it (tentative or
stable): per window (its first row of any key) and per (window, key) result. "Usual" is the
median over windows due after the driver's first commit and outside the silence and the 4
batch intervals after it; "affected" windows fell due during the silence; "added" is the
affected windows' latest first row less the usual latency. A join's result for a key whose
rows in S all fell in the silence exists only once S's backlog is through, so the per-result
p99 includes those. "Corrections done" is from the backlog's arrival to the commit of the last
correction. The stable view (`output/`) is checked against the reference over the same input.

| mode | silence (s) | usual latency p50 (s) | affected windows | their first row, max (s) | added (s) | affected results, first version p99 (s) | tentative rows | corrected rows | corrections done after backlog (s) | output = reference |
|---|---|---|---|---|---|---|---|---|---|---|
{table}

Targets: tentative results at most max_delay + 1 trigger ({MAX_DELAY_S + TRIGGER_S:.0f} s) after
their usual time; every correction committed within 3 triggers ({3 * TRIGGER_S:.0f} s) of the
backlog's arrival; block mode holds the affected windows for the outage; both end exact.
"""
