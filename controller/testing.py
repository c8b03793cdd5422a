"""trimtab's own testing helpers, for its suite, its benches and users' tests.

* ``key_group_plan`` / ``alternating_plan``: a plan placing a keyed operator's key groups on
  partitions (alternating: key group i on partition i mod n), with optional hot-key quotas
  and keep fractions;
* ``assert_matches_reference``: a Spark pipeline's output against its reference, with the one
  tolerance rule of ``spark_adapter.verification.output_mismatch``;
* ``FakeClock``: a clock a test advances by hand;
* ``FakeSubstrate``: a substrate that replays given observations and records the plans it
  is given, for testing a policy in the loop without a simulator or Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import pandas as pd

from core.observation import Observation
from core.plans import Placement, Plan, RoutingConfig, ShedPlan, key_group_units
from spark_adapter.verification import output_mismatch

__all__ = [
    "FakeClock",
    "FakeSubstrate",
    "alternating_plan",
    "assert_matches_reference",
    "key_group_plan",
]

Quotas = tuple[tuple[int, float], ...]


class KeyedStage(Protocol):
    """What a plan builder needs of a compiled query (``spark_adapter.operators.QuerySpec``)."""

    op_id: str
    key_groups: int


def key_group_plan(
    q: KeyedStage,
    assignment: Sequence[int],
    version: int = 0,
    partitions: int = 2,
    hot: Mapping[int, Quotas] | None = None,
    keep: Mapping[str, float] | None = None,
    partitioner: str = "hash",
) -> Plan:
    """A plan placing key group i of ``q`` on partition ``assignment[i]``.

    >>> from types import SimpleNamespace
    >>> p = key_group_plan(SimpleNamespace(op_id="agg", key_groups=3), [0, 1, 1], keep={"s": 0.5})
    >>> p.placement.units, p.placement.assignment, p.shed.keep_of("s")
    (('agg#0', 'agg#1', 'agg#2'), (0, 1, 1), 0.5)
    """
    shed = ShedPlan() if not keep else ShedPlan(locations=tuple(keep), keep=tuple(keep.values()))
    return Plan(
        version=version,
        placement=Placement(
            units=key_group_units(q.op_id, q.key_groups),
            nodes=tuple(f"p{i}" for i in range(partitions)),
            assignment=tuple(int(a) for a in assignment),
        ),
        routing=RoutingConfig(
            partitioner=partitioner, num_partitions=partitions, hot=dict(hot or {})
        ),
        shed=shed,
    )


def alternating_plan(
    q: KeyedStage, version: int = 0, partitions: int = 2, shift: int = 0, **more: object
) -> Plan:
    """Key group i on partition (i + shift) mod ``partitions``: shift 1 moves every group.

    >>> from types import SimpleNamespace
    >>> alternating_plan(SimpleNamespace(op_id="a", key_groups=4), shift=1).placement.assignment
    (1, 0, 1, 0)
    """
    assignment = [(i + shift) % partitions for i in range(q.key_groups)]
    return key_group_plan(q, assignment, version, partitions, **more)  # type: ignore[arg-type]


def assert_matches_reference(got: pd.DataFrame, exp: pd.DataFrame, nonempty: bool = True) -> None:
    """Fail, saying where, unless ``got`` equals the reference ``exp``; ``nonempty`` also
    fails an empty reference (a test that compares nothing proves nothing)."""
    if nonempty and len(exp) == 0:
        raise AssertionError("the reference is empty: nothing was compared")
    why = output_mismatch(got, exp)
    if why is not None:
        raise AssertionError(f"output differs from the reference: {why}")


class FakeClock:
    """A clock that moves only when told.

    >>> c = FakeClock(10.0); c.advance(2.5); c()
    12.5
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        if seconds < 0:
            raise ValueError(f"seconds: a clock does not go back (got {seconds})")
        self.now += seconds


class FakeSubstrate:
    """Replays ``observations`` one per ``observe()`` (the last one repeats) and records every
    plan applied, so a test can drive ``ControlLoop`` and check what the policy did."""

    def __init__(self, observations: Iterable[Observation]) -> None:
        self.observations = list(observations)
        if not self.observations:
            raise ValueError("observations: at least one is needed")
        self.applied: list[Plan] = []
        self._next = 0

    def observe(self) -> Observation:
        """The next observation."""
        obs = self.observations[min(self._next, len(self.observations) - 1)]
        self._next += 1
        return obs

    def apply(self, plan: Plan) -> None:
        """Record ``plan``."""
        self.applied.append(plan)
