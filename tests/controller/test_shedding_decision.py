"""The shedding hysteresis: drops are lifted with a 'stop shedding' decision also when the load
sits between 90% and 100% of the headroom and the re-solved plan keeps every tuple."""

from __future__ import annotations

import numpy as np
import pytest

from controller.shedding import decide_shedding
from core.plans import ShedPlan
from shedding import lp
from shedding.loadmodel import ShedModel


def _canonical() -> ShedModel:
    """Two inputs on two nodes (load [[1, 3], [2, 1]], rates and gains 1): overloaded at
    capacity 1, the LP keeps (0.2, 0.4), weighted output 0.6."""
    return ShedModel(
        ("s1", "s2"),
        np.array([[1.0, 3.0], [2.0, 1.0]]),
        np.ones(2),
        np.ones(2),
        np.array([-1, -1]),
        np.zeros(2),
    )


def test_a_replan_that_keeps_everything_stops_shedding() -> None:
    m = _canonical()
    full = lp.node_loads(m, np.ones(2))
    headroom = 0.9
    cap = full / (0.95 * headroom)  # the full load is 95% of the limit: no overload
    current = ShedPlan(method="lp", locations=("s1", "s2"), keep=(0.5, 0.5))
    d = decide_shedding("lp", headroom, m, cap, current, ("n0", "n1"))
    assert d.shed is not None and not any(k < 1.0 for k in d.shed.keep), d.shed
    assert "stop shedding" in d.reason, d.reason
    # while no drop is in place, the same load is no decision at all
    idle = decide_shedding("lp", headroom, m, cap, ShedPlan(method="lp"), ("n0", "n1"))
    assert idle.reason.startswith("no node overloaded (the busiest, n")  # both at 95%: a tie
    assert idle.reason.endswith(", at 95% of its limit)"), idle.reason
    assert idle.shed is None
    # the busiest is the one nearest its limit (headroom x capacity), with its share of it
    cap = full / (np.array([0.5, 0.8]) * headroom)
    idle = decide_shedding("lp", headroom, m, cap, ShedPlan(method="lp"), ("n0", "n1"))
    assert idle.reason == "no node overloaded (the busiest, n1, at 80% of its limit)"


def _decide(keep: tuple[float, float]) -> object:
    current = ShedPlan(method="lp", locations=("s1", "s2"), keep=keep)
    return decide_shedding("lp", 1.0, _canonical(), np.ones(2), current, ("n0", "n1"))


def test_a_feasible_plan_within_2_percent_of_the_optimum_is_kept() -> None:
    """Plans switch only on a > 2% change of weighted output: (0.2, 0.395) gives 0.595, within
    2% of 0.6, and fits: kept. (0.15, 0.4) gives 0.55, 9% below: replaced by the optimum (a
    band of 20% kept it)."""
    near = _decide((0.2, 0.395))
    assert near.shed is None and "within 2%" in near.reason, near.reason
    far = _decide((0.15, 0.4))
    assert far.shed is not None and far.shed.keep == pytest.approx((0.2, 0.4), abs=1e-9)
    assert far.reason.startswith("lp shedding (overload"), far.reason


def test_a_plan_that_overloads_a_node_is_replaced_even_within_2_percent() -> None:
    """(0.2, 0.41) gives 0.61, within 2% of the optimum's 0.6, but loads node n0 to 1.02 of
    its capacity: replaced (the infeasibility test left out, it was kept)."""
    d = _decide((0.2, 0.41))
    assert d.shed is not None and d.shed.keep == pytest.approx((0.2, 0.4), abs=1e-9), d.reason
