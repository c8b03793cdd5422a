"""One wording for a path that should name a readable file and does not."""

from __future__ import annotations

from pathlib import Path


def file_problem(path: Path) -> str | None:
    """Why ``path`` is not a file to read (missing, or a directory), or None when it is one."""
    if path.is_file():
        return None
    if path.is_dir():
        return f"{path} is a directory, not a file"
    return f"file not found: {path}"
