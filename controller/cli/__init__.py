"""The ``trimtab`` command line: a module per command group. Commands parse arguments and call
library functions; the logic lives in the packages.

* ``replays``: replay;
* ``compares``: compare (the simulator, or Spark);
* ``demo``: the main job;
* ``offline``: place, shed, partition, calibrate;
* ``spark``: pipeline run, publish-operator, inject, cluster;
* ``inputs``: input generate, import, profile;
* ``verify``: pipeline verify;
* ``daemon``: run, status, decisions, validate, report;
* ``resources``: what a command would ask of the machine (memory, disk), checked first.

Exit codes: 0 success, 1 runtime failure, 2 usage or validation error, 3 environment not ready.
"""

from __future__ import annotations

import click
import typer.main

from controller.cli import compares, daemon, demo, inputs, offline, replays, spark, verify
from controller.cli.common import app
from controller.cli.tables import SPARK_KEYS, SUMMARY_KEYS

__all__ = ["SPARK_KEYS", "SUMMARY_KEYS", "app", "command"]

COMMAND_GROUPS = (
    replays,
    compares,
    offline,
    spark,
    inputs,
    verify,
    daemon,
    demo,
)  # each registers its commands on ``app``
HELP_ORDER = (
    "replay",
    "compare",
    "place",
    "shed",
    "partition",
    "calibrate",
    "publish-operator",
    "inject",
    "cluster",
    "validate",
    "run",
    "status",
    "decisions",
    "report",
    "demo",
)
app.registered_commands.sort(
    key=lambda c: HELP_ORDER.index(c.name or c.callback.__name__)  # type: ignore[union-attr]
)

for _cmd in [
    *app.registered_commands,
    *spark.pipeline_app.registered_commands,
    *inputs.input_app.registered_commands,
]:
    # a command list shows a docstring's first paragraph as it is wrapped in the source;
    # joined, the terminal wraps it (a command's own --help already joins it)
    if _cmd.short_help is None and _cmd.callback is not None and _cmd.callback.__doc__:
        _cmd.short_help = " ".join(_cmd.callback.__doc__.strip().split("\n\n")[0].split())


def command() -> click.Command:
    """``app`` as the click command it runs: typer builds it from the commands' signatures,
    which takes a tenth of a second (``controller.entry``, the console script, builds it with
    a Ctrl-C held, then runs it)."""
    return typer.main.get_command(app)
