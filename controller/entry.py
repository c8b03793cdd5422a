"""The ``trimtab`` console script.

Loading the command line imports numpy, pandas and the policies, and typer then builds the
commands from their signatures: about half a second in which a Ctrl-C ended the command with
Python's trace of whatever import or annotation it interrupted. A Ctrl-C then is now only
recorded, and the command ends quietly, exit 130, once loading is done, as a
Ctrl-C during a command does. (Raising KeyboardInterrupt there was not enough: one that lands
in importlib's module-lock callback is printed as "Exception ignored" and the import goes on,
so the command ran, exit 0.) Nothing heavy is imported here.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

__all__ = ["main"]


def main() -> None:
    """Load and build the command line (``controller.cli.command``), then run it."""
    asked: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        asked.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        from controller.cli import command

        run = command()
    finally:
        if signal.getsignal(signal.SIGINT) is hold:  # an import's own handler is kept
            signal.signal(signal.SIGINT, previous)
    if asked:
        sys.exit(130)
    run()
