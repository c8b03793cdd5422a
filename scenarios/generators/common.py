"""What the scenario families share: chains, node lists, the Spark scenarios' keyed count, the
split branches, piecewise rates, and the writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def chain(stream: str, prefix: str, costs: list[float], sel: float = 1.0) -> list[dict[str, Any]]:
    ops, src = [], stream
    for i, c in enumerate(costs):
        oid = f"{prefix}{i}"
        ops.append({"id": oid, "kind": "map", "inputs": [src], "cost_us": c, "selectivity": sel})
        src = oid
    return ops


def nodes(n: int, cap: float = 1.0) -> dict[str, Any]:
    return {"nodes": [{"id": f"n{i}", "capacity": cap, "latency_ms": 1.0} for i in range(n)]}


def count_k(inputs: list[str], cost_us: float) -> dict[str, Any]:
    """The Spark scenarios' keyed windowed count: 8 key groups, 12 s windows sliding by 3 s."""
    return {
        "id": "count_k",
        "kind": "aggregate",
        "inputs": inputs,
        "cost_us": cost_us,
        "key_groups": 8,
        "window": {"size_s": 12, "slide_s": 3},
        "params": {"key": "k", "agg": "count"},
    }


def spark_count_k(
    rate: dict[str, Any], shifts: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Streams and operators of the Spark load-shape scenarios: one zipf stream at ``rate``
    (its hot keys rotating at ``shifts``) into a keyed windowed count (2 ms a row, 8 key
    groups, 12 s windows sliding by 3 s)."""
    keys: dict[str, Any] = {"space": 1000, "distribution": "zipf", "s": 0.8}
    if shifts:
        keys["shifts"] = shifts
    return {
        "streams": [{"id": "s", "rate": rate, "keys": keys}],
        "operators": [count_k(["s"], 2000.0)],
    }


def split_branches(enrich_us: float) -> list[dict[str, Any]]:
    """Stream s parsed once (0.1 ms a row) and split: an enrichment (``enrich_us`` a row) and
    a direct branch (0.1 ms), the operators ``parse``, ``enrich`` and ``direct``."""
    return [
        {"id": "parse", "kind": "map", "inputs": ["s"], "cost_us": 100.0},
        {
            "id": "enrich",
            "kind": "map",
            "inputs": ["parse"],
            "cost_us": enrich_us,
            "params": {"expr": "v * 2"},
        },
        {"id": "direct", "kind": "map", "inputs": ["parse"], "cost_us": 100.0},
    ]


def piecewise(*pieces: tuple[float, dict[str, Any]]) -> dict[str, Any]:
    """A rate made of pieces, each ``(from_s, rate)``."""
    return {"kind": "piecewise", "pieces": [{"from_s": t, "rate": r} for t, r in pieces]}


def write(out: Path, name: str, sc: dict[str, Any]) -> None:
    """``out/NAME.yaml``: the scenario under its schema version and name, keys in order."""
    sc = {"schema_version": 1, "name": name, **sc}
    (out / f"{name}.yaml").write_text(yaml.safe_dump(sc, sort_keys=False, width=100))
