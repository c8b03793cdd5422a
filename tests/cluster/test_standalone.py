"""A standalone master and two workers started by ``trimtab cluster up``, a replay against its
``spark://`` URL with the output equal to the reference, its web UI's and a worker's port
given for its URL named at once, and ``cluster down`` by pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from spark_adapter.master_probe import master_address_problem
from tests.conftest import ROOT, SCENARIOS

pytestmark = pytest.mark.cluster
EXE = str(Path(sys.executable).parent / "trimtab")


def _trimtab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [EXE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def test_replay_on_a_standalone_cluster(tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = _trimtab(
        "cluster",
        "up",
        "--workers",
        "2",
        "--cores",
        "1",
        "--memory",
        "768m",
        "--state-dir",
        str(state),
    )
    assert up.returncode == 0, up.stderr[-2000:]
    info = json.loads((state / "cluster.json").read_text())
    pids = [info["master_pid"], *info["worker_pids"]]
    try:
        assert all(psutil.pid_exists(p) for p in pids)
        st = _trimtab("cluster", "status", "--state-dir", str(state))
        assert st.returncode == 0, st.stderr
        status = json.loads(st.stdout)
        assert status["up"] is True
        assert [w["state"] for w in status["registered_workers"]] == ["ALIVE", "ALIVE"]
        r = _trimtab(
            "replay",
            str(SCENARIOS / "seed-groupby-window.yaml"),
            "--substrate",
            "spark",
            "--master",
            info["master_url"],
            "--batches",
            "3",
            "--json",
            "--workdir",
            str(tmp_path / "work"),
        )
        assert r.returncode == 0, r.stderr[-3000:]
        summary = json.loads(r.stdout)
        assert summary["master"] == info["master_url"]
        assert summary["output_matches_reference"] is True
        assert summary["batches"] == 3
        # the master's web UI given for its URL: named at once, with the URL it shows
        web = f"spark://127.0.0.1:{info['master_web_port']}"
        ui = _trimtab(
            "replay",
            str(SCENARIOS / "seed-groupby-window.yaml"),
            "--substrate",
            "spark",
            "--master",
            web,
            "--workdir",
            str(tmp_path / "ui"),
        )
        assert ui.returncode == 3, ui.stderr[-2000:]
        assert ui.stderr.strip() == (
            f"error: environment not ready: --master: {web} is a Spark master's web UI; "
            f"the master's URL is {info['master_url']}"
        )
        assert not (tmp_path / "ui").exists()
        # a worker's RPC port: its RPC server says no master runs there, named at once. The
        # probe could not tell it from a master's before, and Spark's client retried for a
        # minute; the probe asks what that client asks first, of the master's verifier too
        assert master_address_problem(info["master_url"]) is None
        port = status["registered_workers"][0]["id"].rsplit("-", 1)[1]
        worker = f"spark://127.0.0.1:{port}"
        t0 = time.monotonic()
        r = _trimtab(
            "replay",
            str(SCENARIOS / "seed-groupby-window.yaml"),
            "--substrate",
            "spark",
            "--master",
            worker,
            "--workdir",
            str(tmp_path / "wk"),
        )
        assert r.returncode == 3, r.stderr[-2000:]
        assert r.stderr.strip() == (
            f"error: environment not ready: --master: {worker} is a Spark RPC server with no "
            "master there (a worker's or a driver's port), not a Spark master's RPC port (7077 "
            "by default; `trimtab cluster status` prints the URL, and a master's web UI shows "
            "it at its top)"
        )
        assert time.monotonic() - t0 < 30  # Spark's client took about 60 s to give up
        assert not (tmp_path / "wk").exists()
        # the probes left the master and the workers nothing to complain of
        for f in (state / "cluster-logs").glob("*.log"):
            text = f.read_text()
            assert "Exception in connection" not in text, text[-3000:]
            # "Error opening stream", "Error while invoking RpcHandler" (a question it cannot read)
            assert "TransportRequestHandler" not in text, text[-3000:]
    finally:
        down = _trimtab("cluster", "down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    gone = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not gone, f"still running: {gone}"
