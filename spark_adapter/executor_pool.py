"""Executors follow the plan's partitions: scaling on Spark without halting the query.

At each batch start the pipeline asks for one executor (one core) per partition the pinned
plan runs, through Spark's own API: ``SparkContext.requestTotalExecutors`` sets the
application's executor target (``requestExecutors`` adds to a target that, without dynamic
allocation, starts at 0, so it cannot grow a static application), ``killExecutor`` releases one
(standalone and local-cluster masters; ``local[N]`` runs tasks in the driver and has nothing to
scale). A new executor registers within seconds; until then the batch's partitions share the
executors there are; the first batch that runs on it pays its Python workers' start (a
background warm-up job was tried: on 2 cores it slowed the batches it ran beside more than it
saved). An executor is released only when it holds
no cached block (``rddBlocks`` in Spark's REST API): the state the next batch reads is cached
on executors, so a release waits for the batches that retire that state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_adapter.metrics import RestPoller

__all__ = ["ExecutorPool", "live_executor_count", "releasable"]


def releasable(executors: list[dict[str, Any]], surplus: int) -> list[str]:
    """Up to ``surplus`` executors that hold no cached block, newest first.

    >>> ex = [{"id": "0", "rdd_blocks": 3}, {"id": "1", "rdd_blocks": 0},
    ...       {"id": "2", "rdd_blocks": 0}, {"id": "driver", "rdd_blocks": 0}]
    >>> releasable(ex, 1), releasable(ex, 5), releasable(ex, 0)
    (['2'], ['2', '1'], [])
    """
    idle = [e["id"] for e in executors if e["id"] != "driver" and e.get("rdd_blocks", 0) == 0]
    idle.sort(key=lambda i: int(i) if i.isdigit() else -1, reverse=True)
    return idle[: max(0, surplus)]


class ExecutorPool:
    """Requests and releases executors so that one runs per running partition."""

    def __init__(self, spark: Any) -> None:
        sc = spark.sparkContext
        self.jsc = sc._jsc.sc()
        self.enabled = sc.master.startswith(("local-cluster", "spark://"))
        self.poller = (
            RestPoller(sc.uiWebUrl or "", sc.applicationId, timeout_s=10.0)
            if self.enabled
            else None
        )
        self.target = 0  # the executors asked for (0: what the application started with)
        self.released: set[str] = set()  # killed, perhaps not yet deregistered
        self.log: list[dict[str, Any]] = []
        jvm = sc._jvm
        self._no_locality = (
            getattr(jvm, "scala.collection.immutable.Map$").__getattr__("MODULE$").empty()
        )

    def _live(self) -> list[dict[str, Any]] | None:
        """Live executors with their cached blocks; None when Spark's REST API did not answer
        (the pool then waits for the next batch)."""
        assert self.poller is not None
        try:
            rows = self.poller.executors()
        except (OSError, ValueError):
            return None
        return [
            e for e in rows if e["id"] != "driver" and e["active"] and e["id"] not in self.released
        ]

    def follow(self, partitions: int, batch_id: int) -> dict[str, Any]:
        """Move the executors toward ``partitions``; what was done, for the batch's statistics.

        More wanted than asked for: raise the target. More live than wanted (an application
        started with more, or after a scale-in): release the idle ones, keep the rest until a
        later batch finds them idle."""
        if not self.enabled:
            return {}
        live = self._live()
        if live is None:
            return {"waiting": "Spark's REST API did not answer"}
        done: dict[str, Any] = {"live": len(live), "target": self.target}
        if partitions > max(self.target, len(live)):
            self.jsc.requestTotalExecutors(partitions, 0, self._no_locality)
            done["requested"] = partitions - max(self.target, len(live))
        elif len(live) > partitions:
            ids = releasable(live, len(live) - partitions)
            for i in ids:
                self.jsc.killExecutor(i)
            self.released.update(ids)
            done["released"] = ids
            if len(live) - len(ids) > partitions:
                done["waiting"] = "executors hold cached state the next batch may read"
        self.target = partitions
        if len(done) > 2:
            self.log.append({"batch": batch_id, **done})
        return done


def live_executor_count(spark: Any) -> Callable[[], int]:
    """Executors registered with the driver now (block managers other than the driver's).

    In ``local[N]`` the driver runs the tasks itself and cannot lose an executor: unbounded.
    """
    sc = spark.sparkContext

    def count() -> int:
        if sc.master.startswith("local") and not sc.master.startswith("local-cluster"):
            return 1 << 30
        return max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)

    return count
