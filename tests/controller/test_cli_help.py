"""The command lists of ``trimtab --help`` (and of its groups) show each command's summary as
one sentence the terminal wraps, not broken where the docstring's source line ended."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from controller.cli import app


@pytest.mark.parametrize(
    ("args", "command", "summary_tail"),
    [
        ([], "inject", "names the application and the driver), into the controller holding"),
        ([], "publish-operator", "a new plan version that the next batch pins"),
        ([], "status", "epoch, last round, plan version, policies and health."),
        (["pipeline"], "results", "Read-only. Prints counts as JSON; --out writes the rows."),
    ],
)
def test_a_command_list_shows_each_summary_unbroken(
    args: list[str], command: str, summary_tail: str
) -> None:
    out = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400"}).output
    line = next(ln for ln in out.splitlines() if ln.strip("│ ").startswith(command + " "))
    assert summary_tail in line, out  # a docstring line break would split it across rows
