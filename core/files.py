"""One wording for a path that should name a readable file and does not."""

from __future__ import annotations

from pathlib import Path


def file_problem(path: Path, named: bool = True) -> str | None:
    """Why ``path`` is not a file to read (missing, a directory, a device or pipe), or None
    when it is one; the path leads the reason unless ``named`` is False (the caller names it).

    >>> file_problem(Path("/dev/zero")), file_problem(Path("/dev/zero"), named=False)
    ('/dev/zero is not a regular file', 'not a regular file (a device or a pipe)')
    """
    if path.is_file():
        return None
    if path.is_dir():
        return f"{path} is a directory, not a file" if named else "a directory, not a file"
    if path.exists():
        return (
            f"{path} is not a regular file" if named else "not a regular file (a device or a pipe)"
        )
    return f"file not found: {path}" if named else "file not found"


def read_text(path: Path) -> tuple[str | None, str | None]:
    """The file's text and None, or None and why it is not a text file to read:
    ``file_problem`` (the caller names the path), or not UTF-8 (a binary given for a YAML
    file). The file is read once.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".yaml") as f:
    ...     _ = f.write(b"name: \\xf0\\x28")
    ...     f.flush()
    ...     read_text(Path(f.name))
    (None, 'not a UTF-8 text file (byte 6 is not UTF-8)')
    """
    if (problem := file_problem(path, named=False)) is not None:
        return None, problem
    try:
        return path.read_text(), None
    except UnicodeDecodeError as e:
        return None, f"not a UTF-8 text file (byte {e.start} is not UTF-8)"
