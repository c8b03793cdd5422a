"""Prometheus metrics of the controller, served on 127.0.0.1 only.

Names follow Prometheus conventions: the ``trimtab_`` prefix, base units as suffixes, ``_total``
for counters (added by the client library), labels by node or stream only (bounded sets).
Each daemon has its own registry, so tests can run several.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from controller.migration_causes import Cause
from core import loadstats

__all__ = ["Telemetry"]


class Telemetry:
    """The controller's metrics and the HTTP endpoint serving them."""

    def __init__(self, pipeline: bool = False) -> None:
        """``pipeline``: a Spark pipeline is steered, so its metrics exist (with the simulator
        they are absent, not zeros that would trip a stall alert)."""
        self.registry = CollectorRegistry()
        self.pipeline = pipeline
        self._controller_metrics(self.registry)
        self._leadership_metrics(self.registry)
        if pipeline:
            self._pipeline_metrics(self.registry)
        self.build = Gauge(
            "trimtab_build_info", "Build information", ["version"], registry=self.registry
        )
        self.build.labels(version=_version()).set(1)
        self.server: Any = None
        self.port: int | None = None

    def _controller_metrics(self, r: CollectorRegistry) -> None:
        """Rounds, decisions, node loads, shedding, plans, scheduler health, failures."""
        self.tick_duration = Histogram(
            "trimtab_control_tick_duration_seconds",
            "Control round duration",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.decisions = Counter("trimtab_decisions", "Decisions by kind", ["kind"], registry=r)
        self.node_load = Gauge(
            "trimtab_node_load_cores",
            "Mean node load over the last window (cores)",
            ["node"],
            registry=r,
        )
        self.node_variance = Gauge(
            "trimtab_node_load_variance_cores_squared",
            "Mean over the window's samples of the variance of node loads (cores^2)",
            registry=r,
        )
        self.node_correlation = Gauge(
            "trimtab_node_load_correlation",
            "Mean pairwise Pearson correlation of node-load series over the window (-1 to 1)",
            registry=r,
        )
        self.shed_ratio = Gauge(
            "trimtab_shed_ratio",
            "Fraction of a stream dropped by the current plan",
            ["stream"],
            registry=r,
        )
        self.migrations = Counter(
            "trimtab_migrations",
            "Operators moved between nodes, by the rule that moved them",
            ["cause"],
            registry=r,
        )
        for cause in Cause:  # each exported from the start, at 0, so rate() reads every one
            self.migrations.labels(cause=cause)
        self.plan_version = Gauge("trimtab_plan_version", "Version of the current plan", registry=r)
        self.missed = Counter(
            "trimtab_scheduler_jobs_missed", "Scheduled rounds missed", ["job"], registry=r
        )
        self.skipped = Counter(
            "trimtab_scheduler_jobs_skipped",
            "Rounds skipped: the previous one still ran",
            ["job"],
            registry=r,
        )
        self.failures = Counter("trimtab_failures_detected", "Node failures detected", registry=r)
        for c in (self.missed, self.skipped):  # exported from the start, at 0
            c.labels(job="control")

    def _leadership_metrics(self, r: CollectorRegistry) -> None:
        """The lease this controller holds, its refused writes, and its decision log's wait."""
        self.leader = Gauge(
            "trimtab_controller_primary", "1 while this controller holds the lease", registry=r
        )
        self.epoch = Gauge(
            "trimtab_controller_epoch", "The lease epoch this controller holds", registry=r
        )
        self.log_pending = Gauge(
            "trimtab_decision_log_pending",
            "Records waiting for the decision log's write lock (another process holds it)",
            registry=r,
        )
        self.refused = Counter(
            "trimtab_stale_publications",
            "Writes of this controller refused because a newer epoch holds the lease",
            registry=r,
        )

    def _pipeline_metrics(self, r: CollectorRegistry) -> None:
        """The steered Spark pipeline, from its batch metrics files (external mode)."""
        self.batch_duration = Histogram(
            "trimtab_pipeline_batch_duration_seconds",
            "Micro-batch duration (foreachBatch wall time)",
            registry=r,
            buckets=(0.25, 0.5, 1, 2, 3, 5, 10, 20, 60),
        )
        self.last_batch = Gauge(
            "trimtab_pipeline_last_batch_id", "Newest micro-batch the pipeline finished", registry=r
        )
        self.last_commit = Gauge(
            "trimtab_pipeline_last_batch_end_timestamp_seconds",
            "Unix time the newest micro-batch ended (alert on time() minus this)",
            registry=r,
        )
        self.pipeline_rows = Counter(
            "trimtab_pipeline_rows", "Rows the pipeline's keyed stage processed", registry=r
        )
        self.pipeline_ended = Gauge(
            "trimtab_pipeline_ended",
            "1 once the steered pipeline has ended (its last batch closed every window): no "
            "batch comes after it, and none is overdue (the stall alert stays quiet)",
            registry=r,
        )
        self.plans_refused = Counter(
            "trimtab_pipeline_plans_refused",
            "Micro-batches that refused the current plan as not made for the pipeline (another "
            "scenario's key groups or partitions) and ran the plan before it",
            registry=r,
        )
        self.partials_merged = Counter(
            "trimtab_pipeline_partials_merged",
            "Partial results merged across partitions (merge volume: every key's under "
            "round-robin, the split hot keys' under key splitting)",
            registry=r,
        )

    def export_nodes(self, ids: Sequence[str], nx: NDArray[np.float64]) -> None:
        """The node gauges from the window's node loads ``nx`` (n, k): each node's mean, the
        mean variance, and the correlation of the nodes whose loads vary (NaN: no pair)."""
        if not nx.shape[1]:
            return
        for node, v in zip(ids, loadstats.means(nx), strict=True):
            self.node_load.labels(node=node).set(float(v))
        self.node_variance.set(float(loadstats.variances(nx).mean()))
        rho = loadstats.varying_pairs_correlation(nx)
        self.node_correlation.set(float("nan") if rho is None else rho)

    def export_batches(self, batches: Sequence[Any], newest: int) -> int:
        """A steered pipeline's batches (``BatchStats``) since the last round; returns the
        newest batch id seen, ``newest`` before them."""
        for st in batches:
            self.batch_duration.observe(st.duration_s)
            self.pipeline_rows.inc(float(st.rows))
            self.partials_merged.inc(float(st.partials_merged))
            if st.plan_refused is not None:
                self.plans_refused.inc()
            if st.batch_id >= newest:
                newest = st.batch_id
                self.last_batch.set(st.batch_id)
                if st.started_at is not None:
                    self.last_commit.set(st.started_at + st.duration_s)
        return newest

    def serve(self, host: str = "127.0.0.1", port: int = 9464) -> int:
        """Start the endpoint on a loopback address; returns the bound port."""
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"metrics.host: {host!r} is not a loopback address")
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self.server = server
        self.port = int(server.server_address[1])
        return self.port

    def stop(self) -> None:
        """Stop the endpoint."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("trimtab")
    except Exception:
        return "dev"
