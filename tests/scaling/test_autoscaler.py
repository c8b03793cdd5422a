"""DS2's estimate and the autoscaler's rules, on hand-computed rates."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.autoscaler import Autoscaler, AutoscalerParams
from scaling.ds2 import needed_cores, nodes_for, true_rate

CAPS = np.ones(4)


def test_ds2_estimate_by_hand() -> None:
    # 12,000 rows in 6 busy core-seconds: 2,000 rows per core-second; 3,000 rows/s arriving
    # need 1.5 cores; at 70% of 1-core nodes that is 1.5 / 0.7 = 2.14 -> 3 nodes
    rate = true_rate(12_000, 6.0)
    assert rate == pytest.approx(2000.0)
    assert needed_cores(3000.0, rate) == pytest.approx(1.5)
    assert nodes_for(1.5, CAPS, 0.7) == 3
    assert nodes_for(1.4, CAPS, 0.7) == 2  # exactly two nodes' room is enough
    # heterogeneous capacities are taken in order: 0.5 + 2.0 at 80% = 2.0 cores
    assert nodes_for(2.0, np.array([0.5, 2.0, 1.0]), 0.8) == 2
    assert nodes_for(2.01, np.array([0.5, 2.0, 1.0]), 0.8) == 3


def test_a_backlogged_operator_is_measured_by_its_true_rate() -> None:
    """A saturated node processes only what it can: the estimate must come from rows per busy
    second and the arrival rate, not from the processed rate (which would say 1 node)."""
    auto = Autoscaler(AutoscalerParams(max_nodes=4, cooldown_rounds=0))
    # 10 s round, one saturated core: 10 busy core-seconds processed 20,000 rows (2,000/s),
    # while 5,000 rows/s arrived: 2.5 cores -> 2.5 / 0.7 = 3.6 -> 4 nodes in one step
    d = auto.decide(1, 5000.0, 20_000, 10.0, CAPS)
    assert d.changed and d.nodes == 4
    assert d.numbers["needed_cores"] == pytest.approx(2.5)
    assert "scaled out 1 -> 4" in d.reason


def test_scale_in_waits_for_a_low_period_and_cooldown_holds() -> None:
    auto = Autoscaler(AutoscalerParams(max_nodes=4, cooldown_rounds=1, scale_in_rounds=3))
    low = (1000.0, 10_000, 5.0)  # 0.5 cores: 1 node
    mid = (2000.0, 10_000, 5.0)  # 1.0 core: 2 nodes
    assert auto.decide(3, *low, CAPS).nodes == 3  # low 1/3
    assert auto.decide(3, *mid, CAPS).nodes == 3  # low 2/3 (estimate 2)
    d = auto.decide(3, *low, CAPS)  # low 3/3: in to the largest estimate of the period
    assert d.changed and d.nodes == 2
    assert not auto.decide(2, *low, CAPS).changed  # cooldown


def test_cooldown_blocks_a_change_the_round_after_one() -> None:
    auto = Autoscaler(AutoscalerParams(max_nodes=4, cooldown_rounds=1))
    assert auto.decide(1, 3000.0, 10_000, 5.0, CAPS).nodes == 3
    d = auto.decide(3, 7000.0, 10_000, 5.0, CAPS)  # 3.5 cores: wants 4, in cooldown
    assert not d.changed and "cooldown" in d.reason
    assert auto.decide(3, 7000.0, 10_000, 5.0, CAPS).nodes == 4


def test_bounds_and_the_ceiling() -> None:
    auto = Autoscaler(AutoscalerParams(min_nodes=2, max_nodes=3, cooldown_rounds=0))
    assert auto.decide(2, 0.0, 100, 1.0, CAPS).nodes == 2  # never below min_nodes
    d = auto.decide(2, 100_000.0, 10_000, 5.0, CAPS)  # 50 cores: capped at max_nodes
    assert d.nodes == 3
    d = auto.decide(3, 100_000.0, 10_000, 5.0, CAPS)
    assert not d.changed and "at the ceiling" in d.reason


def test_no_measurement_no_change() -> None:
    auto = Autoscaler(AutoscalerParams(max_nodes=4, cooldown_rounds=0))
    d = auto.decide(2, 5000.0, 0, 0.0, CAPS)
    assert not d.changed and "no busy time" in d.reason


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"target_utilization": 0.0}, "target_utilization"), ({"min_nodes": 5}, "min_nodes")],
)
def test_bad_params_name_the_field(kw: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        AutoscalerParams(max_nodes=4, **kw)
