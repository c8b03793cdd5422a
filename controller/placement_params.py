"""Which ``controller.placement`` settings each placement method reads, so that a setting it
would ignore (a misspelt parameter, another method's, pins without the method that places
them) is refused by name when the scenario or config is loaded, not dropped at run time; and
the values each parameter takes (``RANGES``), so that one the method cannot use (a negative
threshold, a fractional round count) is refused the same way."""

from __future__ import annotations

from collections.abc import Mapping

from controller.placements import PLACEMENTS
from placement.correlation import CorrelationParams

__all__ = [
    "PARAMS",
    "RANGES",
    "method_problem",
    "pin_problem",
    "placement_problem",
    "said_params",
    "unread_params",
    "value_problem",
    "window_problem",
]

CORRELATION_PARAMS = (
    *CorrelationParams.__dataclass_fields__,
    "stale_trigger",
    "stale_factor",
    "stale_rounds",
)
PARAMS: dict[str, tuple[str, ...]] = {
    "random": ("seed",),
    "rod": ("seed", "search_rounds", "search_max_units"),
    **{f"correlation-{m}": CORRELATION_PARAMS for m in ("oneway", "twoway", "selective")},
}
"""The ``params`` each method reads (a method not listed takes none)."""


INF = float("inf")
RANGES: dict[str, tuple[float, float, str]] = {
    # name: (low, high, kind); kind "[]" "(]" "[)" "()" bounds a number, "int" an integer in
    # [low, high]. Correlations and scores lie in [-1, 1]; loads are fractions of a node.
    "pair_threshold": (0.0, 1.0, "(]"),  # a node pair's mean-load gap
    "load_threshold": (0.0, 1.0, "[]"),  # the least mean load a unit moves with
    "selective_threshold": (-1.0, 1.0, "[]"),  # a move's score
    "improve_threshold": (-1.0, 1.0, "[]"),  # a correlation
    "beta": (0.0, INF, "[)"),  # std's weight in the divergent load
    "min_samples": (2, INF, "int"),  # a correlation needs two samples
    "refine_steps": (0, INF, "int"),
    "greedy_block": (0, INF, "int"),
    "improve_units": (0.0, 1.0, "(]"),  # a share of all units
    "overload_threshold": (0.0, 1.0, "(]"),  # a node load
    "gain_horizon_s": (0.0, INF, "()"),
    "stale_trigger": (0, 1, "int"),  # off or on
    "stale_factor": (1.0, INF, "[)"),  # "worse by a factor": below 1 it fires when better
    "stale_rounds": (1, INF, "int"),
    "seed": (0, INF, "int"),
    "search_rounds": (0, INF, "int"),
    "search_max_units": (0, INF, "int"),
}
"""The values each parameter of ``PARAMS`` takes."""


def value_problem(name: str, value: float) -> str | None:
    """Why ``value`` is not one parameter ``name`` takes (None: it is, or ``name`` has no rule).

    >>> value_problem("stale_factor", 0.5)
    'must lie in [1, inf) (got 0.5)'
    >>> value_problem("stale_rounds", 2.5)
    'must be a whole number of at least 1 (got 2.5)'
    >>> value_problem("stale_trigger", 7)
    'must be a whole number in [0, 1] (got 7)'
    >>> value_problem("pair_threshold", 1.0) is None
    True
    """
    if name not in RANGES:
        return None
    lo, hi, kind = RANGES[name]
    got = f"(got {value:g})"
    if kind == "int":
        if float(value).is_integer() and lo <= value <= hi:
            return None
        span = f"of at least {lo:g}" if hi == INF else f"in [{lo:g}, {hi:g}]"
        return f"must be a whole number {span} {got}"
    above = value > lo if kind[0] == "(" else value >= lo
    below = value < hi if kind[1] == ")" else value <= hi
    return None if above and below else f"must lie in {kind[0]}{lo:g}, {hi:g}{kind[1]} {got}"


def method_problem(names: Mapping[str, str | None]) -> str | None:
    """A method name (``method``, ``initial``) that is not a placement method.

    >>> method_problem({"method": "llf", "initial": "bogus"}).split(" (")[0]
    "initial: unknown method 'bogus'"
    """
    for field, name in names.items():
        if name is not None and name not in PLACEMENTS:
            return f"{field}: unknown method {name!r} (known: {', '.join(sorted(PLACEMENTS))})"
    return None


def placement_problem(
    method: str, initial: str | None, params: Mapping[str, object], pins: Mapping[str, str]
) -> str | None:
    """A setting the placement methods would ignore, named (its field below ``placement``):
    a parameter neither ``method`` nor ``initial`` reads, or pins (``fixed``) without the
    method that places them.

    >>> placement_problem("correlation-oneway", "rod", {"pair_threshold": 0.1, "seed": 1}, {})
    >>> placement_problem("least-loaded", None, {"pair_threshold": 0.1}, {})
    'params.pair_threshold: least-loaded reads no params (pair_threshold is a parameter of correlation-oneway, correlation-selective, correlation-twoway)'
    >>> placement_problem("rod", None, {"search_round": 4}, {}).split(" (")[0]
    'params.search_round: not a parameter of rod'
    >>> placement_problem("llf", None, {}, {"op": "n1"})
    "fixed: pins are placed by method 'fixed' alone (method is 'llf')"
    """
    used = [m for m in (method, initial) if m]
    takes = {p for m in used for p in PARAMS.get(m, ())}
    for name in unread_params(method, initial, params):
        methods = " or ".join(used)
        if not takes:
            owners = ", ".join(sorted(m for m, ps in PARAMS.items() if name in ps))
            known = f" ({name} is a parameter of {owners})" if owners else ""
            return f"params.{name}: {methods} reads no params{known}"
        return f"params.{name}: not a parameter of {methods} (it reads {', '.join(sorted(takes))})"
    for name, value in sorted(params.items()):
        if (bad := value_problem(name, float(value))) is not None:  # type: ignore[arg-type]
            return f"params.{name}: {bad}"
    if pins and "fixed" not in used:
        return f"fixed: pins are placed by method 'fixed' alone (method is {method!r})"
    return None


def unread_params(method: str, initial: str | None, params: Mapping[str, object]) -> list[str]:
    """The ``params`` neither ``method`` nor ``initial`` reads, sorted: what a ``--placement``
    override of the scenario's method leaves out of its run (the scenario's own method was
    checked to read them all when the file was loaded).

    >>> unread_params("rod", None, {"pair_threshold": 0.3, "seed": 1})
    ['pair_threshold']
    >>> unread_params("llf", "rod", {"seed": 1})
    []
    """
    takes = {p for m in (method, initial) if m for p in PARAMS.get(m, ())}
    return sorted(set(params) - takes)


def said_params(params: Mapping[str, float]) -> tuple[str, str]:
    """Left-out ``params`` as a note names them, and the pronoun that stands for them.

    >>> said_params({"pair_threshold": 0.3})
    ('pair_threshold 0.3', 'it')
    >>> said_params({"beta": 1.0, "seed": 2})
    ('beta 1, seed 2', 'them')
    """
    said = ", ".join(f"{k} {v:g}" for k, v in params.items())
    return said, "it" if len(params) == 1 else "them"


def window_problem(
    method: str, initial: str | None, params: Mapping[str, float], window_k: int
) -> str | None:
    """A correlation method whose window holds fewer samples than its correlations need
    (``min_samples``): its global step and every pair-wise round would place by load alone,
    the same as LLF, and never say so.

    >>> window_problem("correlation-oneway", None, {}, 2)
    '2 samples a window, fewer than correlation-oneway needs (min_samples 3): it would place by load alone'
    >>> window_problem("llf", None, {}, 2) is None
    True
    """
    for m in (method, initial):
        if m is not None and m.startswith("correlation-"):
            need = int(params.get("min_samples", CorrelationParams.min_samples))
            if window_k < need:
                return (
                    f"{window_k} samples a window, fewer than {m} needs (min_samples {need}): "
                    "it would place by load alone"
                )
    return None


def pin_problem(pins: Mapping[str, str], ops: set[str], nodes: set[str]) -> str | None:
    """A pin (``fixed``: operator -> node) naming an operator or node the scenario lacks.

    >>> pin_problem({"a": "n9"}, {"a"}, {"n0"})
    "fixed.a: unknown node 'n9'"
    """
    for op, node in pins.items():
        if op not in ops:
            return f"fixed: unknown operator {op!r}"
        if node not in nodes:
            return f"fixed.{op}: unknown node {node!r}"
    return None
