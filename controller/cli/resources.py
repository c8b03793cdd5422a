"""What a command would ask of this machine, checked before it runs: an input log's busiest
segment against memory and its segments against the free disk (``core.footprint``)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Any

from controller.cli.common import check_master, check_spark_query, fail, writable_dir
from controller.scenario import ScenarioFile
from core.footprint import (
    free_space,
    log_disk_problem,
    machine_memory,
    segment_problem,
)

__all__ = ["check_segments", "check_spark_run", "claim_workdir"]

LOCK_FILE = ".replay.lock"
_claims: list[int] = []  # descriptors held, and so locked, until the process ends


def check_segments(
    sc: ScenarioFile, scale: float, segments: int, where: Path, flag: str = "--segments"
) -> None:
    """Exit 2 naming ``--scale`` when the busiest tick's input segment would not fit this
    machine's memory, or ``flag`` when ``segments`` of them would not fit the disk free at
    ``where``, before anything is written."""
    if problem := segment_problem(sc, scale, machine_memory()):
        fail(f"--scale: {problem}")
    if problem := log_disk_problem(sc, scale, segments, flag, free_space(where)):
        fail(problem)


def check_spark_run(master: str, sc: ScenarioFile, params: dict[str, Any]) -> None:
    """The query (``check_spark_query``) and ``check_master``; then, unless ``--input`` gives
    the events, ``check_segments`` for the input a replay or the demo generates (its
    ``--scale``, ``--batches`` and ``--workdir``)."""
    check_spark_query(sc, params.get("scenario"))
    check_master(master)
    work = params.get("workdir")
    if work is not None:  # a directory that cannot be made read as a disk with 0 bytes free
        writable_dir(Path(work), "--workdir")
        _check_unused(Path(work))
    if params.get("input_dir") is None:
        where = work or Path(tempfile.gettempdir())
        check_segments(sc, params["scale"], params["batches"], Path(where), "--batches")


def _check_unused(work: Path) -> None:
    if any(work.glob("input/seg-*")) or (work / "planlog.sqlite").exists():
        fail(
            f"--workdir: {work} holds another run (its input log or plan log): a replay writes "
            "its own; give a new or empty directory"
        )


def claim_workdir(work: Path | None) -> None:
    """Hold ``work`` for this replay until the process ends (an exclusive ``flock`` on
    ``work/.replay.lock``), then check again that it holds no other run: two replays started
    together on one new directory both passed ``check_spark_run`` and wrote one input log."""
    if work is None:
        return
    work.mkdir(parents=True, exist_ok=True)
    fd = os.open(work / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        fail(f"--workdir: {work} is in use by another replay (pid {pid}); give another directory")
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _claims.append(fd)
    _check_unused(work)
