"""The global greedy's state for correlation placement (``placement.correlation``).

Xing, Zdonik, Hwang, ICDE 2005: the least-loaded node repeatedly takes the operator least
correlated with it relative to the other nodes. Only the chosen node's column of the
unit-node correlations changes when it takes a unit, so each step recomputes that one column
(the formula of ``core.loadstats.cross_correlation``) and keeps the row sums of the others:
a step costs O(units x samples), not O(units x nodes x samples).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from core import loadstats

__all__ = ["GreedyState"]

Array = NDArray[np.float64]


class GreedyState:
    """Node series, candidates and the unit-node correlation sums, updated per assignment."""

    def __init__(self, x: Array, cap: Array, candidates: NDArray[np.bool_]) -> None:
        self.x, self.cap = x, cap
        self.xc = x - x.mean(axis=1, keepdims=True)
        self.var = loadstats.variances(x)
        self.node_x = np.zeros((cap.size, x.shape[1]))
        self.live = candidates.copy()  # units still to place by score
        self.rho_sum = np.zeros(x.shape[0])  # sum over nodes of rho(unit, node)
        small = x.shape[0] * cap.size <= 4_000_000
        self.cols = np.zeros((x.shape[0], cap.size)) if small else None  # kept when it fits

    def least_loaded(self) -> int:
        """The node with the smallest mean load per capacity (ties: lowest index)."""
        return int(np.argmin(self.node_x.mean(axis=1) / self.cap))

    def rho_col(self, j: int) -> Array:
        """rho(unit, node j) for every unit (0 for zero variance)."""
        if self.cols is not None:
            return self.cols[:, j]
        return self._rho(j)

    def _rho(self, j: int) -> Array:
        nj = self.node_x[j]
        nc = nj - nj.mean()
        vj = float((nc * nc).mean())
        if vj < loadstats.ZERO_VAR:
            return np.zeros(self.x.shape[0])
        cov = self.xc @ nc / self.x.shape[1]
        out = np.zeros(self.x.shape[0])
        ok = self.var >= loadstats.ZERO_VAR
        np.divide(cov, np.sqrt(self.var * vj), out=out, where=ok)
        return np.clip(out, -1.0, 1.0)

    def add(self, u: int, j: int, light: bool = False) -> None:
        """Node j takes unit u."""
        old = self.rho_col(j)
        self.node_x[j] += self.x[u]
        self.live[u] = False
        if light:
            return
        new = self._rho(j)
        self.rho_sum += new - old
        if self.cols is not None:
            self.cols[:, j] = new
