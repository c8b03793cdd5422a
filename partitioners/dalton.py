"""Dalton: learned partitioning with one contextual bandit per hot key.

Zapridou, Mytilinis, Ailamaki, "Dalton: Learned Partitioning for Distributed Data Streams",
PVLDB 16(3), 2022 (reference: ezapridou/Dalton ``Dalton``, ``ContextualBandits``,
``HotStatistics``, ``DaltonCooperative``, ``QTableReducer``). Cold keys are hashed (on an engine
whose keys default to a key-group table, ``route_pinned``: to the table's partition, so that
the loads Dalton learns from are the engine's [project choice]). A key is hot
when its count in the current interval exceeds (tuples of the previous interval) / (n div), with
``div`` 1 as in the reference, or the interval's tuples so far when fewer (a detection by share;
[project choice]: the reference's rule hashes a newly hot key until it has a 1/n share of a whole
previous interval, which after a hot-set shift leaves one worker several times the mean). For a
hot key, with probability 1 - epsilon the worker with the best Q is taken (scan from the hash
worker, so ties favour it), otherwise a random worker (only among the key's workers once it is
split ``max_split`` ways). Reward: ``-(0.5 (L_w - mean L) / max(L_w, mean L) + 0.5 kf / n)``
with kf the key's workers this window; ``Q <- (1 - alpha) Q + alpha reward``; Q starts at -2.
``max_split`` grows by one when >= 70% of the interval's hot keys (hot since its start) have
reached it (the reference's rule, there capped at 6), and also, as the load demands, while the
interval's imbalance (busiest worker over the mean, minus 1) stays above ``target_imbalance``
(0.1) and some settled hot key has reached the cap. [Project choice, following the paper's
"is more splitting beneficial?"; the reference's fixed limit of 6 leaves a hot key with 26% of
the tuples on at least 4% of the stream per worker, twice the fair share at 50 workers.] The
cap is bounded by ``n`` and may widen every eighth of an interval (the imbalance rule only). A
hot key's Q-row that is fresh (all Q0) starts from the reward each worker would give at the
current loads [project choice: with Q0 = -2 a newly hot key sticks to its hash worker until
exploration has visited the others, which after every hot-set shift left one worker several
times the mean for many windows; re-measured: zipf-hotkey-shift at 50 workers 0.071 mean
imbalance, was 0.098 with Q0 rows and 1.67 with the reference's fixed cap]. A hot key's row
expires one interval after it stops being hot.

Several cooperating sources: ``partitioners.dalton_cooperative``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from core.hashing import stable_mod
from core.jit import njit
from partitioners.base import IntArray, LocalOnly, as_keys

__all__ = [
    "Dalton",
    "hot_divisor",
    "reduce_weight",
    "reward",
    "update_split_cap",
]

Q0 = -2.0


def reward(load_w: float, load_mean: float, kf: int, n: int) -> float:
    """Dalton's reward for routing to a worker with window load ``load_w``.

    Examples
    --------
    >>> reward(10, 10, 1, 4), reward(20, 10, 2, 4), reward(5, 10, 1, 4)
    (-0.125, -0.5, 0.125)
    """
    cost_map = (load_w - load_mean) / max(load_w, load_mean) if max(load_w, load_mean) > 0 else 0.0
    return -(0.5 * cost_map + 0.5 * kf / n)


def update_split_cap(
    cap: int,
    splits_of_hot: IntArray,
    limit: int = 6,
    frac: float = 0.7,
    imbalance: float = 0.0,
    target: float = float("inf"),
    splits_any: IntArray | None = None,
) -> int:
    """Raise the split cap by one (up to ``limit``) when >= 70% of the settled hot keys
    (``splits_of_hot``) have reached it; when the interval's ``imbalance`` exceeds ``target``
    and some hot key (settled, or any in ``splits_any``) has reached it, widen it in proportion.

    Examples
    --------
    >>> update_split_cap(2, np.array([2] * 7 + [1] * 3)), update_split_cap(2, np.array([2] * 6 + [1] * 4))
    (3, 2)
    >>> update_split_cap(2, np.array([2] + [1] * 9), imbalance=0.5, target=0.1)
    3
    >>> update_split_cap(2, np.array([2] + [1] * 9), limit=10, imbalance=3.0, target=0.1)
    8
    """
    if cap >= limit:
        return cap
    at_cap = splits_of_hot >= cap
    if imbalance > target and (
        at_cap.any() or (splits_any is not None and (splits_any >= cap).any())
    ):
        # the busiest worker is (1 + imbalance) times the mean: split that much wider
        return min(max(cap + 1, math.ceil(cap * (1.0 + imbalance))), limit)
    if at_cap.size and np.mean(at_cap) >= frac - 1e-12:
        return cap + 1
    return cap


def hot_divisor(
    div: int, imbalance: float, target: float, cap: int, limit: int, held: float = 0.0
) -> int:
    """The hot threshold is ``total / (n div)``: ``div`` doubles (up to 100, the reference's DAG
    variant) while the imbalance stays above ``target`` with the split cap at its limit — the
    excess then sits in keys hashed whole — and halves back once it is under ``target / 4``,
    unless the keys that halving would return to their hash worker carry ``held`` (their
    tuples routed elsewhere, over the mean worker load) above ``target``: putting them back
    would undo the balance that keeping them hot bought [project choice: without it, at 2
    workers the hot set flips every other interval between the hottest key and none].

    Examples
    --------
    >>> hot_divisor(1, 0.5, 0.1, 4, 4), hot_divisor(1, 0.5, 0.1, 3, 4), hot_divisor(8, 0.01, 0.1, 4, 4)
    (2, 1, 4)
    >>> hot_divisor(8, 0.01, 0.1, 4, 4, held=0.3)
    8
    """
    if imbalance > target and cap >= limit:
        return min(2 * div, 100)
    if imbalance < target / 4 and held <= target:
        return max(div // 2, 1)
    return div


def reduce_weight(w: float, imbalance: float, target: float) -> float:
    """The reward's weight on fragmentation (``kf / n``): halved (down to 0.05) while the
    imbalance stays above ``target``, doubled back (up to the reference's 0.5) under ``target / 4``.

    At the reference's 0.5 a hot key's exploitation settles where its workers' excess load
    ``(L - mean) / L`` equals ``kf / n``: at 50 workers a key with a quarter of the stream
    rests about 35% over the mean.

    Examples
    --------
    >>> reduce_weight(0.5, 0.3, 0.1), reduce_weight(0.05, 0.3, 0.1), reduce_weight(0.1, 0.01, 0.1)
    (0.25, 0.05, 0.2)
    """
    if imbalance > target:
        return max(w / 2, 0.05)
    if imbalance < target / 4:
        return min(w * 2, 0.5)
    return w


@njit
def _turns_hot(count, st, n):  # pragma: no cover - compiled
    """The threshold: the previous interval's tuples / (n div), or, once 200 tuples of this
    interval are in, those tuples if fewer: a key that turns hot (a new interval, a shifted
    hot set) is detected by its share so far, not hashed for most of an interval."""
    ref = st[1]
    if st[0] >= 200 and (ref == 0 or st[0] < ref):
        ref = st[0]
    return ref > 0 and count >= 10 and count * st[4] > ref / n


@njit
def _warm_row(Q, k, load, n, w_red):  # pragma: no cover - compiled
    """A fresh Q-row (all Q0) starts from the reward each worker would give now (kf = 1)."""
    for q in range(n):
        if Q[k, q] != Q0:
            return
    mean = load.sum() / n
    for q in range(n):
        m = max(load[q], mean)
        cm = (load[q] - mean) / m if m > 0 else 0.0
        Q[k, q] = -((1.0 - w_red) * cm + w_red / n)


@njit
def _route(
    keys, hashw, n, Q, used, kf, load, hot, cnt, off, st, rnd, alpha, eps, interval, w_red
):  # pragma: no cover
    # st: [tuples this interval, tuples previous interval, max_split, interval end flag, hot divisor]
    out = np.empty(keys.size, dtype=np.int64)
    for i in range(keys.size):
        k, h = keys[i], hashw[i]
        cnt[k] += 1
        st[0] += 1
        if not hot[k] and _turns_hot(cnt[k], st, n):
            hot[k] = 1  # becomes hot during the interval
            _warm_row(Q, k, load, n, w_red)
        if hot[k] == 0:
            w = h
        else:
            r = rnd[i]
            if r < eps:
                pick = int(rnd[i] / eps * n) % n
                if kf[k] >= st[2]:  # capped: explore only among the key's workers
                    c = 0
                    target = pick % kf[k]
                    for q in range(n):
                        if used[k, q]:
                            if c == target:
                                pick = q
                                break
                            c += 1
                w = pick
            else:
                w = h
                best = Q[k, h]
                for j in range(1, n):
                    q = (h + j) % n
                    if Q[k, q] > best:
                        best = Q[k, q]
                        w = q
                if kf[k] >= st[2] and not used[k, w]:  # never exceed the split cap
                    w = h if used[k, h] else -1
                    if w < 0:
                        best = -1e18
                        for q in range(n):
                            if used[k, q] and Q[k, q] > best:
                                best = Q[k, q]
                                w = q
        out[i] = w
        off[k] += 1 if w != h else 0
        if not used[k, w]:
            used[k, w] = 1
            kf[k] += 1
        load[w] += 1.0
        if hot[k]:
            mean = load.sum() / n
            m = max(load[w], mean)
            cm = (load[w] - mean) / m if m > 0 else 0.0
            rw = -((1.0 - w_red) * cm + w_red * kf[k] / n)
            Q[k, w] = (1.0 - alpha) * Q[k, w] + alpha * rw
        if st[0] >= interval:
            st[3] = 1
            return out[: i + 1]
    return out


class Dalton(LocalOnly):
    """Dalton for one partitioner instance.

    Parameters
    ----------
    n : workers
    interval : tuples per hot-statistics interval (= window slide)
    key_space : keys are in ``[0, key_space)`` (grows automatically)

    Examples
    --------
    >>> d = Dalton(4, interval=100)
    >>> w = d.route(np.zeros(1000, dtype=np.int64))
    >>> int(d.max_split) >= 2 and len(np.unique(w)) <= 6
    True
    """

    name = "dalton"

    def __init__(
        self,
        n: int,
        seed: int = 0,
        interval: int = 10_000,
        key_space: int = 1024,
        alpha: float = 0.1,
        epsilon: float = 0.1,
        max_split_limit: int | None = None,
        target_imbalance: float = 0.05,
    ) -> None:
        if n < 1:
            raise ValueError(f"n: need at least one worker (got {n})")
        self.n, self.alpha, self.epsilon, self.interval = n, alpha, epsilon, interval
        self.limit = n if max_split_limit is None else min(max_split_limit, n)
        self.target = target_imbalance
        self.w_reduce = 0.5  # the reward's weight on kf / n (the reference's 0.5)
        self.rng = np.random.default_rng([seed, 0xDA1702])  # salted: never the workload's stream
        self._alloc(key_space)
        self.load = np.zeros(n)
        self.st = np.array([0, 0, 2, 0, 1], dtype=np.int64)

    _PER_KEY: ClassVar[
        dict[str, tuple[bool, type, float]]
    ] = {  # per-key state: (row shape suffix, dtype, initial value)
        "Q": (True, np.float64, Q0),
        "used": (True, np.uint8, 0),
        "kf": (False, np.int64, 0),
        "hot": (False, np.uint8, 0),
        "cnt": (False, np.int64, 0),
        "off": (False, np.int64, 0),  # tuples this interval routed away from the hash worker
        "was_hot": (False, np.uint8, 0),
        "start_hot": (False, np.uint8, 0),
    }

    def _alloc(self, size: int) -> None:
        """(Re)allocate the per-key arrays for keys in ``[0, size)``, keeping existing rows."""
        for attr, (per_worker, dtype, init) in self._PER_KEY.items():
            shape = (size, self.n) if per_worker else (size,)
            new = np.full(shape, init, dtype=dtype)
            old = getattr(self, attr, None)
            if old is not None:
                new[: old.shape[0]] = old
            setattr(self, attr, new)

    def __setstate__(self, state: dict) -> None:
        """Unpickle; per-key arrays a state saved by an older version lacks start fresh."""
        self.__dict__.update(state)
        self._alloc(self.Q.shape[0])

    @property
    def max_split(self) -> int:
        """The current split cap."""
        return int(self.st[2])

    def hot_keys(self) -> IntArray:
        """Keys currently hot."""
        return np.flatnonzero(self.hot).astype(np.int64)

    def _end_interval(self) -> None:
        """Interval boundary: split cap, hot set for the next interval, window reset."""
        # the cap rule looks at the keys hot for the whole interval (the hot set installed at
        # its start); keys that crossed the threshold late have had no time to split
        settled = np.flatnonzero(self.start_hot)
        mean = float(self.load.mean())
        imbalance = float(self.load.max()) / mean - 1.0 if mean > 0 else 0.0
        self.st[2] = update_split_cap(
            int(self.st[2]),
            self.kf[settled],
            self.limit,
            imbalance=imbalance,
            target=self.target,
            splits_any=self.kf[self.hot == 1],
        )
        self.w_reduce = reduce_weight(self.w_reduce, imbalance, self.target)
        prev = int(self.st[0])
        thresh = prev / self.n
        leaving = (self.hot == 1) & ~(self.cnt * max(int(self.st[4]) // 2, 1) > thresh)
        held = float(self.off[leaving].sum()) / mean if mean > 0 else 0.0
        self.st[4] = hot_divisor(
            int(self.st[4]), imbalance, self.target, int(self.st[2]), self.limit, held
        )
        now_hot = self.cnt * self.st[4] > thresh
        expire = (self.was_hot == 1) & ~now_hot & (self.hot == 0)
        self.Q[expire] = Q0  # a row expires one interval after its key stops being hot
        fresh = np.flatnonzero(now_hot & (self.Q.max(axis=1) == Q0))
        if fresh.size and mean > 0:  # warm start from the interval's loads, as in _warm_row
            cm = (self.load - mean) / np.maximum(self.load, mean)
            self.Q[fresh] = -((1.0 - self.w_reduce) * cm + self.w_reduce / self.n)
        self.was_hot = self.hot.copy()
        self.hot = now_hot.astype(np.uint8)
        self.start_hot = self.hot.copy()
        self.cnt[:] = 0
        self.off[:] = 0
        self.used[:] = 0
        self.kf[:] = 0
        self.load[:] = 0.0
        self.st[1] = prev
        self.st[0] = 0
        self.st[3] = 0

    def _widen_midway(self) -> None:
        """Every eighth of an interval: widen the split cap if the load already demands it
        (the imbalance rule only; the hot set and the counts wait for the interval's end)."""
        mean = float(self.load.mean())
        if mean <= 0 or self.st[0] < 8 * self.n:
            return
        imbalance = float(self.load.max()) / mean - 1.0
        hot = self.kf[self.hot == 1]
        self.st[2] = update_split_cap(
            int(self.st[2]),
            np.zeros(0, np.int64),
            self.limit,
            imbalance=imbalance,
            target=self.target,
            splits_any=hot,
        )

    def route(self, keys: IntArray, home: IntArray | None = None) -> IntArray:
        """Route one batch in arrival order; ``home`` (per tuple) replaces the hash worker:
        where a cold key goes and where a hot key's scan starts."""
        k = as_keys(keys)
        hw = stable_mod(k, self.n) if home is None else np.asarray(home, np.int64)
        if hw.shape != k.shape or (hw.size and (hw.min() < 0 or hw.max() >= self.n)):
            raise ValueError(f"home: expected one worker in [0, {self.n}) per key")
        if k.size and k.max() >= self.Q.shape[0]:
            self._alloc(int(k.max()) * 2 + 1)
        parts = []
        step = max(1, self.interval // 8)
        while k.size:
            c = k[:step]
            out = _route(
                c,
                hw[:step],
                self.n,
                self.Q,
                self.used,
                self.kf,
                self.load,
                self.hot,
                self.cnt,
                self.off,
                self.st,
                self.rng.random(c.size),
                self.alpha,
                self.epsilon,
                self.interval,
                self.w_reduce,
            )
            parts.append(out)
            k, hw = k[out.size :], hw[out.size :]
            if self.st[3]:
                self._end_interval()
            else:
                self._widen_midway()
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def route_pinned(self, keys: IntArray, home: IntArray, free: np.ndarray) -> IntArray:
        """Route on an engine whose default for a key is ``home`` (the key-group table):
        Dalton's hash worker is that partition, so its loads are the engine's; which keys
        leave it is still Dalton's hot-key detector's call (``free`` is not consulted)."""
        return self.route(keys, home)
