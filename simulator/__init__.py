"""The simulated substrate: a vectorized fluid model of a cluster for scenario replay."""

from __future__ import annotations

from simulator.model import Simulator
from simulator.result import SimResult

__all__ = ["SimResult", "Simulator"]
