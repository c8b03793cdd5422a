"""The routing policy tells the partitioner where the key-group table puts each key."""

from __future__ import annotations

import numpy as np

from controller.routing import RoutingPolicy
from core.cluster import NodeStatus
from core.hashing import stable_mod
from core.observation import Observation
from core.plans import Placement, RoutingConfig

GROUPS, SPACE = 50, 5000


def test_prompt_plans_against_the_table_the_placement_made() -> None:
    """The placement puts the two hottest keys' key groups on partition 0 (1.45x the mean
    rows). Prompt's quotas, planned with each key's table partition, bring the partitions
    within 5% of each other; planned on its own hash they would not."""
    group = stable_mod(np.arange(SPACE), GROUPS)
    assignment = np.arange(GROUPS) % 2
    assignment[group[:2]] = 0
    placement = Placement(
        units=tuple(f"count#{g}" for g in range(GROUPS)),
        nodes=("p0", "p1"),
        assignment=tuple(int(a) for a in assignment),
    )
    p = 1.0 / np.arange(1, SPACE + 1) ** 1.3
    counts = np.random.default_rng(3).multinomial(11_600, p / p.sum())
    keys = np.flatnonzero(counts)
    obs = Observation(
        time_s=2.0,
        unit_load=np.zeros((GROUPS, 1)),
        node_load=np.zeros((2, 1)),
        input_rates=np.zeros((1, 1)),
        node_status=(NodeStatus.UP, NodeStatus.UP),
        backlog_s=np.zeros(2),
        key_counts=np.stack([keys, counts[keys]], axis=1).astype(np.int64),
    )
    new, _, _ = RoutingPolicy("prompt", "count", GROUPS, 2).decide(
        obs, placement, RoutingConfig(num_partitions=2)
    )
    assert new is not None and new.hot
    home = np.asarray(new.table)[group]
    rows = np.bincount(home, weights=counts, minlength=2)
    assert rows.max() / rows.mean() > 1.35  # the premise: the table alone is skewed
    for key, quotas in new.hot.items():
        rows[home[key]] -= counts[key]
        for part, frac in quotas:
            rows[part] += counts[key] * frac
    assert rows.max() / rows.mean() < 1.05, rows
