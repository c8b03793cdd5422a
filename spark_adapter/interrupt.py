"""Ctrl-C on a batch run: stop after the batch in progress, then say so in one line.

PySpark's own SIGINT handler cancels every job from inside whatever py4j call the main thread
is blocked in: the call is re-entered, a screen of py4j and JVM traces follows, and the run's
cleanup closed the plan log under the batch that was still committing. Here the first SIGINT
only asks: once the batch in progress has committed, the query is stopped (from another
thread, while the query thread is between batches) and the run raises :class:`Interrupted`.
A second SIGINT interrupts at once, as Python's default does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Interrupted", "StopRequest", "sigint_asks"]


class Interrupted(Exception):
    """A run that SIGINT stopped after a committed batch (the command line prints it as its
    one line, with ``exit_code``, 128 + SIGINT, as a shell reports an interrupted command)."""

    exit_code = 130


class StopRequest:
    """A stop asked by SIGINT, carried out at a batch boundary."""

    def __init__(self, query: Any = None) -> None:
        self.asked = threading.Event()
        self.query = query  # the running query; None once it has been told to stop
        self.stopped = False

    def after_batch(self) -> None:
        """Called as each batch ends: stop the query if a stop was asked."""
        if self.asked.is_set() and self.query is not None:
            query, self.query, self.stopped = self.query, None, True
            threading.Thread(target=query.stop, name="trimtab-stop", daemon=True).start()


@contextlib.contextmanager
def sigint_asks(stop: StopRequest) -> Iterator[None]:
    """While inside, a SIGINT sets ``stop.asked`` and a second raises KeyboardInterrupt (in the
    main thread only: a signal handler cannot be set from another)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum: int, frame: Any) -> None:
        if stop.asked.is_set():
            raise KeyboardInterrupt
        stop.asked.set()

    old = signal.signal(signal.SIGINT, ask)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
