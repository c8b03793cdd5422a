"""A live partitioner steering a micro-batch engine: the partitioner that is named routes.

On a micro-batch engine (Spark) the driver sees each batch's key counts before the next batch
is routed. The driver keeps one instance of the chosen partitioner (``registry.make``) across
batches, so its own state lives on between rounds: PKG's and D-/W-Choices' load estimates and
heads, Consistent Grouping's virtual workers, CAPA's and E-CAPA's cardinalities and speeds,
Dalton's Q-tables and hot statistics, Prompt's batch plan. Each round (``step``):

1. **Sample.** The batch's counts become a bounded sample in arrival order
   (``arrival_sample``): at most ``budget`` tuples; each key's count is scaled by
   ``budget / total`` and rounded up or down by a stable hash of (key, batch), so the cold
   tail keeps its mass in expectation; the tuples are interleaved by a permutation seeded with
   (seed, batch). [Project choice: the engine's statistics hold counts per key, not the
   arrival order.]
2. **Route.** The partitioner routes the sample with its own kernel and state. A partitioner
   whose rule depends on where the engine puts the keys it leaves alone (``route_pinned``:
   Dalton hashes cold keys and learns from the loads that makes; Prompt plans whole batches)
   is told each key's home partition (the key-group table) and which keys it may move
   (those of step 3); the others keep their own hash, as offline.
3. **Quotas.** The keys with a share of at least ``min_share`` (default ``1 / (20 n)``),
   hottest first and at most ``max_keys``, are routed as the partitioner assigned them: a key
   it split gets the fraction of its sample tuples per worker (fractions under 1% folded into
   the others), a key it kept whole gets its one worker (the caller drops those that agree
   with the key-group table). Every other key follows the key-group table, which placement
   decides. [Project choice: a cold key's routing is placement's, and splitting it would cost
   a merge per window for a negligible gain in balance.]
4. **Feedback.** Measured rows per partition are the loads; measured speeds (rows per busy
   second, smoothed over batches by ``NodeSpeeds``) the capacities; busy seconds per row the
   latencies (E-CAPA's probe on an engine is this measurement).

A round's output depends only on the state before it and the batch's counts, so a restored
state routes alike; ``dump``/``load`` serialise it (a zlib-compressed pickle) for the plan.
"""

from __future__ import annotations

import base64
import hashlib
import pickle
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from core.hashing import stable_mod, stable_uniform
from partitioners.registry import NAMES, make

__all__ = [
    "MicroBatchRouter",
    "NodeSpeeds",
    "Quotas",
    "arrival_index",
    "arrival_sample",
    "fold_key",
    "quotas_from_routing",
]

IntArray = NDArray[np.int64]
Array = NDArray[np.float64]
Quotas = dict[int, tuple[tuple[int, float], ...]]

WHOLE = ("hash", "shuffle")  # no hot-key quotas: hash keeps keys whole, shuffle is round-robin
_FOLD = 1 << 20  # keys at or above are folded into [_FOLD, 2 _FOLD) for per-key state arrays


def fold_key(keys: IntArray) -> IntArray:
    """Keys below 2^20 as they are, the others folded into [2^20, 2^21) (stably): a
    partitioner's per-key state arrays stay small whatever the key space.

    >>> fold_key(np.array([3, 1 << 40])).tolist()[0], bool(fold_key(np.array([1 << 40]))[0] >= 1 << 20)
    (3, True)
    """
    return np.where(keys < _FOLD, keys, _FOLD + stable_mod(keys, _FOLD))


def arrival_sample(
    keys: IntArray, counts: Array, budget: int, batch: int, seed: int = 0
) -> IntArray:
    """At most about ``budget`` tuples in an arrival order, with the counts' proportions.

    Examples
    --------
    >>> s = arrival_sample(np.array([7, 9]), np.array([3.0, 1.0]), 100, batch=0)
    >>> sorted(s.tolist())
    [7, 7, 7, 9]
    >>> big = arrival_sample(np.arange(1000), np.full(1000, 50.0), 10_000, batch=1)
    >>> 9_000 < big.size < 11_000
    True
    """
    keys = np.asarray(keys, np.int64)
    return keys[arrival_index(keys, counts, budget, batch, seed)]


def arrival_index(
    keys: IntArray, counts: Array, budget: int, batch: int, seed: int = 0
) -> IntArray:
    """``arrival_sample``'s tuples as indices into ``keys`` (to carry per-key data along)."""
    counts = np.asarray(counts, float)
    total = float(counts.sum())
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    scaled = counts * min(1.0, budget / total)
    frac = scaled - np.floor(scaled)
    up = stable_uniform(np.asarray(keys, np.int64) ^ np.int64(batch), seed=seed + 0x5A17) < frac
    reps = (np.floor(scaled) + up).astype(np.int64)
    seq = np.repeat(np.arange(len(counts), dtype=np.int64), reps)
    return np.random.default_rng([seed, batch, 0x0A11]).permutation(seq)


def _hottest(tot: Array, size: int, min_share: float, max_keys: int) -> IntArray:
    """Indices of the keys with a share of at least ``min_share``, hottest first, at most
    ``max_keys``: the keys the engine lets the partitioner route."""
    idx = np.flatnonzero(tot / size >= min_share)
    return idx[np.argsort(-tot[idx], kind="stable")][:max_keys]


def quotas_from_routing(
    sample: IntArray,
    workers: IntArray,
    n: int,
    min_share: float,
    max_keys: int,
    min_fraction: float = 0.01,
) -> Quotas:
    """The partitioner's assignment of the keys with a share >= ``min_share``, hottest first:
    a split key's fractions per worker, a whole key's one worker.

    Examples
    --------
    >>> k = np.array([1, 1, 1, 1, 2, 2, 3])
    >>> w = np.array([0, 1, 1, 1, 0, 0, 1])
    >>> quotas_from_routing(k, w, 2, 0.2, 8)
    {1: ((0, 0.25), (1, 0.75)), 2: ((0, 1.0),)}

    A worker's fraction under ``min_fraction`` is dropped and the rest renormalised:

    >>> quotas_from_routing(np.ones(200, np.int64), np.r_[np.zeros(199), 1].astype(int), 2, 0.2, 8)
    {1: ((0, 1.0),)}
    """
    if sample.size == 0:
        return {}
    uk, inv = np.unique(sample, return_inverse=True)
    per = np.zeros((uk.size, n))
    np.add.at(per, (inv, workers), 1.0)
    tot = per.sum(axis=1)
    idx = _hottest(tot, sample.size, min_share, max_keys)
    out: Quotas = {}
    for i in idx:
        f = per[i] / tot[i]
        f = np.where(f >= min_fraction, f, 0.0)
        f /= f.sum()
        pids = np.flatnonzero(f)
        out[int(uk[i])] = tuple((int(p), float(f[p])) for p in pids)
    return out


@dataclass
class NodeSpeeds:
    """Per-partition speed measured from the batches: rows per busy second, smoothed.

    ``alpha`` weighs the newest batch; a partition with fewer than ``min_rows`` rows in a batch
    keeps its previous estimate (its busy time is mostly fixed cost).
    """

    n: int
    alpha: float = 0.3
    min_rows: int = 50
    per_row_s: Array = field(default_factory=lambda: np.zeros(0))

    def update(self, rows: Array, busy_s: Array) -> None:
        """Fold one batch's rows and busy seconds per partition into the estimate."""
        rows, busy = np.asarray(rows, float), np.asarray(busy_s, float)
        if rows.size != self.n or busy.size != self.n:
            return
        ok = (rows >= self.min_rows) & (busy > 0)
        cost = np.divide(busy, rows, out=np.zeros(self.n), where=ok)
        if self.per_row_s.size != self.n:
            self.per_row_s = np.zeros(self.n)
        fresh = ok & (self.per_row_s <= 0)
        self.per_row_s = np.where(fresh, cost, self.per_row_s)
        blend = ok & ~fresh
        self.per_row_s = np.where(
            blend, (1 - self.alpha) * self.per_row_s + self.alpha * cost, self.per_row_s
        )

    @property
    def known(self) -> bool:
        """True once every partition has an estimate."""
        return self.per_row_s.size == self.n and bool((self.per_row_s > 0).all())

    def capacities(self) -> Array:
        """Relative speeds, mean 1 (rows per busy second, normalised)."""
        if not self.known:
            return np.ones(self.n)
        speed = 1.0 / self.per_row_s
        return speed / speed.mean()


class MicroBatchRouter:
    """One live instance of partitioner ``name`` for ``n`` partitions, stepped per batch."""

    def __init__(
        self,
        name: str,
        n: int,
        seed: int = 0,
        budget: int = 20_000,
        min_share: float | None = None,
        max_keys: int = 64,
        key_space: int = 1 << 16,
    ) -> None:
        if name not in NAMES:
            raise ValueError(f"partitioner: unknown name {name!r} (known: {', '.join(NAMES)})")
        self.name, self.n, self.seed, self.budget = name, n, seed, budget
        self.min_share = 1.0 / (20 * n) if min_share is None else min_share
        self.max_keys = max_keys
        self.speeds = NodeSpeeds(n)
        self.rounds = 0
        self.partitioner: Any = (
            None
            if name in WHOLE
            else make(name, n, seed, window=budget, key_space=min(key_space, 2 * _FOLD))
        )

    def step(
        self, keys: IntArray, counts: Array, batch: int, home: IntArray | None = None
    ) -> Quotas:
        """Quotas for the next batch from batch ``batch``'s key counts; ``home`` (per key)
        is the partition the engine gives a key the quotas leave alone (the key-group
        table), for partitioners whose rule depends on it (``route_pinned``: Dalton,
        Prompt)."""
        self.rounds += 1
        if self.partitioner is None or len(keys) == 0 or self.n < 2:
            return {}
        keys = np.asarray(keys, np.int64)
        idx = arrival_index(keys, np.asarray(counts, float), self.budget, batch, self.seed)
        sample = keys[idx]
        folded = fold_key(sample)
        pinned = getattr(self.partitioner, "route_pinned", None)
        if home is not None and pinned is not None and sample.size:
            _, inv, tot = np.unique(sample, return_inverse=True, return_counts=True)
            free = np.zeros(tot.size, dtype=bool)
            free[_hottest(tot.astype(float), sample.size, self.min_share, self.max_keys)] = True
            routed = pinned(folded, np.asarray(home, np.int64)[idx], free[inv])
        else:
            routed = self.partitioner.route(folded)
        workers = np.asarray(routed, dtype=np.int64)
        return quotas_from_routing(sample, workers, self.n, self.min_share, self.max_keys)

    def feedback(self, rows: Array, busy_s: Array) -> None:
        """One batch's measured rows and busy seconds per partition: speeds, then the
        partitioner's feedback (loads, capacities, latencies)."""
        self.speeds.update(rows, busy_s)
        if self.partitioner is None or not self.speeds.known:
            return
        self.partitioner.feedback(
            np.asarray(rows, float), self.speeds.capacities(), self.speeds.per_row_s * 1e3
        )

    def state_digest(self) -> str:
        """A digest of the state's content, attribute by attribute (two routers with equal
        digests route alike; pickled bytes can differ by object sharing alone)."""
        h = hashlib.sha1()
        for obj in (self, self.partitioner, self.speeds):
            for k, v in sorted(vars(obj).items() if obj is not None else ()):
                if k not in ("partitioner", "speeds"):
                    h.update(k.encode() + pickle.dumps(v))
        return h.hexdigest()[:12]

    def dump(self) -> str:
        """The router's whole state (partitioner included) as text for the plan."""
        return base64.b64encode(zlib.compress(pickle.dumps(self), 6)).decode("ascii")

    @staticmethod
    def load(text: str) -> MicroBatchRouter:
        """A router restored from ``dump``'s text (a plan this deployment wrote)."""
        obj = pickle.loads(zlib.decompress(base64.b64decode(text)))
        if not isinstance(obj, MicroBatchRouter):
            raise ValueError("routing.state: not a partitioner state")
        return obj
