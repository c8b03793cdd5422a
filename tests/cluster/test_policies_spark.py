"""The daemon steers a live Spark pipeline with correlation placement and LP shedding: a paced
writer, a live driver and the controller in external mode on ``spark-overload-ramp``, whose
input ramps to twice what the 2 partitions hold and falls back, and whose stream is split into
an expensive and a cheap branch (the LP drops after the split)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from controller.live_rig import daemon_config, run_live, trimtab_exe
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.cluster
EXE = trimtab_exe()
# the scenario's 34 ticks, then its first 10 again (the writer wraps): 30 s of low load after
# the peak, so the lifted drops reach batches even when the peak left a backlog (CI: the
# drops were lifted one round after the last batch of 34 segments)
SEGMENTS = 44


def test_the_daemon_places_and_sheds_a_live_overloaded_pipeline(tmp_path: Path) -> None:
    """Placements change, keep fractions fall below 1 through the peak and return to 1 after
    it, the LP drops the expensive branch after the split before the cheap one, and the sink
    is exactly the reference with the drops each batch pinned."""
    sc_path, work = SCENARIOS / "spark-overload-ramp.yaml", tmp_path / "pipe"
    cfg = daemon_config(
        tmp_path,
        sc_path,
        work,
        control={"interval_s": 3.0, "window_samples": 3, "on_batch": True},
        placement={"method": "correlation-twoway"},
        shedding={"method": "lp", "headroom": 0.9},
    )
    run_live(cfg, sc_path, work, "local[2]", SEGMENTS)
    # what each batch ran under: its pinned plan's keep and placement
    with contextlib.closing(sqlite3.connect(work / "planlog.sqlite")) as db:
        pins = db.execute("SELECT batch_id, plan_version FROM pins ORDER BY batch_id").fetchall()
    plans = {v: json.loads((work / "plans" / f"v{v:06d}.json").read_text()) for _, v in pins}
    keep = [min(plans[v]["shed"]["keep"] or [1.0]) for _, v in pins]
    sheds = [plans[v]["shed"] for _, v in pins]
    by_loc = [dict(zip(x["locations"], x["keep"], strict=True)) for x in sheds]
    enrich = [k.get("s:parse->enrich", 1.0) for k in by_loc]
    direct = [k.get("s:parse->direct", 1.0) for k in by_loc]
    placed = [tuple(plans[v]["placement"]["assignment"]) for _, v in pins]
    shed_at = [i for i, k in enumerate(keep) if k < 1.0]
    assert shed_at, keep  # the LP shed through the peak
    assert keep[-1] == 1.0 and any(k == 1.0 for k in keep[shed_at[-1] :]), keep  # and lifted
    # the drops land after the split, on the expensive branch first: a batch ran with the
    # enriched branch cut below the cheap one, and the cheap one never lower
    assert any(e < d for e, d in zip(enrich, direct, strict=True)), (enrich, direct)
    assert all(e <= d for e, d in zip(enrich, direct, strict=True)), (enrich, direct)
    assert len(set(placed)) > 1, placed  # correlation placement moved key groups
    with contextlib.closing(sqlite3.connect(tmp_path / "decisions.sqlite")) as db:
        reasons = [r for (r,) in db.execute("SELECT reason FROM rounds WHERE applied = 1")]
    assert any("lp shedding" in r for r in reasons), reasons
    assert any("stop shedding" in r for r in reasons), reasons
    # exactly once: the sink against the reference over the whole (regenerated) input
    ref = tmp_path / "ref"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    gen = [EXE, "input", "generate", str(sc_path), "--workdir", str(ref)]
    subprocess.run([*gen, "--segments", str(SEGMENTS), "--scale", "0.1"], check=True, env=env)
    verify = [EXE, "pipeline", "verify", str(sc_path), "--workdir", str(work), "--json"]
    r = subprocess.run([*verify, "--input", str(ref / "input")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["output_matches_reference"] and out["rows_dropped"] > 0, out
    # the check can fail: a lost output file is named
    victim = max((work / "output").glob("batch=*/*.parquet"), key=lambda f: f.stat().st_size)
    victim.unlink()
    r = subprocess.run([*verify, "--input", str(ref / "input")], capture_output=True, text=True)
    assert r.returncode == 1 and "reference" in json.loads(r.stdout)["mismatch"], r.stdout
