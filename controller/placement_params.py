"""Which ``controller.placement`` settings each placement method reads, so that a setting it
would ignore (a misspelt parameter, another method's, pins without the method that places
them) is refused by name when the scenario or config is loaded, not dropped at run time."""

from __future__ import annotations

from collections.abc import Mapping

from controller.placements import PLACEMENTS
from placement.correlation import CorrelationParams

__all__ = ["PARAMS", "method_problem", "pin_problem", "placement_problem"]

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
    for name in sorted(set(params) - takes):
        methods = " or ".join(used)
        if not takes:
            owners = ", ".join(sorted(m for m, ps in PARAMS.items() if name in ps))
            known = f" ({name} is a parameter of {owners})" if owners else ""
            return f"params.{name}: {methods} reads no params{known}"
        return f"params.{name}: not a parameter of {methods} (it reads {', '.join(sorted(takes))})"
    if pins and "fixed" not in used:
        return f"fixed: pins are placed by method 'fixed' alone (method is {method!r})"
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
