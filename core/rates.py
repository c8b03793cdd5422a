"""Rate processes of a stream, as a scenario file declares them (tuples per second).

``constant``, ``step``, ``sine``, ``bursty``, ``random_walk``, ``ramp``, ``trace`` (a CSV file
``t_s,rate``, checked by ``read_rate_trace``) and ``piecewise`` (other processes, each from a
time on: a drift). ``core.workload.rate_series`` evaluates them.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from core.files import file_problem, text_encoding
from core.model_base import STRICT, TrimtabModel

__all__ = [
    "RATE_KINDS",
    "BurstyRate",
    "ConstantRate",
    "PiecewiseRate",
    "RampRate",
    "RandomWalkRate",
    "RatePiece",
    "RateSpec",
    "SineRate",
    "StepRate",
    "TraceRate",
    "read_rate_trace",
]

RATE_KINDS = ("constant", "step", "sine", "bursty", "random_walk", "ramp", "trace", "piecewise")


class ConstantRate(TrimtabModel):
    """A constant rate in tuples/s."""

    model_config = STRICT
    kind: Literal["constant"]
    rate: float = Field(ge=0)


class StepRate(TrimtabModel):
    """A piecewise-constant rate: ``steps`` of (at_s, rate), starting from ``rate``."""

    model_config = STRICT
    kind: Literal["step"]
    rate: float = Field(ge=0)
    steps: list[tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]]]


class SineRate(TrimtabModel):
    """``base + amplitude * sin(2 pi (t + phase_s) / period_s)``, clipped at 0."""

    model_config = STRICT
    kind: Literal["sine"]
    base: float = Field(ge=0)
    amplitude: float = Field(ge=0)
    period_s: float = Field(gt=0)
    phase_s: float = 0.0


class BurstyRate(TrimtabModel):
    """On/off bursts: ``high`` for ``on_s`` then ``low`` for ``off_s``, with a random phase jitter."""

    model_config = STRICT
    kind: Literal["bursty"]
    low: float = Field(ge=0)
    high: float = Field(ge=0)
    on_s: float = Field(gt=0)
    off_s: float = Field(gt=0)
    phase_s: float = 0.0
    jitter: float = Field(0.0, ge=0, le=1)


class RandomWalkRate(TrimtabModel):
    """A reflected Gaussian random walk around ``start`` with step std ``sigma`` per second."""

    model_config = STRICT
    kind: Literal["random_walk"]
    start: float = Field(ge=0)
    sigma: float = Field(ge=0)
    low: float = Field(0.0, ge=0)
    high: float = Field(gt=0)


class RampRate(TrimtabModel):
    """A linear ramp from ``start`` to ``end`` between ``from_s`` and ``to_s``."""

    model_config = STRICT
    kind: Literal["ramp"]
    start: float = Field(ge=0)
    end: float = Field(ge=0)
    from_s: float = Field(0.0, ge=0)
    to_s: float = Field(gt=0)


def read_rate_trace(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A rate trace file: CSV with the header ``t_s,rate``, at least two rows, times
    increasing, rates finite and not negative. ``ValueError`` says what is wrong, and where.
    """
    if (problem := file_problem(path)) is not None:
        raise ValueError(f"trace {problem}")
    try:  # a spreadsheet's or PowerShell's byte-order mark is not part of the header
        lines = path.read_bytes().decode(enc := text_encoding(path)).splitlines()
    except UnicodeDecodeError as e:
        kind = "UTF-16" if enc == "utf-16" else "UTF-8"
        raise ValueError(f"{path}: not {kind} text ({e.reason} at byte {e.start})") from None
    header = [h.strip() for h in lines[0].split(",")] if lines else []
    if header != ["t_s", "rate"]:
        raise ValueError(f"{path}: the header must be t_s,rate (got {','.join(header) or 'none'})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # an empty file: said below
            data = np.loadtxt(lines[1:], delimiter=",", ndmin=2)
    except ValueError as e:
        raise ValueError(f"{path}: not numbers: {e}") from None
    if data.shape[0] < 2 or data.shape[1] != 2:
        raise ValueError(f"{path}: needs at least two rows of t_s,rate (got {data.shape[0]})")
    t, r = data[:, 0], data[:, 1]
    if not (np.isfinite(data).all() and (r >= 0).all()):
        raise ValueError(f"{path}: times and rates must be finite, rates not negative")
    if (np.diff(t) <= 0).any():
        row = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 2
        raise ValueError(f"{path}: t_s must increase (row {row}: {t[row - 1]})")
    return t, r


class TraceRate(TrimtabModel):
    """A rate trace from a CSV file with columns ``t_s,rate`` (relative to the scenario file)."""

    model_config = STRICT
    kind: Literal["trace"]
    path: str
    scale: float = Field(1.0, gt=0)


SimpleRate = Annotated[
    ConstantRate | StepRate | SineRate | BurstyRate | RandomWalkRate | RampRate | TraceRate,
    Field(discriminator="kind"),
]


class RatePiece(TrimtabModel):
    """One piece of a piecewise rate: ``rate`` from ``from_s`` on."""

    model_config = STRICT
    from_s: float = Field(ge=0)
    rate: SimpleRate


class PiecewiseRate(TrimtabModel):
    """A rate process that changes at given times (a drift): each piece holds from its
    ``from_s`` until the next piece's. The first piece starts at 0."""

    model_config = STRICT
    kind: Literal["piecewise"]
    pieces: list[RatePiece] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> PiecewiseRate:
        starts = [p.from_s for p in self.pieces]
        if starts[0] != 0:
            raise ValueError(f"pieces.0.from_s: the first piece starts at 0 (got {starts[0]})")
        if any(b <= a for a, b in itertools.pairwise(starts)):
            raise ValueError(f"pieces: from_s must increase (got {starts})")
        return self


RateSpec = Annotated[
    ConstantRate
    | StepRate
    | SineRate
    | BurstyRate
    | RandomWalkRate
    | RampRate
    | TraceRate
    | PiecewiseRate,
    Field(discriminator="kind"),
]
