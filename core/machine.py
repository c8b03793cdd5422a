"""Facts about this machine that bound what an input may ask of it."""

from __future__ import annotations

import os

__all__ = ["machine_memory"]


def machine_memory() -> int:
    """This machine's physical memory, bytes.

    >>> machine_memory() > 1 << 20
    True
    """
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
