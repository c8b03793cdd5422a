"""Ctrl-C on a batch run: stop after the batch in progress, then say so in one line.

PySpark's own SIGINT handler cancels every job from inside whatever py4j call the main thread
is blocked in: the call is re-entered, a screen of py4j and JVM traces follows, and the run's
cleanup closed the plan log under the batch that was still committing. Here the first SIGINT
only asks: once the batch in progress has committed, the query is stopped (from another
thread, while the query thread is between batches) and the run raises :class:`Interrupted`.
A second SIGINT interrupts at once, as Python's default does.

SIGTERM (``kill PID``, a job runner ending the command) is taken the same way, and the command
exits 143 where a Ctrl-C exits 130: it killed the process at once, leaving a replay's
temporary working directory (its input log, plans and output) behind, and the JVM printing a
NullPointerException trace as it shut down under the running query. A SIGTERM sent to the
whole process group (``timeout``) also reaches the JVM, which then stops Spark itself.

Outside a batch run, a Spark command holds a Ctrl-C the same way (``sigint_held``): while the
JVM starts, a Python interrupted in ``launch_gateway`` left the JVM to print its own trace; once
PySpark's context is up, its handler fired inside a py4j call. A held Ctrl-C is carried out at
the next safe point (``stop_if_asked``): the session started, the first batch about to run, a
standby's wait for the lease.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "Interrupted",
    "StopRequest",
    "asked",
    "holding_sigint",
    "reclaim_sigint",
    "sigint_asks",
    "sigint_held",
    "stop_if_asked",
]


class Interrupted(Exception):
    """A run that SIGINT or SIGTERM stopped at a safe point (the command line prints it as its
    one line, with ``exit_code``, 128 + the signal, as a shell reports an interrupted command)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.exit_code = 128 + _signal[0]


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


_asked = threading.Event()  # a first Ctrl-C, held for the next safe point
_signal = [int(signal.SIGINT)]  # the signal that asked last
STOPS = (signal.SIGINT, signal.SIGTERM)


def _hold(signum: int, frame: Any) -> None:
    if _asked.is_set():
        raise KeyboardInterrupt
    _signal[0] = signum
    _asked.set()


def _handle(handler: Any) -> dict[int, Any]:
    """``handler`` for SIGINT and SIGTERM; the handlers it replaced."""
    return {s: signal.signal(s, handler) for s in STOPS}


def _restore(old: dict[int, Any]) -> None:
    for s, h in old.items():
        signal.signal(s, h)


def asked() -> bool:
    """Whether a held Ctrl-C waits to be carried out."""
    return _asked.is_set()


def stop_if_asked(message: str) -> None:
    """At a safe point: raise :class:`Interrupted` with ``message`` if a Ctrl-C was held."""
    if _asked.is_set():
        raise Interrupted(message)


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """While inside (main thread only), a first SIGINT or SIGTERM is held (``asked``) and a
    second raises KeyboardInterrupt; the outermost one forgets it as it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = _handle(_hold)
    try:
        yield
    finally:
        _restore(old)
        if old[signal.SIGTERM] is not _hold:  # the outermost: a held stop was carried out
            _asked.clear()  # or came too late


def holding_sigint(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside ``sigint_held``: a Spark command from its session's start to its end."""

    @functools.wraps(fn)
    def held(*args: P.args, **kwargs: P.kwargs) -> R:
        with sigint_held():
            return fn(*args, **kwargs)

    return held


def reclaim_sigint() -> None:
    """Inside ``sigint_held``, after PySpark's context started: its handler (cancel every job
    from inside the blocked py4j call, then KeyboardInterrupt) replaced the holding one."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _hold)


@contextlib.contextmanager
def sigint_asks(stop: StopRequest) -> Iterator[None]:
    """While inside, a SIGINT or SIGTERM sets ``stop.asked`` and a second raises
    KeyboardInterrupt (in the main thread only: a signal handler cannot be set from another)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum: int, frame: Any) -> None:
        if stop.asked.is_set():
            raise KeyboardInterrupt
        stop.asked.set()
        _signal[0] = signum
        _asked.set()  # a command holding Ctrl-C around the run sees it too

    old = _handle(ask)
    if _asked.is_set():  # held while the query started: the first batch is the last
        stop.asked.set()
    try:
        yield
    finally:
        _restore(old)
        if old[signal.SIGTERM] is not _hold:  # no command holds Ctrl-C around this run
            _asked.clear()
