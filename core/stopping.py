"""The signals that stop a long-running trimtab process cleanly: the daemon, a live pipeline
driver and a live input writer finish what they are doing (a round, a batch, a segment) and
stop, exit 0.

SIGTERM is a service manager's stop, SIGINT a Ctrl-C, and SIGHUP what a process run in a
terminal gets when the terminal closes; its default action ended the process at once (no
"stopped" line, the lease held until it ran out). No configuration is reloaded on SIGHUP.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

__all__ = ["STOP_SIGNALS", "stop_on_signals"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_on_signals(stop: Callable[[], Any]) -> dict[int, Any]:
    """Call ``stop()`` on each of ``STOP_SIGNALS`` (main thread only); returns the handlers
    it replaced, by signal, to put back with ``signal.signal``."""
    return {s: signal.signal(s, lambda *_: stop()) for s in STOP_SIGNALS}
