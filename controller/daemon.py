"""The long-running controller: APScheduler interval job, decision log, metrics, status, signals.

``Daemon.tick()`` is one control round and is callable directly (tests call it without a
scheduler). ``Daemon.run()`` schedules it every ``control.interval_s`` with one instance at a
time, missed runs coalesced and a misfire grace of about one interval; missed and skipped
runs are counted. SIGTERM, SIGINT and SIGHUP (``core.stopping``) stop it after the current round (exit 0). With
``control.on_batch`` (spark-external) the daemon also watches the pipeline's batch files and
brings the round forward when a new one lands (a plan made from batch b reaches b + 1, not
b + 2). A pipeline not the configured one (``PipelineMismatch``) gets no decision until fixed;
one that has ended (``PipelineEnded``) none after its last batch.

Several daemons may share one decision log: the one holding its lease is primary and runs the
rounds, the others are warm standbys (``controller.leadership``). A daemon becoming primary
resumes from the last applied plan in the decision log and publishes it as the next version
with its own epoch, so versions continue across restarts and takeovers and none is reused; the
substrate keeps applying the last plan while no controller runs. A write refused for its old
epoch makes the daemon step down to standby. A decision log locked by another process (a
controller frozen inside a commit) does not stop the rounds: their records wait in memory and
go in once the lock is free (``decision_log_waiting`` / ``decision_log_caught_up``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from controller.config import Settings
from controller.decisionlog import DecisionLog, change_summary, iso_utc
from controller.gates import DecisionKind, in_blackout
from controller.leadership import Leadership
from controller.logs import configure_logging
from controller.loop import ControlLoop
from controller.migration_causes import cause_of, moved_by
from controller.telemetry import Telemetry
from controller.validation import take_over_epoch
from controller.wiring import make_daemon_wiring, params_left_out
from core import loadstats
from core.cluster import NodeStatus
from core.lease import StaleEpochError
from core.plans import Plan
from core.stopping import stop_on_signals
from spark_adapter.external import PipelineEnded, PipelineMismatch

__all__ = ["Daemon"]

log = logging.getLogger("trimtab.daemon")
KEEP_RECORDS = 100  # decision records kept in memory; the decision log holds every round


class Daemon:
    """One controller process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        windows = settings.control.blackout_windows_utc
        substrate, policy = make_daemon_wiring(settings, lambda: in_blackout(windows))
        self.substrate = substrate
        # a round waits at most this long for the log's write lock before its records queue
        wait_s = min(0.25, settings.control.lease_timeout_s / 4)
        self.log = DecisionLog(settings.decision_log, settings.decision_retention_rounds, wait_s)
        self._log_waiting = 0  # the most records that have waited in this streak
        self.round_base = self.log.last_round()  # rounds go on counting across restarts
        # the newest round that was not a hold (at a restart: the one before it)
        self.last_change = self.log.last_change({k.value for k in DecisionKind} - {"hold"})
        self.telemetry = Telemetry(pipeline=settings.substrate.kind != "sim")
        self._newest_batch = -1  # of the steered pipeline (external mode)
        self.loop = ControlLoop(
            substrate,
            policy,
            settings.control.window_samples,
            settings.control.dry_run,
            keep_records=KEEP_RECORDS,
        )
        self.state_dir = Path(settings.state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.stop_event = threading.Event()
        self._batch_seen = 0  # the newest batch file (mtime, ns) that brought a round forward
        self.missed = 0
        self.skipped = 0
        self.refused = 0  # writes refused because a newer epoch holds the lease
        self.mismatch: str | None = None  # the steered pipeline is not the configured one
        self.ended = False  # ... or it has ended (``mismatch`` says so)
        self.started = time.time()
        self.resumed_from: int | None = None
        self.became_primary_at: float | None = None
        first = take_over_epoch(settings)  # --take-over: above the pipeline's plans
        self.lead = Leadership(settings.decision_log, settings.control.lease_timeout_s, first)
        self._role_lock = threading.RLock()  # a round and a change of role never overlap
        paths = {
            k: str(Path(getattr(settings, k)).resolve()) for k in ("decision_log", "state_dir")
        }
        log.info("starting", extra={"fields": paths})  # where `decisions` and `status` look
        if left := params_left_out(settings):  # the scenario's, set for its own method
            log.warning("placement_params_left_out", extra={"fields": left})
        if not self._try_lead():
            log.info("standby", extra={"fields": self.lead.status()})

    # ------------------------------------------------------------- leadership
    def _try_lead(self) -> bool:
        """Take the lease if it is free or expired and resume as primary; False if held."""
        with self._role_lock:
            epoch = self.lead.try_acquire()
            if epoch is None:
                return False
            self.log.epoch = epoch
            self.round_base = self.log.last_round() - self.loop.round
            self.log.round_shift = 0
            self.became_primary_at = time.time()
            self._resume_or_start(epoch)
            self.telemetry.leader.set(1)
            self.telemetry.epoch.set(epoch)
            fields = {"epoch": epoch, "plan_version": self.loop.plan.version}
            log.info(
                "primary",
                extra={"fields": {**fields, "took_over_from": self.lead.took_over_from()}},
            )
            (self.state_dir / f"standby-{os.getpid()}.json").unlink(missing_ok=True)
            return True

    def _step_down(self, why: str) -> None:
        """No longer primary: rounds stop until the lease is taken again; records still
        waiting for the decision log are dropped (the successor's epoch would refuse them)."""
        with self._role_lock:
            self.lead.step_down()
            self.telemetry.leader.set(0)
            fields = {"reason": why, "records_dropped": self.log.discard_pending()}
            log.warning("stepped_down", extra={"fields": {**fields, **self.lead.status()}})
            self._log_waiting = 0
            self.telemetry.log_pending.set(0)
            self._write_status()

    def _note_log_backlog(self) -> None:
        """Say when records start waiting for the decision log's write lock, and when the
        last of them went in."""
        n = self.log.pending
        self.telemetry.log_pending.set(n)
        if n and not self._log_waiting:
            why = "another process holds the decision log's write lock"
            log.warning("decision_log_waiting", extra={"fields": {"pending": n, "reason": why}})
        elif not n and self._log_waiting:
            fields = {"most_waiting": self._log_waiting}
            log.info("decision_log_caught_up", extra={"fields": fields})
        self._log_waiting = max(self._log_waiting, n) if n else 0

    def heartbeat(self) -> None:
        """Renew the lease (primary) or try to take it (standby); called every quarter of the
        lease timeout."""
        if self.lead.primary:
            if not self.lead.renew():
                self._step_down("lease lost: not renewed before it expired")
        elif self._try_lead():
            self._write_status()

    def _resume_or_start(self, epoch: int) -> None:
        """Resume from the decision log's last applied plan, published as the next version
        with this epoch; or start from the initial plan."""
        last = self.log.last_plan()
        units = self.loop.policy.ctx.units.ids
        if (
            last is not None
            and last.placement.units == units
            and last.placement.nodes == self.loop.policy.ctx.cluster.ids
        ):
            who = self.lead.took_over_from()
            how = f" after taking over from {who['holder']} (epoch {who['epoch']})" if who else ""
            plan = last.next(
                epoch=epoch, reason=f"controller epoch {epoch} resumed plan v{last.version}{how}"
            )
            log.info("plan_resumed", extra={"fields": {"plan_version": last.version}})
            self.resumed_from = last.version
        else:
            plan = self.loop.plan.model_copy(update={"epoch": epoch})
            self.resumed_from = None
        self.loop.plan = self.substrate.apply(plan) or plan  # the simulator: even in dry run
        if self.settings.control.dry_run and self.settings.substrate.kind != "sim":
            self._note_dry_run(None if self.loop.plan is plan else self.loop.plan.version)
        self.log.record_plan(time.time(), self.loop.plan, applied=True)
        self._note_log_backlog()
        self.telemetry.plan_version.set(self.loop.plan.version)

    def _note_dry_run(self, pipeline_plan: int | None) -> None:
        """A dry run publishes nothing to the pipeline it watches: say what it runs."""
        if pipeline_plan is not None:
            why = f"nothing is published; rounds judge the pipeline's plan v{pipeline_plan}"
        else:
            why = (
                "nothing is published, and the pipeline has no plan of this scenario's units "
                "and nodes (a driver with no plan runs none: start it with --default-plan)"
            )
        log.info("dry_run", extra={"fields": {"pipeline_plan": pipeline_plan, "reason": why}})

    # -------------------------------------------------------------- one round
    def tick(self) -> None:
        """One control round as primary (a standby's rounds do nothing): observe, decide, apply
        (unless dry run), log, export. A write refused for an old epoch steps down."""
        with self._role_lock:
            if not self.lead.primary:
                return
            try:
                self._round()
                self.mismatch = None
            except PipelineMismatch as e:  # nothing decided or published until it is fixed
                ended = isinstance(e, PipelineEnded)  # nothing runs there any more: said once
                if str(e) != self.mismatch:
                    event = "pipeline_ended" if ended else "pipeline_mismatch"
                    log.log(
                        logging.INFO if ended else logging.ERROR,
                        event,
                        extra={"fields": {"error": str(e)}},
                    )
                self.mismatch, self.ended = str(e), ended
                self.telemetry.pipeline_ended.set(float(ended))
                self._write_status()
            except StaleEpochError as e:
                self.refused += 1
                self.telemetry.refused.inc()
                log.warning("publish_refused", extra={"fields": {"error": str(e)}})
                self._step_down(f"publication refused: {e}")

    def _round(self) -> None:
        t0 = time.perf_counter()
        decision = self.loop.tick()
        rec = self.loop.records[-1]
        obs_summary = self._observation_summary()
        now = time.time()
        self.log.record(
            now,
            self.round_base + rec.round,
            rec.kind,
            rec.reason,
            rec.plan_version,
            rec.applied,
            rec.duration_s,
            obs_summary,
            rec.details,
        )
        if decision.plan is not None:
            self.log.record_plan(now, decision.plan, applied=rec.applied)
        if rec.kind != DecisionKind.HOLD:
            n = self.round_base + rec.round + self.log.round_shift
            self.last_change = change_summary(n, now, rec.kind, rec.reason)
        self._note_log_backlog()
        self._export(rec, decision.plan)
        self.telemetry.tick_duration.observe(time.perf_counter() - t0)
        self._write_status(rec)
        fields = ("round", "kind", "reason", "plan_version", "applied")
        log.info("round", extra={"fields": {k: getattr(rec, k) for k in fields}})
        limit = self.settings.control.max_rounds
        if limit is not None and rec.round >= limit:
            self.stop_event.set()

    def _observation_summary(self) -> dict[str, Any]:
        nx = self.loop.nodes.series()
        if nx.shape[1] == 0:
            return {}
        ids = self.loop.policy.ctx.cluster.ids
        return {
            "node_load": dict(zip(ids, np.round(loadstats.means(nx), 6).tolist(), strict=True)),
            **loadstats.node_summary(nx),
            "samples": int(nx.shape[1]),
        }

    def _export(self, rec: Any, plan: Plan | None) -> None:
        t = self.telemetry
        t.decisions.labels(kind=rec.kind).inc()
        t.export_nodes(self.loop.policy.ctx.cluster.ids, self.loop.nodes.series())
        moved = moved_by(rec.details)
        if rec.applied and moved:
            t.migrations.labels(cause=cause_of(rec.details)).inc(moved)
        if rec.kind.startswith("recover"):
            t.failures.inc()
        obs = self.loop.last_obs
        if not t.pipeline or obs is None:
            return self._export_plan(t)
        self._newest_batch = t.export_batches(obs.batches, self._newest_batch)
        self._export_plan(t)

    def _export_plan(self, t: Telemetry) -> None:
        current = self.loop.plan
        for s in self.loop.policy.ctx.network.streams:
            t.shed_ratio.labels(stream=s).set(1.0 - current.shed.keep_of(s))
        t.plan_version.set(current.version)

    def status(self) -> dict[str, Any]:
        """What the daemon is doing."""
        last = self.loop.records[-1] if self.loop.records else None
        n = last and self.round_base + last.round + self.log.round_shift
        return {
            "pid": os.getpid(),
            "started": self.started,
            "started_utc": iso_utc(self.started),
            "substrate": self.settings.substrate.kind,
            "last_round": last and change_summary(n, time.time(), last.kind, last.reason),
            "last_change": self.last_change,
            "plan_version": self.loop.plan.version,
            "dry_run": self.settings.control.dry_run,
            "policies": {  # in effect: the config's settings over the scenario's
                "placement": self.loop.policy.ctx.settings.placement.method,
                "shedding": self.loop.policy.ctx.settings.shedding.method,
                "availability": self.loop.policy.ctx.settings.ha.policy,
            },
            "health": {
                "missed_runs": self.missed,
                "skipped_runs": self.skipped,
                "pipeline_mismatch": None if self.ended else self.mismatch,
                "pipeline_ended": self.mismatch if self.ended else None,
                "nodes_down": [
                    n
                    for n, st in zip(
                        self.loop.policy.ctx.cluster.ids, self._statuses(), strict=True
                    )
                    if st not in ("up", "suspected")
                ],
            },
            "metrics_port": self.telemetry.port,
            "decision_log": str(self.settings.decision_log),
            "decision_log_pending": self.log.pending,
            "decision_log_dropped": self.log.dropped,  # more waited than retention keeps
            "resumed_from_plan": self.resumed_from,
            **self.lead.status(),
            "primary_since_utc": self.became_primary_at and iso_utc(self.became_primary_at),
            "took_over_from": self.lead.took_over_from(),
            "refused_publications": self.refused,
        }

    def _statuses(self) -> list[str]:
        obs = self.loop.last_obs
        if obs is None:
            return ["up"] * self.loop.policy.ctx.cluster.n
        return [NodeStatus(s).value for s in obs.node_status]

    def _status_file(self) -> Path:
        """``status.json`` for the primary; a standby writes ``standby-PID.json``."""
        name = "status.json" if self.lead.primary else f"standby-{os.getpid()}.json"
        return self.state_dir / name

    def _write_status(self, rec: Any = None) -> None:
        from spark_adapter.actuator import atomic_write

        atomic_write(self._status_file(), json.dumps(self.status(), default=float).encode())

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        """Run until SIGTERM/SIGINT (or ``max_rounds``); returns the exit code (0)."""
        if self.settings.metrics.enabled:
            port = self.telemetry.serve(self.settings.metrics.host, self.settings.metrics.port)
            log.info(
                "metrics_serving",
                extra={"fields": {"host": self.settings.metrics.host, "port": port}},
            )
        sched = self._scheduler()
        old = stop_on_signals(self.stop_event.set)
        sched.start()
        self._write_status()
        beat = self.lead.heartbeat_s
        next_beat = time.monotonic() + beat
        try:
            while not self.stop_event.wait(min(0.2, beat)):
                self._round_on_batch(sched)
                if time.monotonic() >= next_beat:
                    self.heartbeat()
                    next_beat = time.monotonic() + beat
        finally:
            sched.shutdown(wait=True)
            for s, h in old.items():
                signal.signal(s, h)
            self._stopped()
        return 0

    def _round_on_batch(self, sched: Any) -> None:
        """``control.on_batch``: run the round now when a batch file the substrate has not
        read is newer than the last one that brought a round forward."""
        unseen = getattr(self.substrate, "unseen_mtime", None)
        if not self.settings.control.on_batch or unseen is None or not self.lead.primary:
            return
        newest = unseen()
        if newest > self._batch_seen:
            self._batch_seen = newest
            sched.modify_job("control", next_run_time=datetime.now(UTC))

    def _scheduler(self) -> Any:
        """The interval job: one instance at a time, missed runs coalesced and counted."""
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
        from apscheduler.schedulers.background import BackgroundScheduler

        c = self.settings.control
        sched = BackgroundScheduler(
            timezone="UTC",
            job_defaults={
                "max_instances": 1,
                "coalesce": True,
                "misfire_grace_time": max(1, round(c.misfire_grace_s or c.interval_s)),
            },
        )

        def on_event(ev: Any) -> None:
            if ev.code == EVENT_JOB_MISSED:
                self.missed += 1
                self.telemetry.missed.labels(job=ev.job_id).inc()
            elif ev.code == EVENT_JOB_MAX_INSTANCES:
                self.skipped += 1
                self.telemetry.skipped.labels(job=ev.job_id).inc()
            elif ev.code == EVENT_JOB_ERROR:
                log.error("round_failed", extra={"fields": {"error": repr(ev.exception)}})

        sched.add_listener(on_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR)
        sched.add_job(
            self.tick,
            "interval",
            seconds=c.interval_s,
            id="control",
            replace_existing=True,
            next_run_time=datetime.now(UTC),
        )
        return sched

    def _stopped(self) -> None:
        """Stop exporting, mark the status stopped, close the decision log."""
        from spark_adapter.actuator import atomic_write

        self.telemetry.stop()
        st = self.status()
        st["stopped"] = True
        if self.lead.primary:
            atomic_write(self._status_file(), json.dumps(st, default=float).encode())
        else:
            self._status_file().unlink(missing_ok=True)
        # what waits for the log goes in first (fenced by the lease still held), then the
        # lease is released at once: a standby takes over without waiting
        left = self.log.close(wait_s=self.lead.lease.ttl_s)
        if left:
            log.error("decision_log_unwritten", extra={"fields": {"records": left}})
        self.lead.close()
        fields = {"rounds": self.loop.round, "plan_version": self.loop.plan.version}
        log.info("stopped", extra={"fields": fields})


def run_daemon(settings: Settings) -> int:
    """Configure logging and run a daemon until it is stopped."""
    configure_logging(settings.log_format)
    return Daemon(settings).run()
