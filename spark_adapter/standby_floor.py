"""What the primary's input-log retention keeps for its standbys.

Under passive retention the primary trims the input log past each new snapshot. Two kinds of
standby read segments behind it:

- an active standby reads each batch's segments as it follows the primary and records the
  next one it needs (``active-standby/_FOLLOWED``);
- a waiting warm standby refolds, about once a second, the batches committed since its last
  follow, and records the first segment such a follow may read: the one after the last batch
  its state holds (``_REFOLDING/<pid>.json``, with its pid and start time). Without it a follow
  could read a segment the primary trimmed meanwhile, past a snapshot newer than the one the
  follow loaded: the follow failed (a Spark read error and its JVM trace in a healthy
  standby's log) and was done again from that snapshot.

The primary trims nothing at or past the lowest of these (``Retention.floor``). A warm
standby's mark holds only while its process runs (pid and start time, ``pids.same_process``),
so a standby that died holds nothing back; a standby that takes over removes its own.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_adapter.active_standby import FOLLOWED, SHADOW
from spark_adapter.actuator import atomic_write
from spark_adapter.pids import process_start, same_process

__all__ = ["REFOLDING", "mark_refolding", "next_segment", "standby_floor", "unmark_refolding"]

REFOLDING = "_REFOLDING"


def _mark(work: Path) -> Path:
    return work / REFOLDING / f"{os.getpid()}.json"


def mark_refolding(work: Path, segment: int) -> None:
    """This warm standby's next follow reads no segment below ``segment``."""
    pid = os.getpid()
    mark = {"pid": pid, "started": process_start(pid), "segment": int(segment)}
    atomic_write(_mark(work), json.dumps(mark).encode())


def unmark_refolding(work: Path) -> None:
    """This standby no longer follows (it took over, or it stops)."""
    _mark(work).unlink(missing_ok=True)


def next_segment(pipe: Any) -> int:
    """The first input segment after the last batch ``pipe``'s state holds (0 with no state)."""
    if not pipe.states:
        return 0
    have = max(pipe.states)
    infos = pipe.log.commit_infos()
    ends = [int(i["event_range"][1]) for b, i in infos.items() if b <= have and "event_range" in i]
    ends = [e for e in ends if e >= 0]  # a batch that read no segment has (-1, -1)
    return (max(ends) >> 32) + 1 if ends else 0


def _refolding(work: Path) -> list[int]:
    """The marks of the warm standbys that still run."""
    out = []
    for f in (work / REFOLDING).glob("*.json"):
        try:
            m = json.loads(f.read_text())
            if same_process(int(m["pid"]), m["started"]):
                out.append(int(m["segment"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # removed meanwhile, or being replaced: the next batch reads it again
    return out


def standby_floor(work: Path) -> Callable[[], int | None]:
    """For the primary's retention: the first segment a standby may still read, or None."""
    followed = work / SHADOW / FOLLOWED

    def floor() -> int | None:
        marks = _refolding(work)
        with contextlib.suppress(OSError, ValueError):
            marks.append(int(followed.read_text()))
        return min(marks, default=None)

    return floor
