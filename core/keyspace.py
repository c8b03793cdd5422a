"""A stream's key space: its size, its popularity distribution (uniform, or Zipf with exponent
``s``), hot-key shifts that rotate the popularity ranking, and periodic popularity by key class
(``waves``). ``core.workload`` draws keys from it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from core.model_base import STRICT, TrimtabModel

__all__ = ["HotKeyShift", "KeySpec", "KeyWaves"]


class HotKeyShift(TrimtabModel):
    """At ``at_s`` the popularity ranking rotates by ``rotate`` keys (new keys become hot)."""

    model_config = STRICT
    at_s: float = Field(ge=0)
    rotate: int = Field(ge=1)


class KeyWaves(TrimtabModel):
    """Periodic popularity by key class: key k is in class ``pmod(xxhash64(k, 0), classes)``
    and its probability is scaled by ``1 + depth * cos(2 pi (t / period_s + c / classes))``
    (held for ``step_s`` at a time, then renormalised). An operator whose ``key_groups`` is a
    multiple of ``classes`` has each key group in one class, so the groups' loads are periodic
    and out of phase across classes (two classes: anti-phased)."""

    model_config = STRICT
    classes: int = Field(2, ge=2, le=64)
    period_s: float = Field(gt=0)
    depth: float = Field(0.8, ge=0, le=1)
    step_s: float | None = Field(None, gt=0, description="default: period_s / 8")

    @property
    def step(self) -> float:
        return self.step_s if self.step_s is not None else self.period_s / 8


class KeySpec(TrimtabModel):
    """Key space of a stream: size and distribution (uniform, or Zipf with exponent ``s``),
    hot-key shifts and periodic popularity by key class (``waves``)."""

    model_config = STRICT
    space: int = Field(1000, ge=1)
    distribution: Literal["uniform", "zipf"] = "uniform"
    s: float = Field(1.0, ge=0)
    shifts: list[HotKeyShift] = Field(default_factory=list)
    waves: KeyWaves | None = None

    @model_validator(mode="after")
    def _shifts_shift(self) -> KeySpec:
        """A shift rotates the popularity ranking: one with no ranking to rotate, or by a
        whole number of key spaces, changes nothing (it ran, unsaid)."""
        if self.shifts and (self.distribution == "uniform" or self.s == 0):
            raise ValueError(
                "shifts: a uniform key distribution (distribution: uniform, or zipf with s 0) "
                "has no hot keys to shift"
            )
        for i, sh in enumerate(self.shifts):
            if sh.rotate % self.space == 0:
                raise ValueError(
                    f"shifts.{i}.rotate: {sh.rotate} is a whole number of key spaces (space "
                    f"{self.space}): the ranking would not change"
                )
        return self
