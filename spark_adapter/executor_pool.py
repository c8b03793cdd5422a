"""Executors follow the plan's running nodes: scaling on Spark without halting the query.

At each batch start the pipeline asks for one executor (one core) per node the pinned plan
runs (``plan.scale``), through Spark's own API: ``SparkContext.requestTotalExecutors`` sets
the application's executor target (``requestExecutors`` adds to a target that, without dynamic
allocation, starts at 0, so it cannot grow a static application), ``killExecutor`` releases one
(standalone and local-cluster masters; ``local[N]`` runs tasks in the driver and has nothing to
scale). A scale-out joins the node a round before placement routes key groups to it, so the
new executor registers while no task waits for it. Its first tasks pay the JVM's cold code paths
and the Python worker's start (pandas, pyarrow, the fold's modules): 2-2.5 s on 2 cores, which
landed on the batches around the scale-out. So once it registers, a background job as small as
a batch's shape (a ``repartitionById`` shuffle into ``mapInPandas``, collected with Arrow)
warms it while the batch in flight runs on the old executor: Spark's FIFO scheduler gives the
batch's own pending tasks the free slots first, so the warm-up takes the new, idle executor.
An executor is released only when it holds no cached block
(``rddBlocks`` in Spark's REST API): the state the next batch reads is cached on executors, so
a release waits for the batches that retire that state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from spark_adapter.metrics import RestPoller

__all__ = ["LOCAL_EXECUTORS", "ExecutorPool", "live_executor_count", "releasable", "warm_up"]


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
    """Requests and releases executors so that one runs per running node of the plan."""

    def __init__(self, spark: Any, warm: bool = True) -> None:
        sc = spark.sparkContext
        self.jsc = sc._jsc.sc()
        self.enabled = sc.master.startswith(("local-cluster", "spark://"))
        self.poller = (
            RestPoller(sc.uiWebUrl or "", sc.applicationId, timeout_s=10.0)
            if self.enabled
            else None
        )
        self.target = 0  # the executors asked for (0: what the application started with)
        self.awaiting = 0  # executors a scale-out asked for, until that many are live
        self.released: set[str] = set()  # killed, perhaps not yet deregistered
        self.log: list[dict[str, Any]] = []
        self.spark = spark
        self.warm = warm  # warm a joining executor before a batch's task lands on it
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
        if len(live) >= self.awaiting:
            self.awaiting = 0
        if partitions > max(self.target, len(live)):
            self.jsc.requestTotalExecutors(partitions, 0, self._no_locality)
            self.awaiting = partitions
            done["requested"] = partitions - max(self.target, len(live))
            if self.warm:
                threading.Thread(
                    target=self._warm_when_joined, args=(len(live), partitions), daemon=True
                ).start()
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

    def starting(self, live: int) -> int:
        """Executors a scale-out requested that have not registered yet (starting, not lost).

        >>> pool = ExecutorPool.__new__(ExecutorPool)
        >>> pool.awaiting = 2
        >>> pool.starting(1), pool.starting(2)
        (1, 0)
        """
        return max(0, self.awaiting - live) if self.awaiting else 0

    def _warm_when_joined(self, before: int, want: int, timeout_s: float = 60.0) -> None:
        """Once a requested executor registers, run one small job like a batch's (a shuffle
        into pandas, the fold's modules imported) so that its JVM paths and Python worker are
        warm before a batch's task lands on it."""
        sc = self.spark.sparkContext
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            n = int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1
            if n > before:
                break
            time.sleep(0.1)
        else:
            self.log.append({"warm_up_skipped": f"no executor joined within {timeout_s:.0f} s"})
            return
        t1 = time.monotonic()
        try:
            warm_up(self.spark, want)
        except Exception as exc:  # a warm-up must never fail a batch (nor a session's stop)
            self.log.append({"warm_up_failed": str(exc)[:200]})
            return
        self.log.append(
            {
                "warmed": n,
                "registered_after_s": round(t1 - t0, 3),
                "warm_s": round(time.monotonic() - t1, 3),
            }
        )


def warm_up(spark: Any, slots: int, first_stage: bool = False) -> None:
    """One small job shaped like a batch (a ``repartitionById`` shuffle into ``mapInPandas``,
    the fold's modules imported, collected with Arrow) over ``slots`` partitions: an idle new
    executor takes its tasks and starts its Python worker before a batch's task needs one.

    ``first_stage`` imports the fold's modules before the shuffle as well, for a replacement
    executor (``faults.ExecutorMonitor``): it registers while batches run on every node, so it
    takes a task of the first stage while idle, but by the shuffle's stage a batch's task may
    hold it and the Python tasks went to the old executor (a chaos run's event log: each
    replacement's first fold task then started its Python worker, 2.4 s against 0.3-0.7 s). A
    scale-out's executor joins a round before routing uses it, stays idle, and takes the
    shuffle's stage: the extra stage only added to the joining batch there (5.25 s against
    4.49-4.93 s, one run), so the pool does without it."""
    df = spark.range(0, 256 * slots, numPartitions=slots).selectExpr(
        "id AS key", f"CAST(id % {slots} AS INT) AS pid"
    )
    if first_stage:
        df = df.mapInPandas(_warm_partition, "key long, pid int")
    df.repartitionById(slots, "pid").mapInPandas(_warm_partition, "key long, pid int").toPandas()


def _warm_partition(it: Iterator[Any]) -> Iterator[Any]:
    import spark_adapter.operators  # noqa: F401 - pandas, pyarrow and the fold's code

    yield from it


LOCAL_EXECUTORS = 1 << 30
"""What ``live_executor_count`` reports in ``local[N]``: executors that cannot be lost."""


def live_executor_count(spark: Any) -> Callable[[], int]:
    """Executors registered with the driver now (block managers other than the driver's).

    In ``local[N]`` the driver runs the tasks itself and cannot lose an executor: unbounded.
    """
    sc = spark.sparkContext

    def count() -> int:
        if sc.master.startswith("local") and not sc.master.startswith("local-cluster"):
            return LOCAL_EXECUTORS
        return max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)

    return count
