"""Routing in the control loop: the key-group table from the placement, quotas for hot keys.

Cold keys follow the placement (key group -> partition). Hot keys are routed by the named
partitioner itself: a live ``partitioners.micro_batch.MicroBatchRouter`` keeps the
partitioner's state across rounds, routes a sample of the latest batch's keys with its own
rule, and its assignment of the hot keys (split, or whole on a partition other than the
table's) becomes the next batch's quotas. The partitions' measured rows and
busy seconds are its feedback (speeds for CAPA, E-CAPA and Consistent Grouping). A new routing
is published only when the hot set or a quota changed by more than ``min_change`` (hysteresis
against flapping quotas); the plan carries the partitioner's state, so a controller restarted
from it continues with the same state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.cluster import alive_mask
from core.hashing import stable_mod
from core.observation import Observation
from core.plans import Placement, RoutingConfig, key_group_table
from partitioners.micro_batch import MicroBatchRouter, Quotas

__all__ = ["RoutingPolicy"]


class RoutingPolicy:
    """Hot-key routing for a keyed operator placed as ``op_id#kg`` units on partitions."""

    def __init__(
        self,
        partitioner: str,
        op_id: str,
        key_groups: int,
        n: int,
        min_change: float = 0.05,
        seed: int = 0,
    ) -> None:
        self.router = MicroBatchRouter(partitioner, n, seed)
        self.name, self.op_id, self.groups, self.n, self.min_change = (
            partitioner,
            op_id,
            key_groups,
            n,
            min_change,
        )
        self._restored = False

    def _restore(self, current: RoutingConfig) -> None:
        """Adopt the partitioner state the plan in effect carries (a restarted controller)."""
        self._restored = True
        if current.state and current.partitioner == self.name:
            router = MicroBatchRouter.load(current.state)
            if router.n == self.n:
                self.router = router

    def decide(
        self, obs: Observation, placement: Placement, current: RoutingConfig
    ) -> tuple[RoutingConfig | None, str, dict[str, Any]]:
        """The routing for the next batches, or None to keep ``current``."""
        if not self._restored:
            self._restore(current)
        for b in obs.batches:
            if len(b.partition_rows) == self.n:
                self.router.feedback(np.asarray(b.partition_rows), np.asarray(b.partition_busy_s))
        table = key_group_table(placement, self.op_id, self.groups, self.n)
        kc = obs.key_counts
        batch = obs.batches[-1].batch_id if obs.batches else self.router.rounds
        hot: Quotas = {}
        if kc.size:
            keys = kc[:, 0].astype(np.int64)
            home = np.asarray(table, dtype=np.int64)[stable_mod(keys, self.groups)]
            hot = self.router.step(keys, kc[:, 1].astype(float), batch, home)
            hot = _on_live(hot, alive_mask(obs.node_status[: self.n]))
            hot = _off_table(hot, table, self.groups)
        new = RoutingConfig(
            partitioner=self.name,
            num_partitions=self.n,
            table=table,
            hot=hot,
            params={"from_batch": int(batch), "state_digest": self.router.state_digest()},
            state=self.router.dump() if self.router.partitioner is not None else "",
        )
        details = {
            "hot_keys": len(hot),
            "splits": {str(k): [list(q) for q in v] for k, v in list(hot.items())[:10]},
            "speeds": [round(float(s), 3) for s in self.router.speeds.capacities()],
        }
        if tuple(current.table) == table and self._close(current.hot, hot):
            return None, "routing unchanged", details
        return new, f"{self.name}: {len(hot)} hot key(s) split, table from placement", details

    def _close(self, a: Quotas, b: Quotas) -> bool:
        """Whether quotas ``b`` are ``a`` up to ``min_change`` in every fraction.

        >>> r = RoutingPolicy("pkg", "count", 8, 2)
        >>> r._close({7: ((0, 0.5), (1, 0.5))}, {7: ((0, 0.53), (1, 0.47))})
        True
        >>> r._close({7: ((0, 0.5), (1, 0.5))}, {7: ((0, 0.9), (1, 0.1))})
        False
        >>> r._close({7: ((0, 1.0),)}, {7: ((1, 1.0),)}), r._close({7: ((0, 1.0),)}, {})
        (False, False)
        """
        if set(a) != set(b):
            return False
        for k in a:
            da, db = dict(a[k]), dict(b[k])
            if set(da) != set(db) or any(abs(da[p] - db[p]) > self.min_change for p in da):
                return False
        return True


def _off_table(hot: Quotas, table: tuple[int, ...], groups: int) -> Quotas:
    """Without the whole keys the partitioner put where the key-group table puts them."""
    if not hot:
        return hot
    keys = np.fromiter(hot, dtype=np.int64, count=len(hot))
    home = np.asarray(table, dtype=np.int64)[stable_mod(keys, groups)]
    return {
        int(k): q
        for k, q, h in zip(keys, hot.values(), home, strict=True)
        if not (len(q) == 1 and q[0][0] == h)
    }


def _on_live(hot: Quotas, up: np.ndarray) -> Quotas:
    """Quotas without lost partitions (renormalised); a key left with none follows the table."""
    if up.all():
        return hot
    out: Quotas = {}
    for key, q in hot.items():
        kept = [(p, f) for p, f in q if up[p]]
        total = sum(f for _, f in kept)
        if kept and total > 0:
            out[key] = tuple((p, f / total) for p, f in kept)
    return out
