"""Registers every placement method with the controller's registry.

Importing this module makes the names usable with ``--placement``.
"""

from __future__ import annotations

from controller.policy import PLACEMENTS, LeastLoaded

__all__ = ["DEMO_PLACEMENTS", "PLACEMENTS", "LeastLoaded"]

DEMO_PLACEMENTS: tuple[str, ...] = ("least-loaded",)
