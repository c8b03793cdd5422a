"""Feasible-set ratio of a placement, by quasi-Monte Carlo.

ROD's metric (Xing et al., VLDB 2006): the volume of input-rate vectors no node is overloaded
at, ``F(A) = {r >= 0 : L^n r <= C}``, relative to the ideal set ``F* = {r >= 0 : l . r <= C_T}``.
Points are drawn uniformly in the ideal simplex from a Halton sequence (``scipy.stats.qmc``,
first point skipped; the sorted-spacings transform maps the cube to the simplex), so the
estimate is deterministic by seed; the error estimate is the spread over independently
scrambled replicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "FeasibleResult",
    "feasible_set_ratio",
    "min_plane_distance",
    "node_coefficients",
    "simplex_points",
]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class FeasibleResult:
    """The ratio, its error estimate, and the number of points behind it."""

    ratio: float
    error: float
    points: int
    seed: int


def node_coefficients(coeff: Array, assign: NDArray[np.int64], n: int) -> Array:
    """``(n, d)`` node load coefficients ``L^n = A L^o``."""
    out = np.zeros((n, coeff.shape[1]))
    np.add.at(out, assign, coeff)
    return out


def simplex_points(d: int, count: int, seed: int, scramble: bool) -> Array:
    """Uniform points in the unit simplex {y >= 0, sum y <= 1} from a Halton sequence."""
    from scipy.stats import qmc  # here: scipy.stats costs every CLI start 0.3 s

    h = qmc.Halton(d, scramble=scramble, seed=seed)
    if not scramble:
        h.fast_forward(1)  # skip the origin
    u = h.random(count)
    s = np.sort(u, axis=1)
    gaps = np.diff(np.concatenate([np.zeros((count, 1)), s], axis=1), axis=1)
    return np.asarray(gaps, dtype=float)  # d spacings of d sorted uniforms: uniform in the simplex


def feasible_set_ratio(
    coeff: Array,
    assign: NDArray[np.int64],
    capacity: Array,
    points: int = 2**14,
    seed: int = 0,
    replicates: int = 4,
) -> FeasibleResult:
    """``Vol(F(A)) / Vol(F*)`` for the placement ``assign`` of units with ``coeff`` (m, d).

    Examples
    --------
    >>> c = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]])
    >>> round(feasible_set_ratio(c, np.array([0, 1, 0, 1]), np.ones(2)).ratio, 3)
    1.0
    >>> round(feasible_set_ratio(c, np.array([0, 0, 1, 1]), np.ones(2), 2**16).ratio, 2)
    0.5
    """
    tot = coeff.sum(axis=0)
    keep = tot > 0
    c = coeff[:, keep]
    n = capacity.size
    ln = node_coefficients(c, assign, n)
    ct = capacity.sum()
    d = int(keep.sum())
    if d == 0:
        return FeasibleResult(1.0, 0.0, 0, seed)

    def estimate(y: Array) -> float:
        r = y * (ct / tot[keep])[None, :]  # y in simplex -> rates on the ideal hyperplane region
        return float(np.mean(np.all(r @ ln.T <= capacity[None, :] * (1 + 1e-12), axis=1)))

    main = estimate(simplex_points(d, points, seed, scramble=False))
    reps = [
        estimate(simplex_points(d, max(points // replicates, 256), seed + 1 + i, True))
        for i in range(replicates)
    ]
    err = float(np.std(reps, ddof=1) / np.sqrt(replicates)) if replicates > 1 else 0.0
    return FeasibleResult(main, err, points, seed)


def min_plane_distance(coeff: Array, assign: NDArray[np.int64], capacity: Array) -> float:
    """``min_i C_i / ||P_i||`` in normalised coordinates (larger is more resilient)."""
    tot = coeff.sum(axis=0)
    keep = tot > 0
    p = coeff[:, keep] / tot[keep]
    P = node_coefficients(p, assign, capacity.size)
    norms = np.linalg.norm(P, axis=1)
    with np.errstate(divide="ignore"):
        return float(np.min(np.where(norms > 0, capacity / capacity.sum() / norms, np.inf)))
