from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from core.plans import HAPlan, Placement, Plan, RoutingConfig, ShedPlan


@given(st.integers(1, 6), st.data())
def test_plan_json_round_trip(n: int, data: st.DataObject) -> None:
    m = data.draw(st.integers(1, 10))
    a = tuple(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    keep = tuple(data.draw(st.lists(st.floats(0, 1), min_size=2, max_size=2)))
    plan = Plan(
        version=data.draw(st.integers(0, 1000)),
        placement=Placement(
            units=tuple(f"u{i}" for i in range(m)),
            nodes=tuple(f"n{j}" for j in range(n)),
            assignment=a,
        ),
        routing=RoutingConfig(partitioner="pkg", num_partitions=n, table=a, params={"eps": 0.1}),
        shed=ShedPlan(
            method="lp", locations=("s1", "s2"), keep=keep, objective=1.5, shadow_prices={"n0": 0.4}
        ),
        ha=HAPlan(policy="passive", checkpoint_interval=5),
        reason="test",
    )
    again = Plan.from_json(plan.to_json())
    assert again == plan


def test_plan_is_immutable_and_next_increments() -> None:
    p = Plan(placement=Placement(units=("a",), nodes=("n0", "n1"), assignment=(0,)))
    with pytest.raises(ValidationError):
        p.version = 3  # type: ignore[misc]
    q = p.next(placement=Placement(units=("a",), nodes=("n0", "n1"), assignment=(1,)))
    assert q.version == 1 and q.placement.assignment == (1,) and p.placement.assignment == (0,)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"units": ("a", "b"), "nodes": ("n0",), "assignment": (0,)}, "assignment"),
        ({"units": ("a",), "nodes": ("n0",), "assignment": (3,)}, "assignment"),
        ({"units": ("a", "a"), "nodes": ("n0",), "assignment": (0, 0)}, "units"),
    ],
)
def test_placement_validation(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Placement(**kwargs)


def test_shed_plan_rejects_bad_fraction() -> None:
    with pytest.raises(ValidationError, match="keep"):
        ShedPlan(locations=("s",), keep=(1.5,))
    with pytest.raises(ValidationError, match="keep"):
        ShedPlan(locations=("s",), keep=(float("nan"),))


def test_unknown_field_rejected() -> None:
    with pytest.raises(ValidationError, match="bogus"):
        Plan.model_validate({"placement": {"units": [], "nodes": [], "assignment": []}, "bogus": 1})
