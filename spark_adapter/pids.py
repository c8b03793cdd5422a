"""A process named by its pid and its start time, so a recycled pid is never taken for it.

A file that records a pid (``app.json``'s driver, ``cluster.json``'s master and workers)
outlives the process: after it exits, or after a reboot, the system may give the pid to any
other process. Whoever signals a recorded pid first checks that the process holding it now
started when the recorded one did (``same_process``).
"""

from __future__ import annotations

import psutil

__all__ = ["process_start", "same_process"]


def process_start(pid: int) -> float | None:
    """When ``pid`` started, in seconds since boot (to 10 ms); None when it is not running.

    Not psutil's epoch time: that is this boot-relative start plus the boot time, which the
    kernel derives from the wall clock and gives in whole seconds, so a clock step, or an NTP
    slew across a second, moved it by a second or more, and a running process no longer
    matched its record (``trimtab inject`` once took a running replay's driver for exited).
    Only a recycled pid that started at the same 10 ms after a later boot would match.

    >>> import os
    >>> process_start(os.getpid()) == process_start(os.getpid()) is not None
    True
    """
    try:
        for _ in range(3):  # the boot time read on both sides of the start it is part of
            boot = psutil.boot_time()
            start = psutil.Process(pid).create_time()
            if psutil.boot_time() == boot:
                return round(start - boot, 2)
        return round(start - boot, 2)
    except psutil.Error:
        return None


def same_process(pid: int, started: float | None) -> bool:
    """``pid`` runs and is the process recorded as started at ``started`` (None: a record
    without a start time, from before it was kept: any process holding the pid).

    >>> import os
    >>> same_process(os.getpid(), process_start(os.getpid())), same_process(os.getpid(), 1.0)
    (True, False)
    """
    now = process_start(pid)
    return now is not None and (started is None or now == started)
