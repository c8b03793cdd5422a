"""The ``trimtab`` console script.

Loading the command line imports numpy, pandas and the policies: about half a second in which
a Ctrl-C ended the command with Python's trace of whatever import it interrupted. It now ends
it quietly, exit 130, as a Ctrl-C during a command does. Nothing heavy is imported here.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Load the command line, then run it (``controller.cli.main``)."""
    try:
        from controller.cli import main as run
    except KeyboardInterrupt:
        sys.exit(130)
    run()
