"""Workload generators: rate processes over ticks and key distributions with hot-key shifts.

Everything is vectorized over ticks or keys and deterministic for a given seed. Rates are
tuples per second; ``rates(scenario)`` is a ``(ticks, streams)`` matrix of arrivals per tick.
Keys are the integers ``0..space-1``; Zipf(s) gives rank r probability proportional to
``1/r^s``, and a hot-key shift rotates which keys hold which ranks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from core.hashing import stable_mod
from core.keyspace import KeySpec
from core.rates import (
    BurstyRate,
    ConstantRate,
    PiecewiseRate,
    RampRate,
    RandomWalkRate,
    RateSpec,
    SineRate,
    StepRate,
    TraceRate,
    read_rate_trace,
)
from core.scenario import Scenario

__all__ = [
    "KeyEpochs",
    "key_epochs",
    "key_group_shares",
    "key_probabilities",
    "mean_key_group_shares",
    "rate_series",
    "rates",
    "sample_keys",
]

Array = NDArray[np.float64]


def rate_series(spec: RateSpec, t_s: Array, rng: np.random.Generator, base_dir: str = ".") -> Array:
    """Rate in tuples/s at each time in ``t_s`` for one stream.

    Examples
    --------
    >>> from core.rates import StepRate
    >>> rate_series(StepRate(kind="step", rate=1, steps=[(2, 5)]), np.arange(4.0),
    ...             np.random.default_rng(0)).tolist()
    [1.0, 1.0, 5.0, 5.0]
    """
    t = np.asarray(t_s, dtype=float)
    if isinstance(spec, ConstantRate):
        return np.full(t.shape, spec.rate)
    if isinstance(spec, StepRate):
        out = np.full(t.shape, spec.rate)
        for at, r in sorted(spec.steps):
            out[t >= at] = r
        return out
    if isinstance(spec, SineRate):
        wave = np.sin(2 * np.pi * (t + spec.phase_s) / spec.period_s)
        return np.clip(spec.base + spec.amplitude * wave, 0.0, None)
    if isinstance(spec, BurstyRate):
        period = spec.on_s + spec.off_s
        jitter = rng.uniform(-spec.jitter, spec.jitter, size=t.shape) * spec.on_s
        phase = np.mod(t + spec.phase_s + jitter, period)
        return np.where(phase < spec.on_s, spec.high, spec.low).astype(float)
    if isinstance(spec, RandomWalkRate):
        steps = rng.normal(0.0, spec.sigma, size=t.shape)
        out = np.empty(t.shape)
        x = spec.start
        span = spec.high - spec.low
        for i, s in enumerate(steps):  # reflection needs the running value; O(ticks) once
            x = x + s
            if span > 0:
                x = spec.low + abs((x - spec.low + span) % (2 * span) - span)
            out[i] = x
        return out
    if isinstance(spec, RampRate):
        frac = np.clip((t - spec.from_s) / max(spec.to_s - spec.from_s, 1e-12), 0.0, 1.0)
        return spec.start + (spec.end - spec.start) * frac
    if isinstance(spec, PiecewiseRate):
        out = np.zeros(t.shape)
        for i, piece in enumerate(spec.pieces):
            end = spec.pieces[i + 1].from_s if i + 1 < len(spec.pieces) else np.inf
            sel = (t >= piece.from_s) & (t < end)
            out[sel] = rate_series(piece.rate, t, rng, base_dir)[sel]
        return out
    if isinstance(spec, TraceRate):
        times, values = read_rate_trace(Path(base_dir) / spec.path)
        return np.interp(t, times, values) * spec.scale
    raise TypeError(f"rate: unsupported rate kind {type(spec).__name__}")


def rates(scenario: Scenario) -> Array:
    """``(ticks, streams)`` expected arrivals per tick (rate x tick length)."""
    t = np.arange(scenario.ticks) * scenario.tick_s
    rng = np.random.default_rng(scenario.seed)
    src = scenario.rate_sources()  # streams that copy another's rows share its series
    own = {
        i: rate_series(scenario.streams[i].rate, t, rng, scenario.base_dir)
        for i in sorted(set(src))
    }
    return np.stack([own[i] for i in src], axis=1) * scenario.tick_s


def key_probabilities(spec: KeySpec, rotation: int = 0) -> Array:
    """Probability of each key 0..space-1; rank r is held by key ``(r + rotation) mod space``.

    Examples
    --------
    >>> from core.keyspace import KeySpec
    >>> key_probabilities(KeySpec(space=3, distribution="zipf", s=1.0)).round(3).tolist()
    [0.545, 0.273, 0.182]
    """
    if spec.distribution == "uniform":
        return np.full(spec.space, 1.0 / spec.space)
    ranks = np.arange(1, spec.space + 1, dtype=float)
    p = ranks**-spec.s
    p /= p.sum()
    return np.roll(p, rotation % spec.space)


class KeyEpochs:
    """Piecewise-constant key distributions of a stream: epoch ``e`` starts at ``starts_s[e]``
    and draws keys from ``probs[e]``. Hot-key shifts start epochs; with ``waves`` so does every
    wave step up to ``until_s`` (``probs_at`` is right at any time, also past ``until_s``)."""

    def __init__(self, spec: KeySpec, until_s: float = 0.0) -> None:
        self.spec = spec
        shifts = sorted(spec.shifts, key=lambda s: s.at_s)
        self._shift_at = np.array([s.at_s for s in shifts])
        self._rotation = np.cumsum([0] + [s.rotate for s in shifts])
        starts = [0.0, *self._shift_at.tolist()]
        if spec.waves is not None:
            step = spec.waves.step
            starts += (np.arange(int(np.ceil(until_s / step))) * step).tolist()
        self.starts_s = np.unique(np.asarray(starts, dtype=float))
        self._classes = (
            stable_mod(np.arange(spec.space), spec.waves.classes, 0)
            if spec.waves is not None
            else None
        )
        self._cache: dict[tuple[int, int], Array] = {}

    def epoch_at(self, t_s: Array) -> NDArray[np.int64]:
        """Epoch index of each time."""
        return np.searchsorted(self.starts_s, np.asarray(t_s), side="right").astype(np.int64) - 1

    @property
    def probs(self) -> list[Array]:
        """The key distribution of every epoch."""
        return [self.probs_at(float(t)) for t in self.starts_s]

    def probs_at(self, t_s: float) -> Array:
        """The key distribution in force at time ``t_s``."""
        rot = int(self._rotation[np.searchsorted(self._shift_at, t_s, side="right")])
        w = self.spec.waves
        step = int(np.floor(t_s / w.step + 1e-9)) if w is not None else 0
        key = (rot, step)
        if key not in self._cache:
            p = key_probabilities(self.spec, rot)
            if w is not None and self._classes is not None:
                mid = (step + 0.5) * w.step / w.period_s
                phase = 2 * np.pi * (mid + np.arange(w.classes) / w.classes)
                p = p * (1.0 + w.depth * np.cos(phase))[self._classes]
                p = p / p.sum()
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = p
        return self._cache[key]


def key_epochs(spec: KeySpec, until_s: float = 0.0) -> KeyEpochs:
    """The key distribution of each interval between hot-key shifts (and wave steps up to
    ``until_s``)."""
    return KeyEpochs(spec, until_s)


def key_group_shares(probs: Array, groups: int, seed: int = 0) -> Array:
    """Share of traffic of each of ``groups`` key groups (key -> group by a stable hash)."""
    kg = stable_mod(np.arange(probs.size), groups, seed)
    return np.bincount(kg, weights=probs, minlength=groups)


def mean_key_group_shares(spec: KeySpec, groups: int, until_s: float) -> Array:
    """Each key group's share of a stream's traffic averaged over ``[0, until_s]``, every
    epoch (hot-key shift, wave step) weighted by its time (what a deployment knows from the
    declared key distribution, before any measurement).

    >>> from core.keyspace import HotKeyShift, KeySpec
    >>> k = KeySpec(space=4, distribution="zipf", s=1.0)
    >>> mean_key_group_shares(k, 2, 10.0).round(3).tolist()
    [0.6, 0.4]
    >>> shifted = k.model_copy(update={"shifts": [HotKeyShift(at_s=5, rotate=1)]})
    >>> mean_key_group_shares(shifted, 2, 10.0).round(3).tolist()  # half the time each way
    [0.44, 0.56]
    """
    ep = key_epochs(spec, until_s)
    starts = ep.starts_s[ep.starts_s < until_s] if until_s > 0 else ep.starts_s[:1]
    ends = np.append(starts[1:], max(until_s, float(starts[-1]) + 1.0))
    weights = (ends - starts) / (ends - starts).sum()
    if starts.size > MEAN_SHARE_EPOCHS:  # a long run of wave steps: a seeded sample of epochs
        pick = np.random.default_rng(0).choice(starts.size, MEAN_SHARE_EPOCHS, p=weights)
        starts, weights = starts[pick], np.full(MEAN_SHARE_EPOCHS, 1.0 / MEAN_SHARE_EPOCHS)
    shares = np.stack([key_group_shares(ep.probs_at(float(t)), groups) for t in starts])
    return np.asarray(weights @ shares, dtype=float)


MEAN_SHARE_EPOCHS = 512  # epochs averaged at most (a month of 4 s wave steps is 648,000)


def sample_keys(probs: Array, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Draw ``size`` keys from the key distribution ``probs`` (vectorized inverse CDF)."""
    cdf = np.cumsum(probs)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), probs.size - 1).astype(
        np.int64
    )
