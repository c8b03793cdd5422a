"""Kernels compile at their first call: a command's start does not import numba, and kernels
calling kernels (across modules) still compile as numba's own."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _python(code: str) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_command_line_and_the_daemon_load_without_numba() -> None:
    """About 0.6 s of every command's start: ``validate``, ``status``, a refusal of bad input."""
    code = "import sys, controller.cli, controller.daemon, controller.placements; "
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))"
    assert _python(code) == "[]"


def test_kernels_calling_kernels_compile_at_the_first_call() -> None:
    """W-Choices calls the Space-Saving kernels of another module, which call each other: the
    first route compiles them all, swaps them into their modules, and routes as before."""
    code = (
        "import numpy as np\n"
        "import partitioners.space_saving as ss\n"
        "from partitioners.dchoices import WChoices\n"
        "from partitioners.pkg import PKG\n"
        "print(type(ss._home).__name__)\n"
        "keys = np.concatenate([np.zeros(600, np.int64), np.arange(1, 401, dtype=np.int64)])\n"
        "w = WChoices(4, 0, window=1000).route(keys)\n"
        "p = PKG(4, 0).route(keys)\n"
        "print(type(ss._home).__name__, type(ss.update).__name__)\n"
        "print(len(set(w[:600].tolist())), len(set(p[:600].tolist())) <= 2, w.max() < 4)\n"
    )
    before, after, routed = _python(code).splitlines()
    assert before == "_Kernel"
    assert after == "CPUDispatcher CPUDispatcher"
    # the hot key (60% of the window) is spread over more than PKG's two choices
    n_hot, pkg_two, in_range = routed.split()
    assert int(n_hot) > 2 and pkg_two == "True" and in_range == "True", routed
