"""Routing in the control loop: the key-group table from the placement, quotas for hot keys.

Cold keys follow the placement (key group -> partition); each round the latest batch's hot
keys are split over their partitioner's candidates by ``partitioners.batch_split``. A new
routing is published only when the hot set or a quota changed by more than ``min_change``
(hysteresis against flapping quotas).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.cluster import alive_mask
from core.hashing import stable_mod
from core.observation import Observation
from core.plans import Placement, RoutingConfig, key_group_table
from partitioners.batch_split import split_hot_keys
from partitioners.registry import NAMES

__all__ = ["RoutingPolicy"]


class RoutingPolicy:
    """Hot-key routing for a keyed operator placed as ``op_id#kg`` units on partitions."""

    def __init__(
        self, partitioner: str, op_id: str, key_groups: int, n: int, min_change: float = 0.05
    ) -> None:
        if partitioner not in NAMES:
            raise ValueError(
                f"partitioner: unknown name {partitioner!r} (known: {', '.join(NAMES)})"
            )
        self.name, self.op_id, self.groups, self.n, self.min_change = (
            partitioner,
            op_id,
            key_groups,
            n,
            min_change,
        )

    def decide(
        self, obs: Observation, placement: Placement, current: RoutingConfig
    ) -> tuple[RoutingConfig | None, str, dict[str, Any]]:
        """The routing for the next batches, or None to keep ``current``."""
        table = key_group_table(placement, self.op_id, self.groups, self.n)
        kc = obs.key_counts
        hot: dict[int, tuple[tuple[int, float], ...]] = {}
        if kc.size and self.name not in ("hash", "shuffle"):
            keys, counts = kc[:, 0].astype(np.int64), kc[:, 1].astype(float)
            cold = np.asarray(table, dtype=np.int64)[stable_mod(keys, self.groups)]
            up = alive_mask(obs.node_status[: self.n])
            cap = None if up.all() else np.where(up, 1.0, 1e-9)  # no quota on lost capacity
            hot = split_hot_keys(self.name, keys, counts, cold, self.n, capacity=cap)
        new = RoutingConfig(partitioner=self.name, num_partitions=self.n, table=table, hot=hot)
        details = {
            "hot_keys": len(hot),
            "splits": {str(k): [list(q) for q in v] for k, v in list(hot.items())[:10]},
        }
        if tuple(current.table) == table and self._close(current.hot, hot):
            return None, "routing unchanged", details
        return new, f"{self.name}: {len(hot)} hot key(s) split, table from placement", details

    def _close(
        self,
        a: dict[int, tuple[tuple[int, float], ...]],
        b: dict[int, tuple[tuple[int, float], ...]],
    ) -> bool:
        if set(a) != set(b):
            return False
        for k in a:
            da, db = dict(a[k]), dict(b[k])
            if set(da) != set(db) or any(abs(da[p] - db[p]) > self.min_change for p in da):
                return False
        return True
