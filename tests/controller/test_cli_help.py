"""The command lists of ``trimtab --help`` (and of its groups) show each command's summary as
one sentence the terminal wraps, not broken where the docstring's source line ended; option
names print whole at any width (the boxed help cut them to "--snapshot-eve…" at 80 columns)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from controller.cli import app


@pytest.mark.parametrize(
    ("args", "command", "summary_tail"),
    [
        ([], "inject", "names the application and the driver), into the controller holding"),
        ([], "publish-operator", "a new plan version that the next batch pins"),
        (
            [],
            "status",
            "(the newest round that was not a hold), plan version, policies and health.",
        ),
        (["pipeline"], "results", "Read-only. Prints counts as JSON; --out writes the rows."),
    ],
)
def test_a_command_list_shows_each_summary_unbroken(
    args: list[str], command: str, summary_tail: str
) -> None:
    out = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400"}).output
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(command + " "))
    entry = [lines[start]]
    for ln in lines[start + 1 :]:  # the summary's wrapped lines, indented past the names
        if not ln.startswith(" " * 6):
            break
        entry.append(ln)
    # one paragraph, wrapped to the terminal: a docstring line break would have cut it there
    assert summary_tail in " ".join(" ".join(entry).split()), out


@pytest.mark.parametrize("columns", ["80", "60"])
def test_option_names_print_whole_in_a_narrow_terminal(columns: str) -> None:
    out = CliRunner().invoke(app, ["pipeline", "run", "--help"], env={"COLUMNS": columns}).output
    for name in ("--snapshot-every", "--kill-after-output", "--default-plan / --no-default-plan"):
        assert name in out, out
    assert "…" not in out, out


@pytest.mark.parametrize("args", [[], ["input"], ["pipeline"]])
def test_no_arguments_print_the_help_not_an_error_line(args: list[str]) -> None:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "Commands:" in r.stdout, r.output
    assert "error:" not in r.output, r.output


def _commands(prefix: list[str], cmd) -> list[list[str]]:  # type: ignore[no-untyped-def]
    subs = getattr(cmd, "commands", {})
    out = [prefix] if not subs else []
    for name, sub in subs.items():
        out += _commands([*prefix, name], sub)
    return out


def test_every_example_prints_as_written_at_any_width() -> None:
    """Click rewrapped the examples to the terminal, which cut a command mid-argument
    ("scenarios/overload-" / "ramp.yaml"): each example line now starts a whole command."""
    import typer.main

    commands = _commands([], typer.main.get_command(app))
    assert len(commands) >= 20
    seen = 0
    for args in commands:
        out = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "60"}).output
        lines = out.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Example")), None)
        if start is None:
            continue
        seen += 1
        for ln in lines[start:]:
            if not ln.strip():
                break
            text = ln.split(":", 1)[1] if ln.strip().startswith("Example") else ln
            assert text.strip().startswith("trimtab "), (args, out)
    assert seen >= 20


@pytest.mark.parametrize("loaded", ["_multiarray_umath", "_pydantic_core"])
def test_a_ctrl_c_while_the_command_line_loads_is_quiet(loaded: str) -> None:
    """The first half second of any command imports numpy, pydantic and the policies; a Ctrl-C
    then printed Python's trace of the import it hit and died by the signal. Now: exit 130,
    nothing printed, as a Ctrl-C during a command.

    The signal goes as soon as the process has mapped ``loaded``'s extension (numpy's early in
    the loading, pydantic's midway), read from ``/proc/PID/maps``: a fixed sleep of 0.3 s
    landed after the loading on a warm machine (it takes 0.3 s in all), where the restored
    handler let the signal end the process (-2), and the test failed with nothing wrong."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    exe = Path(sys.executable).parent / "trimtab"
    p = subprocess.Popen(
        [str(exe), "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's
    )
    maps, deadline = Path(f"/proc/{p.pid}/maps"), time.monotonic() + 30
    while loaded not in maps.read_text():
        assert p.poll() is None and time.monotonic() < deadline, f"{loaded} never loaded"
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert (p.returncode, err) == (130, ""), err[-2000:]
    assert out == ""  # it was still loading: no help printed


def test_a_ctrl_c_while_typer_builds_the_commands_is_quiet() -> None:
    """After the imports, typer builds the commands from their signatures (a tenth of a second
    of annotation evaluation); a Ctrl-C then printed Python's trace of ``inspect`` or
    ``typing``. The signal here arrives exactly then: exit 130, nothing printed."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = (
        "import os, signal, sys, typer.main\n"
        "real = typer.main.get_command\n"
        "def building(app):\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C while the commands are built\n"
        "    return real(app)\n"
        "typer.main.get_command = building\n"
        "sys.argv = ['trimtab', '--help']\n"
        "from controller.entry import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (r.returncode, r.stderr, r.stdout) == (130, "", ""), r.stderr[-2000:]
