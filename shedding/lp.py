"""Coordinated load shedding as a linear program, solved with PuLP (HiGHS; CBC fallback).

Tatbul, Cetintemel, Zdonik, "Staying FIT", VLDB 2007; the canonical two-node example of the
project's seed slides. Variables ``x_i in [0, 1]`` are the (effective) keep fractions of the
drop locations:

    maximize    sum_i gain_i * r_i * x_i
    subject to  sum_i L_ij * r_i * x_i <= H * C_j - background_j   for every node j
                z_b <= x_a                                        for a split drop under input a

Shadow prices of the capacity rows name the bottleneck nodes. Zero-rate locations keep 1;
non-finite inputs raise ``ValueError`` naming the field; a failed solve falls back to uniform
dropping at the tightest node's ratio (logged in ``status``).
"""

from __future__ import annotations

import time

import highspy
import numpy as np
import pulp
from numpy.typing import NDArray

from core.plans import ShedPlan
from shedding.loadmodel import ShedModel

__all__ = ["BulkHiGHS", "node_loads", "settings", "solve_lp", "validate_model", "weighted_output"]

Array = NDArray[np.float64]


def validate_model(model: ShedModel, capacity: Array) -> None:
    """Raise ``ValueError`` naming the first non-finite or negative input."""
    for name, arr in (
        ("load", model.load),
        ("rate", model.rate),
        ("gain", model.gain),
        ("capacity", capacity),
    ):
        a = np.asarray(arr, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ValueError(
                f"{name}: non-finite value at index {int(np.flatnonzero(~np.isfinite(a.ravel()))[0])}"
            )
        if np.any(a < 0):
            raise ValueError(
                f"{name}: negative value at index {int(np.flatnonzero(a.ravel() < 0)[0])}"
            )


def node_loads(model: ShedModel, x: Array) -> Array:
    """Per-node load (cores) under effective keep fractions ``x``."""
    return np.asarray(
        (model.load * (model.rate * x)[:, None]).sum(axis=0) + model.background, dtype=float
    )


def weighted_output(model: ShedModel, x: Array) -> float:
    """Objective value: weighted query output per second."""
    return float(model.gain @ (model.rate * x))


def effective(model: ShedModel, keep: Array) -> Array:
    """Per-location settings -> effective fractions (a split drop's z_b = y_b * x_a)."""
    out = np.asarray(keep, dtype=float).copy()
    split = np.flatnonzero(model.parent >= 0)
    out[split] = out[split] * out[model.parent[split]]
    return out


def settings(model: ShedModel, x: Array) -> tuple[float, ...]:
    """Effective fractions -> per-location settings (split drop y_b = z_b / x_a)."""
    out = x.copy()
    for i, p in enumerate(model.parent):
        if p >= 0:
            out[i] = 1.0 if x[p] <= 1e-12 else min(1.0, x[i] / x[p])
    return tuple(float(min(1.0, max(0.0, v))) for v in out)


class BulkHiGHS(pulp.HiGHS):  # type: ignore[misc]
    """PuLP's in-process HiGHS solver, loading the model in bulk.

    ``pulp.HiGHS`` passes the PuLP model to highspy one column and one row at a time, and
    re-sorts the variable list three times per solve; for a 5,000-input LP that is more time
    than HiGHS spends solving. This subclass reads the same PuLP objects once, hands HiGHS the
    columns and the rows as arrays (``addCols``/``addRows``), and reads the solution back the
    way PuLP does (values, reduced costs, row duals and slacks).
    """

    def buildSolverModel(self, lp: pulp.LpProblem) -> None:
        inf = highspy.kHighsInf
        sign = -1.0 if lp.sense == pulp.LpMaximize else 1.0
        variables = lp.variables()
        for i, v in enumerate(variables):
            v.index = i
        obj = lp.objective
        cost = np.array([sign * obj.get(v, 0.0) for v in variables], dtype=float)
        lo = np.array([-inf if v.lowBound is None else v.lowBound for v in variables], float)
        hi = np.array([inf if v.upBound is None else v.upBound for v in variables], float)
        self._variables = variables
        h = lp.solverModel
        empty_i, empty_f = np.zeros(0, np.int32), np.zeros(0)
        _check(h.addCols(len(variables), cost, lo, hi, 0, empty_i, empty_i, empty_f), "columns")
        cons = list(lp._constraints.values())
        starts, index, value, rlo, rhi = [], [], [], [], []
        nnz = 0
        for i, c in enumerate(cons):
            c.index = i
            starts.append(nnz)
            index.extend(v.index for v in c)
            value.extend(c.values())
            nnz = len(index)
            lb, ub = c.getLb(), c.getUb()
            rlo.append(-inf if lb is None else lb)
            rhi.append(inf if ub is None else ub)
        if cons:
            added = h.addRows(
                len(cons),
                np.array(rlo, float),
                np.array(rhi, float),
                nnz,
                np.array(starts, np.int32),
                np.array(index, np.int32),
                np.array(value, float),
            )
            _check(added, "rows")

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        h = lp.solverModel
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return tuple(super().findSolutionValues(lp))  # PuLP's full status mapping
        sol = h.getSolution()
        for v, val, dj in zip(self._variables, sol.col_value, sol.col_dual, strict=True):
            v.varValue, v.dj = val, dj
        for c, val, pi in zip(lp._constraints.values(), sol.row_value, sol.row_dual, strict=True):
            slack = c.constant + val
            c.slack = -slack if c.sense == pulp.LpConstraintLE else slack
            c.pi = pi
        return pulp.LpStatusOptimal, pulp.LpSolutionOptimal

    def actualSolve(self, lp: pulp.LpProblem) -> int:
        self.createAndConfigureSolver(lp)
        self.buildSolverModel(lp)
        self.callSolver(lp)
        status, sol_status = self.findSolutionValues(lp)
        lp.assignStatus(status, sol_status)
        return int(status)


def _check(status: highspy.HighsStatus, what: str) -> None:
    """HiGHS refuses a model part it cannot hold (a coefficient above its 1e15 limit, an
    operator's load coefficient 1e300) and then solves the rest: a plan without the capacity
    rows. Refused, the solve fails instead (CBC, then the uniform fallback, in ``_solve``)."""
    if status == highspy.HighsStatus.kError:
        raise pulp.PulpSolverError(f"HiGHS refused the model's {what} (a coefficient out of range)")


def _solver(name: str, time_limit_s: float) -> pulp.LpSolver:
    if name == "highs":
        return BulkHiGHS(msg=False, timeLimit=time_limit_s, presolve="off")
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s)


def solve_lp(
    model: ShedModel,
    capacity: Array,
    headroom: float = 1.0,
    node_ids: tuple[str, ...] | None = None,
    time_limit_s: float = 1.0,
    solver: str = "highs",
    upper: Array | None = None,
) -> ShedPlan:
    """Solve the shedding LP and return a ``ShedPlan`` with objective, loads and shadow prices.

    Examples
    --------
    >>> from shedding.loadmodel import ShedModel
    >>> m = ShedModel(("s1", "s2"), np.array([[1.0, 3.0], [2.0, 1.0]]), np.ones(2), np.ones(2),
    ...               np.array([-1, -1]), np.zeros(2))
    >>> p = solve_lp(m, np.ones(2), node_ids=("A", "B"))
    >>> [round(k, 6) for k in p.keep], round(p.objective, 6)
    ([0.2, 0.4], 0.6)
    """
    validate_model(model, capacity)
    t0 = time.perf_counter()
    n_loc, n = model.load.shape
    ids = node_ids or tuple(f"n{j}" for j in range(n))
    cap = np.maximum(headroom * np.asarray(capacity, float) - model.background, 0.0)
    prob, x, rows = _build(model, cap, upper)
    ok, status = _solve(prob, solver, time_limit_s)
    if ok:
        xv = np.array([v.value() or 0.0 for v in x], dtype=float).clip(0.0, 1.0)
        duals = {
            ids[j]: abs(float(prob.get_constraint_by_name(name).pi or 0.0))
            for j, name in rows.items()
        }
        # a solver's "optimal" on coefficients far apart (1 and 1e15) can break a row
        over_cap = node_loads(model, xv) - model.background > cap * (1 + 1e-6) + 1e-6
        ok = not over_cap.any()
    if not ok:
        full = node_loads(model, np.ones(n_loc))
        ratio = float(np.min(np.divide(cap, full, out=np.ones(n), where=full > 0), initial=1.0))
        xv = np.full(n_loc, min(1.0, ratio))
        duals = {}
        why = pulp.LpStatus.get(prob.status, "error")
        if why == "Optimal":
            why = "its plan exceeds " + ",".join(ids[j] for j in np.flatnonzero(over_cap))
        status = f"solver failed ({why}): uniform fallback"
    xv[model.rate <= 0] = 1.0
    over = np.flatnonzero(model.background > headroom * np.asarray(capacity))
    if over.size:
        status += "; unsheddable overload on " + ",".join(ids[j] for j in over)
    loads = node_loads(model, xv)
    return ShedPlan(
        method="lp",
        locations=model.locations,
        keep=settings(model, xv),
        objective=weighted_output(model, xv),
        node_loads={ids[j]: float(loads[j]) for j in range(n)},
        shadow_prices=duals,
        status=status,
        solve_time_s=time.perf_counter() - t0,
    )


def _build(
    model: ShedModel, cap: Array, upper: Array | None
) -> tuple[pulp.LpProblem, list[pulp.LpVariable], dict[int, str]]:
    """The LP: maximize weighted output under each node's capacity, a split's branches
    keeping at most their parent's fraction; rows built in bulk (one affine expression each)."""
    n_loc, n = model.load.shape
    ub = np.ones(n_loc) if upper is None else np.clip(upper, 0.0, 1.0)
    ub = np.where(model.rate <= 0, 1.0, ub)
    prob = pulp.LpProblem("shed", pulp.LpMaximize)
    lb = np.where(model.rate <= 0, 1.0, 0.0)  # zero-rate inputs keep everything
    x = [
        prob.add_variable(f"x{i}", lo, hi)
        for i, (lo, hi) in enumerate(zip(lb.tolist(), ub.tolist(), strict=True))
    ]
    obj = model.gain * model.rate
    nz = np.flatnonzero(obj)
    prob += pulp.LpAffineExpression(list(zip([x[i] for i in nz], obj[nz].tolist(), strict=True)))
    coef = (model.load * model.rate[:, None]).T  # (n, loc)
    row_of, col_of = np.nonzero(coef)  # row-major: the terms of row j are contiguous
    bounds = np.searchsorted(row_of, np.arange(n + 1)).tolist()
    values, cols, caps = coef[row_of, col_of].tolist(), col_of.tolist(), cap.tolist()
    rows = {}
    for j in range(n):
        lo, hi = bounds[j], bounds[j + 1]
        if hi > lo:
            name = f"cap_{j}"
            terms = list(zip([x[i] for i in cols[lo:hi]], values[lo:hi], strict=True))
            prob += pulp.LpAffineExpression(terms) <= caps[j], name
            rows[j] = name
    for i, p in enumerate(model.parent):
        if p >= 0:
            prob += x[i] - x[p] <= 0, f"split_{i}"
    return prob, x, rows


def _solve(prob: pulp.LpProblem, solver: str, time_limit_s: float) -> tuple[bool, str]:
    """Solve with HiGHS, falling back to CBC; (optimal?, status)."""
    status = "optimal"
    try:
        prob.solve(_solver(solver, time_limit_s))
        ok = pulp.LpStatus[prob.status] == "Optimal"
    except pulp.PulpSolverError:
        ok = False
    if not ok and solver == "highs":
        try:
            prob.solve(_solver("cbc", time_limit_s))
            ok = pulp.LpStatus[prob.status] == "Optimal"
            status = "optimal (cbc fallback)"
        except pulp.PulpSolverError:
            ok = False
    return ok, status
