"""The reason a pair-wise correlation round logs: how many imbalanced pairs it formed, how
many the method balanced, and which rule held each of the others (the method found no unit
to move; the Borealis acceptance rule, with the worst pair's numbers; migration cost, with
the overload removed against the pauses)."""

from __future__ import annotations

from typing import Any

__all__ = ["pairwise_reason"]


def pairwise_reason(
    method: str,
    pairs: list[dict[str, Any]],
    moves: int,
    widest_gap: float | None,
    threshold: float,
) -> str:
    """The round's reason from its pairs' numbers (``correlation.balance_pair``'s info); with
    no pair, the widest mean-load gap against ``threshold`` (None: too few samples).

    >>> held = {"moves": 2.0, "accepted": 0.0, "max_d_before": 0.8, "max_d_after": 0.84,
    ...         "gap_before": 0.38, "gap_after": 0.18}
    >>> pairwise_reason("oneway", [held, {**held, "moves": 0.0}], 0, 0.4, 0.2)  # doctest: +NORMALIZE_WHITESPACE
    'oneway: 2 imbalanced pair(s), 0 accepted, 0 move(s); 1 pair(s) where oneway found no unit
    to move; 1 pair(s) held by the acceptance rule (max divergent load must fall, or hold while
    the load gap falls); the worst: max D 0.8 -> 0.84, gap 0.38 -> 0.18'
    >>> pairwise_reason("twoway", [], 0, 0.0312, 0.2)
    'no node pair differs by the load threshold: the widest mean-load gap 0.0312 is below pair_threshold 0.2'
    >>> pairwise_reason("twoway", [], 0, None, 0.2)
    'no pair-wise round: the window holds fewer samples than min_samples'
    """
    if not pairs and widest_gap is None:
        return "no pair-wise round: the window holds fewer samples than min_samples"
    if not pairs:
        return (
            f"no node pair differs by the load threshold: the widest mean-load gap "
            f"{widest_gap:.3g} is below pair_threshold {threshold:g}"
        )
    accepted = sum(int(p["accepted"]) for p in pairs)
    reason = f"{method}: {len(pairs)} imbalanced pair(s), {accepted} accepted, {moves} move(s)"
    unmoved = [p for p in pairs if p["moves"] == 0]
    if unmoved:
        reason += f"; {len(unmoved)} pair(s) where {method} found no unit to move"
    rejected = [p for p in pairs if p["moves"] > 0 and not p["accepted"] and "worth_it" not in p]
    if rejected:
        worst = max(rejected, key=lambda p: p["max_d_after"] - p["max_d_before"])
        reason += (
            f"; {len(rejected)} pair(s) held by the acceptance rule (max divergent load "
            f"must fall, or hold while the load gap falls); the worst: max D "
            f"{worst['max_d_before']:.3g} -> {worst['max_d_after']:.3g}, gap "
            f"{worst['gap_before']:.3g} -> {worst['gap_after']:.3g}"
        )
    unpaid = [p for p in pairs if p.get("worth_it") == 0.0]
    if unpaid:
        gain = sum(p["gain_cpu_s"] for p in unpaid)
        cost = sum(p["pause_cpu_s"] for p in unpaid)
        reason += (
            f"; {len(unpaid)} pair(s) held by migration cost: they would remove {gain:.3g} "
            f"CPU-s of overload for {cost:.3g} CPU-s of pauses"
        )
    return reason
