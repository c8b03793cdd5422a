"""Every migration is counted under the rule that made it, and the causes add up to the run's
migrations (which the simulator counts from the plans it applied, not from the decisions)."""

from __future__ import annotations

import pytest

from controller.replay import replay_sim
from controller.scenario import load_scenario
from tests.conftest import SCENARIOS


@pytest.mark.parametrize(
    ("scenario", "placement", "causes"),
    [
        # the first global step, then the stale trigger's re-placement after the flip
        ("diurnal-phase-flip", "correlation-twoway", {"global-step", "stale-trigger"}),
        # placed on the nodes each scale action left running; two-way's own pair-wise moves
        ("elastic-ramp", "correlation-twoway", {"scaling", "pairwise", "stale-trigger"}),
        # least-loaded's plan, restored once the failed nodes are up again
        ("failure-storm", "least-loaded", {"plan-restored"}),
    ],
)
def test_migrations_by_cause_add_up_to_the_migrations(
    scenario: str, placement: str, causes: set[str]
) -> None:
    s = replay_sim(load_scenario(SCENARIOS / f"{scenario}.yaml"), placement=placement).summary
    by = s["migrations_by_cause"]
    assert set(by) == causes and all(v > 0 for v in by.values()), by
    assert sum(by.values()) == s["migrations"], (by, s["migrations"])
    if placement.startswith("correlation-"):
        assert s["pairwise_moves"] == by.get("pairwise", 0)
