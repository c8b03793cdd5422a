"""Metrics from the running pipeline beyond the batches' own statistics: progress and REST.

* ``ProgressListener``: a ``StreamingQueryListener`` whose callbacks only copy fields into a
  queue.
* ``RestPoller``: executors and completed stages from Spark's REST API, polled incrementally
  by stage id (the UI keeps a bounded number of stages), with ms and ns converted to seconds.
"""

from __future__ import annotations

import json
import queue
import time
import urllib.request
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

__all__ = ["ProgressListener", "RestPoller"]


class ProgressListener(StreamingQueryListener):
    """Copies each progress event's useful fields into a queue (never calls Spark)."""

    def __init__(self) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()

    def onQueryStarted(self, event: Any) -> None:
        """Ignored."""

    def onQueryProgress(self, event: Any) -> None:
        """Queue batch id, duration and input rows."""
        p = event.progress
        self.events.put(
            {
                "batch_id": p.batchId,
                "batch_duration_s": p.batchDuration / 1000.0,
                "rows": p.numInputRows,
                "duration_ms": dict(p.durationMs),
                "received_monotonic": time.monotonic(),
            }
        )

    def onQueryIdle(self, event: Any) -> None:
        """Ignored."""

    def onQueryTerminated(self, event: Any) -> None:
        """Ignored."""

    def drain(self) -> list[dict[str, Any]]:
        """All queued progress records."""
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out


class RestPoller:
    """Spark REST API: executors, and task times of stages completed since the last poll."""

    def __init__(self, ui_url: str, app_id: str, timeout_s: float = 2.0) -> None:
        if not ui_url.startswith(("http://127.0.0.1", "http://localhost")):
            raise ValueError(f"ui_url: {ui_url!r} is not a loopback address")
        self.base = f"{ui_url}/api/v1/applications/{app_id}"
        self.timeout_s = timeout_s
        self.seen_stage = -1

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=self.timeout_s) as r:
            return json.load(r)

    def executors(self, include_dead: bool = False) -> list[dict[str, Any]]:
        """Executors with id, activity, cores and totals in seconds."""
        raw = self._get("/allexecutors" if include_dead else "/executors")
        return [
            {
                "id": e["id"],
                "active": bool(e.get("isActive", True)),
                "cores": e.get("totalCores", 0),
                "total_duration_s": e.get("totalDuration", 0) / 1000.0,
                "failed_tasks": e.get("failedTasks", 0),
                "host_port": e.get("hostPort", ""),
                "rdd_blocks": int(e.get("rddBlocks", 0)),
            }
            for e in raw
        ]

    def new_tasks(self) -> list[dict[str, Any]]:
        """Tasks of stages completed since the previous call (run time in s, cpu in s)."""
        stages = self._get("/stages?status=complete&details=false")
        fresh = sorted(
            (s for s in stages if s["stageId"] > self.seen_stage), key=lambda s: s["stageId"]
        )
        out = []
        for st in fresh:
            for t in self._get(f"/stages/{st['stageId']}/{st['attemptId']}/taskList?length=10000"):
                m = t.get("taskMetrics", {})
                out.append(
                    {
                        "stage": st["stageId"],
                        "partition": t.get("partitionId", t.get("index")),
                        "executor": t.get("executorId"),
                        "run_s": m.get("executorRunTime", 0) / 1000.0,
                        "cpu_s": m.get("executorCpuTime", 0) / 1e9,
                    }
                )
            self.seen_stage = max(self.seen_stage, st["stageId"])
        return out
