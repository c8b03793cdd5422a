"""CAPA (cardinality- and affinity-aware partitioning) and the node-aware E-CAPA extension.

Katsipoulakis, Labrinidis, Chrysanthis, "A Holistic View of Stream Partitioning Costs",
PVLDB 10(11), 2017; decide rules as re-implemented in ezapridou/Dalton (``CM``, ``cAM``).
Each key has two candidates (as PKG). Over a sliding window of slides (exact per-slide key
counts):

* **CM**: the candidate holding fewer distinct keys in the window;
* **cAM**: a candidate that already holds the key (first, then second), else the one with
  fewer tuples in the window (hash-like, no merge needed);
* **E-CAPA** (project seed paper): CM with the node's measured latency added, in
  key-equivalents ``(L_i / min L - 1) * mean cardinality`` (``mode="additive"``), or
  multiplicatively ``card_i * L_i / min L``. Latencies are measured, through ``feedback``: on
  Spark, the partitions' busy seconds per row from each batch's statistics, smoothed
  (``partitioners.micro_batch.NodeSpeeds``), which is the probe an engine gives for free; in
  the offline side-by-side replay, the seed's identical-probe protocol (``ProbeLatency``:
  median of 5, re-probed when workers change or a run exceeds 1.5x the running median) over
  the scenario's node latencies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.jit import njit
from partitioners.base import Array, IntArray, LocalOnly, as_keys, candidates

__all__ = ["CAPA", "ECAPA", "ProbeLatency", "completion_time"]


@njit
def _route(
    cand, keys, mode, cnt, card, tup, ring_k, ring_w, ring_len, pos, slide, lat_term, mult
):  # pragma: no cover
    # mode: 0 = CM, 1 = cAM, 2 = E-CAPA additive, 3 = E-CAPA multiplicative
    out = np.empty(keys.size, dtype=np.int64)
    n_slides = ring_len.size
    for i in range(keys.size):
        k = keys[i]
        a, b = cand[i, 0], cand[i, 1]
        if mode == 1:
            if cnt[k, a] > 0:
                w = a
            elif cnt[k, b] > 0:
                w = b
            else:
                w = a if tup[a] <= tup[b] else b
        else:
            sa, sb = float(card[a]), float(card[b])
            if mode == 2:
                sa += lat_term[a]
                sb += lat_term[b]
            elif mode == 3:
                sa *= mult[a]
                sb *= mult[b]
            w = a if sa <= sb else b
        out[i] = w
        if cnt[k, w] == 0:
            card[w] += 1
        cnt[k, w] += 1
        tup[w] += 1
        s = pos[0]
        ring_k[s, ring_len[s]] = k
        ring_w[s, ring_len[s]] = w
        ring_len[s] += 1
        if ring_len[s] == slide:  # advance: the oldest slide expires
            s = (s + 1) % n_slides
            pos[0] = s
            for j in range(ring_len[s]):
                kk, ww = ring_k[s, j], ring_w[s, j]
                cnt[kk, ww] -= 1
                tup[ww] -= 1
                if cnt[kk, ww] == 0:
                    card[ww] -= 1
            ring_len[s] = 0
    return out


class CAPA(LocalOnly):
    """CAPA for one source: ``variant`` is ``"cm"`` or ``"cam"``.

    Parameters
    ----------
    n : workers
    key_space : keys are in ``[0, key_space)`` (grows automatically)
    window : tuples per window; ``slides`` slides per window

    Examples
    --------
    >>> c = CAPA(4, variant="cam")
    >>> w = c.route(np.array([5, 5, 5, 9]))
    >>> bool(w[0] == w[1] == w[2])
    True
    """

    name = "capa"

    def __init__(
        self,
        n: int,
        seed: int = 0,
        variant: str = "cm",
        key_space: int = 1024,
        window: int = 10_000,
        slides: int = 4,
    ) -> None:
        if variant not in ("cm", "cam"):
            raise ValueError(f"variant: expected 'cm' or 'cam', got {variant!r}")
        self.n = n
        self.mode = 0 if variant == "cm" else 1
        self.slide = max(1, window // slides)
        self.cnt = np.zeros((key_space, n), dtype=np.int32)
        self.card = np.zeros(n, dtype=np.int64)
        self.tup = np.zeros(n, dtype=np.int64)
        self.ring_k = np.zeros((slides, self.slide), dtype=np.int64)
        self.ring_w = np.zeros((slides, self.slide), dtype=np.int64)
        self.ring_len = np.zeros(slides, dtype=np.int64)
        self.pos = np.zeros(1, dtype=np.int64)
        self.lat_term = np.zeros(n)
        self.mult = np.ones(n)

    def cardinalities(self) -> IntArray:
        """Distinct keys per worker in the current window."""
        return self.card.copy()

    def route(self, keys: IntArray) -> IntArray:
        """Route one batch in arrival order."""
        k = as_keys(keys)
        if k.size and k.max() >= self.cnt.shape[0]:
            grown = np.zeros((int(k.max()) * 2 + 1, self.n), dtype=np.int32)
            grown[: self.cnt.shape[0]] = self.cnt
            self.cnt = grown
        if self.n == 1:
            return np.zeros(k.size, dtype=np.int64)
        return _route(
            candidates(k, self.n, 2),
            k,
            self.mode,
            self.cnt,
            self.card,
            self.tup,
            self.ring_k,
            self.ring_w,
            self.ring_len,
            self.pos,
            self.slide,
            self.lat_term,
            self.mult,
        )


class ECAPA(CAPA):
    """E-CAPA: CM with the measured node latency in the score."""

    name = "ecapa"

    def __init__(
        self,
        n: int,
        seed: int = 0,
        mode: str = "additive",
        latencies: Array | None = None,
        **kw: int,
    ) -> None:
        super().__init__(n, seed, "cm", **kw)
        if mode not in ("additive", "multiplicative"):
            raise ValueError(f"mode: expected 'additive' or 'multiplicative', got {mode!r}")
        self.mode = 2 if mode == "additive" else 3
        self.latencies = np.ones(n)
        if latencies is not None:
            self.feedback(latencies=latencies)

    def feedback(
        self,
        loads: Array | None = None,
        capacities: Array | None = None,
        latencies: Array | None = None,
    ) -> None:
        """Adopt measured per-node latencies (e.g. from ``ProbeLatency``)."""
        if latencies is None:
            return
        lat = np.asarray(latencies, float)
        if lat.size != self.n or np.any(lat <= 0) or not np.all(np.isfinite(lat)):
            raise ValueError(f"latencies: need {self.n} positive finite values")
        self.latencies = lat
        self.mult = lat / lat.min()
        self._update_term()

    def _update_term(self) -> None:
        mean_card = max(float(self.card.mean()), 1.0)
        self.lat_term = (self.mult - 1.0) * mean_card

    def route(self, keys: IntArray) -> IntArray:
        """Route one batch; the key-equivalent latency term follows the mean cardinality."""
        self._update_term()
        return super().route(keys)


def completion_time(work: Array, latencies: Array, unit_time: float = 0.4) -> float:
    """Completion time of a split of work under ``T_i = unit_time * L_i * w_i`` (the seed's model).

    Examples
    --------
    >>> completion_time(np.array([5.0, 5.0]), np.array([10.0, 2.0])), completion_time(np.array([4.0, 6.0]), np.array([10.0, 2.0]))
    (20.0, 16.0)
    """
    return float(np.max(unit_time * np.asarray(latencies) * np.asarray(work)))


class ProbeLatency:
    """Per-node latency from an identical probe task: median of 5 runs, re-probed on change.

    ``probe(worker) -> seconds`` is supplied by the caller; the offline replay
    (``controller.partition``) times the scenario's node latencies with it. On Spark no probe
    task runs: the batches' own busy time per row is the measurement.
    """

    def __init__(self, probe: Callable[[int], float], runs: int = 5, over: float = 1.5) -> None:
        self.probe, self.runs, self.over = probe, runs, over
        self.workers: tuple[int, ...] = ()
        self.latency: dict[int, float] = {}
        self.probes = 0

    def measure(self, workers: Sequence[int]) -> Array:
        """Probe every worker ``runs`` times; latencies in worker order."""
        self.workers = tuple(workers)
        for w in self.workers:
            self.latency[w] = float(np.median([self.probe(w) for _ in range(self.runs)]))
            self.probes += self.runs
        return np.array([self.latency[w] for w in self.workers])

    def needs_probe(self, workers: Sequence[int], run_time: dict[int, float] | None = None) -> bool:
        """True when workers joined or left, or a run took over 1.5x its node's median."""
        if tuple(workers) != self.workers:
            return True
        return any(t > self.over * self.latency.get(w, np.inf) for w, t in (run_time or {}).items())
