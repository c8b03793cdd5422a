"""Compiled kernels, compiled when first called: ``@njit`` as numba's ``njit(cache=True)``,
with numba imported then rather than when the module defining the kernel is.

Importing numba takes about 0.6 s, half of what a ``trimtab`` command spends before it does
anything, and most commands (``validate``, ``status``, ``decisions``, every refusal of bad
input) never route a tuple or search a placement. A kernel here is a stand-in until its first
call; then numba compiles it (or loads it from its cache) and every kernel its module can see
is swapped for its compiled form in that module's globals, so kernels calling kernels compile as
numba's own would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["njit"]


class _Kernel:
    """A numba kernel not compiled yet; calling it compiles it (and its module's kernels)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.compiled: Any = None
        functools.update_wrapper(self, fn)

    def dispatcher(self) -> Any:
        if self.compiled is None:
            import numba

            self.compiled = numba.njit(cache=True)(self.fn)
        return self.compiled

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            _compile_globals(self.fn.__globals__)
        return self.dispatcher()(*args)


def _compile_globals(names: dict[str, Any]) -> None:
    """Swap every kernel a module's code can name for its numba dispatcher (numba resolves a
    called kernel from the caller's globals when it compiles the caller)."""
    for name, value in list(names.items()):
        if isinstance(value, _Kernel):
            names[name] = value.dispatcher()
            # a kernel's callees may live in its own module's globals
            if value.fn.__globals__ is not names:
                _compile_globals(value.fn.__globals__)


def njit(fn: Callable[..., Any]) -> Any:
    """``numba.njit(cache=True)``, compiled at the first call."""
    return _Kernel(fn)
