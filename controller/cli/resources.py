"""What a command would ask of this machine, checked before it runs: an input log's busiest
segment against memory and its segments against the free disk (``core.footprint``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from controller.cli.common import check_master, check_spark_query, fail
from controller.scenario import ScenarioFile
from core.footprint import (
    free_space,
    log_disk_problem,
    machine_memory,
    segment_problem,
)

__all__ = ["check_segments", "check_spark_run"]


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
    if work is not None and (
        any(Path(work).glob("input/seg-*")) or Path(work, "planlog.sqlite").exists()
    ):
        fail(
            f"--workdir: {work} holds another run (its input log or plan log): a replay writes "
            "its own; give a new or empty directory"
        )
    if params.get("input_dir") is None:
        where = work or Path(tempfile.gettempdir())
        check_segments(sc, params["scale"], params["batches"], Path(where), "--batches")
