"""A process named by its pid and start time stays named across a change of the clock."""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from spark_adapter.pids import process_start, same_process


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's btime")
def test_a_clock_step_does_not_make_a_running_process_another(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The kernel's boot time (``btime``, whole seconds) follows the wall clock: a step or a
    slew across a second moves it, and with it psutil's epoch start time of every process.
    A record taken before the step still names the running process after it; a record of
    another start time still does not."""
    from psutil import _pslinux

    me = os.getpid()
    record = process_start(me)
    real = _pslinux.boot_time
    before = psutil.Process(me).create_time()
    monkeypatch.setattr(_pslinux, "boot_time", lambda: real() + 1.0)  # the clock stepped 1 s
    assert psutil.Process(me).create_time() == pytest.approx(before + 1.0)  # psutil's moved
    assert same_process(me, record)
    assert not same_process(me, round(record + 1.0, 2))  # type: ignore[operator]
