"""The shedding hysteresis: drops are lifted with a 'stop shedding' decision also when the load
sits between 90% and 100% of the headroom and the re-solved plan keeps every tuple."""

from __future__ import annotations

import numpy as np

from controller.shedding import decide_shedding
from core.plans import ShedPlan
from shedding import lp
from shedding.loadmodel import ShedModel


def test_a_replan_that_keeps_everything_stops_shedding() -> None:
    m = ShedModel(
        ("s1", "s2"),
        np.array([[1.0, 3.0], [2.0, 1.0]]),
        np.ones(2),
        np.ones(2),
        np.array([-1, -1]),
        np.zeros(2),
    )
    full = lp.node_loads(m, np.ones(2))
    headroom = 0.9
    cap = full / (0.95 * headroom)  # the full load is 95% of the limit: no overload
    current = ShedPlan(method="lp", locations=("s1", "s2"), keep=(0.5, 0.5))
    d = decide_shedding("lp", headroom, m, cap, current, ("n0", "n1"))
    assert d.shed is not None and not any(k < 1.0 for k in d.shed.keep), d.shed
    assert "stop shedding" in d.reason, d.reason
    # while no drop is in place, the same load is no decision at all
    idle = decide_shedding("lp", headroom, m, cap, ShedPlan(method="lp"), ("n0", "n1"))
    assert idle.shed is None and idle.reason == "no node overloaded"
