"""Registers every placement method with the controller's registry.

Importing this module makes the names usable with ``--placement``.
"""

from __future__ import annotations

import numpy as np

from controller.policy import (
    PLACEMENTS,
    Context,
    IntArray,
    LeastLoaded,
    RebalanceResult,
    register_placement,
)

__all__ = ["DEMO_PLACEMENTS", "PLACEMENTS", "Fixed", "LeastLoaded"]

DEMO_PLACEMENTS: tuple[str, ...] = ("least-loaded",)


@register_placement("fixed")
class Fixed:
    """Operators pinned to nodes by ``controller.placement.fixed``; other units least-loaded."""

    name = "fixed"

    def __init__(self, params: dict[str, float] | None = None) -> None:
        self.params = params or {}

    def initial(self, ctx: Context, unit_x: np.ndarray | None) -> IntArray:
        base = LeastLoaded().initial(ctx, unit_x)
        pins = ctx.settings.placement.fixed
        ops = ctx.network.op_ids
        for u, i in enumerate(ctx.units.op_index):
            if ops[i] in pins:
                base[u] = ctx.cluster.ids.index(pins[ops[i]])
        return base

    def rebalance(
        self, ctx: Context, unit_x: np.ndarray, assign: IntArray, alive: np.ndarray
    ) -> RebalanceResult:
        return RebalanceResult(assign.copy(), "fixed placement: no periodic moves")
