"""Partitioners by name, as the CLI and the controller ask for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from partitioners.base import MultiSource
from partitioners.capa import CAPA, ECAPA
from partitioners.consistent_grouping import ConsistentGrouping
from partitioners.dalton import Dalton
from partitioners.dalton_cooperative import DaltonCooperative
from partitioners.dchoices import DChoices, WChoices
from partitioners.key_grouping import KeyGrouping
from partitioners.pkg import PKG
from partitioners.prompt import Prompt
from partitioners.shuffle import Shuffle

__all__ = ["NAMES", "VARIANTS", "make"]

NAMES = (
    "hash",
    "shuffle",
    "pkg",
    "dchoices",
    "wchoices",
    "cg",
    "capa",
    "ecapa",
    "dalton",
    "prompt",
)
VARIANTS = ("capa-cam", "ecapa-mult")
"""Variants ``trimtab partition`` also takes: CAPA's affinity rule, E-CAPA's latency factor."""


def make(
    name: str,
    n: int,
    seed: int = 0,
    sources: int = 1,
    capacities: Any = None,
    latencies: Any = None,
    window: int = 10_000,
    key_space: int = 1024,
) -> Any:
    """A partitioner (with ``sources`` source instances) by name."""
    if n < 1:
        raise ValueError(f"workers: need at least one worker (got {n})")
    if sources < 1:
        raise ValueError(f"sources: need at least one source (got {sources})")

    def one(i: int) -> Any:
        s = seed + i
        if name == "hash":
            return KeyGrouping(n, seed)
        if name == "shuffle":
            return Shuffle(n, s, source_id=i)
        if name == "pkg":
            return PKG(n, s, window=window)
        if name == "dchoices":
            return DChoices(n, s, window=window)
        if name == "wchoices":
            return WChoices(n, s, window=window)
        if name == "cg":
            return ConsistentGrouping(
                n, s, capacities=None if capacities is None else np.asarray(capacities, float)
            )
        if name == "capa":
            return CAPA(n, s, "cm", key_space=key_space, window=window)
        if name == "capa-cam":
            return CAPA(n, s, "cam", key_space=key_space, window=window)
        if name in ("ecapa", "ecapa-mult"):
            mode = "multiplicative" if name == "ecapa-mult" else "additive"
            return ECAPA(n, s, mode=mode, latencies=latencies, key_space=key_space, window=window)
        if name == "dalton":
            return Dalton(n, s, interval=window, key_space=key_space)
        if name == "prompt":
            return Prompt(n, s)
        raise ValueError(
            f"partitioner: unknown name {name!r} (known: {', '.join(NAMES + VARIANTS)})"
        )

    if name == "dalton" and sources > 1:
        return DaltonCooperative(n, seed, sources, window, key_space)
    if sources == 1 or name in ("hash", "prompt"):
        return one(0)
    return MultiSource([one(i) for i in range(sources)])
