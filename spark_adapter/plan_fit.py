"""A pipeline pins only plans it can run: the guard between the plan store and a new pin.

A controller steering another scenario, or planning for another partition count, publishes
plans this pipeline cannot run (key groups it does not have, drops at streams it does not
read) or would run wrongly (a placement over 4 partitions folded onto 2). Pinned, such a plan
would stop that batch on every run for good, since a replay keeps its pin. ``PlanGuard``
checks the current plan (``batch_compiler.plan_problem``) before a new batch pins it:

- a plan that fits is pinned as before;
- one that does not is refused, logged once with its problem, and the batch pins the plan
  the batch before it pinned, so the data path keeps running; the batch's statistics carry
  ``plan_refused`` (version and problem), which the controller reads;
- with no earlier plan that fits (the first batch), ``PlanRefused`` stops the driver before
  it pins, folds or writes anything.
"""

from __future__ import annotations

import logging
from typing import Any

from core.plans import Plan
from spark_adapter.actuator import BatchPin, PlanLog, PlanStore
from spark_adapter.batch_compiler import plan_problem
from spark_adapter.query import QuerySpec

__all__ = ["PlanGuard", "PlanRefused"]

log = logging.getLogger("trimtab.pipeline")


class PlanRefused(RuntimeError):
    """The current plan does not fit the pipeline and no earlier plan does."""


class PlanGuard:
    """Chooses the plan a new pin takes: the current one if it fits, else the last pinned."""

    def __init__(
        self, q: QuerySpec, partitions: int, plans: PlanStore, pins: PlanLog | None
    ) -> None:
        self.q, self.n, self.plans, self.pins = q, partitions, plans, pins
        self.refused: tuple[int, str] | None = None  # what the last choice passed over

    def problem(self, plan: Plan) -> str | None:
        """Why this pipeline cannot run ``plan`` (None: it can): 0.08 ms a check, once per new
        pin, so nothing is kept (a controller publishes a version per batch for months)."""
        return plan_problem(plan, self.q, self.n)

    def info(self, pin: BatchPin) -> dict[str, Any]:
        """``plan_refused`` (version and problem) for the statistics of a batch whose new pin
        passed the current plan over for the one before; empty otherwise."""
        if pin.replay or self.refused is None:
            return {}
        return {"plan_refused": {"version": self.refused[0], "problem": self.refused[1]}}

    def choose(self) -> Plan:
        """The plan a new batch pins (``PlanLog.resolve``'s ``choose``)."""
        plan = self.plans.load_current()
        problem = self.problem(plan)
        if problem is None:
            self.refused = None
            return plan
        last = self.pins.last_pinned_version() if self.pins is not None else None
        if (
            last is not None
            and self.plans.has(last)
            and self.problem(prev := self.plans.load(last)) is None
        ):
            if self.refused is None or self.refused[0] != plan.version:
                log.warning("plan v%d refused, batches keep v%d: %s", plan.version, last, problem)
            self.refused = (plan.version, problem)
            return prev
        raise PlanRefused(
            f"{self.plans.root / f'v{plan.version:06d}.json'}: {problem}: the plan was not "
            f"made for this pipeline ({self.q.op_id} in {self.q.key_groups} key groups, "
            f"streams {', '.join(self.q.streams)}, {self.n} partitions); the controller "
            "publishing it must steer this scenario with these partitions"
        )
