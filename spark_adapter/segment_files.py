"""One input segment's file: its time stamp, by which Spark reads it, and its Parquet footer.

Spark's file source takes new files in modification-time order at millisecond resolution and
breaks ties in listing order, so segment i must be stamped after segment i - 1 (``stamp_after``;
``restamp`` over a log). A log copied with ``cp -r``, unpacked from an archive or synced without
times keeps its rows but not their order in time (seen: a ``cp -r`` copy of 12 segments read
3, 1, 0, 4, 2, ..., and 5,855 of 61,877 output rows lost as late). Only a time is changed, never
a row; a log in order is untouched.

The footer says whether a file is a readable segment with the input columns (``check``) and,
from its column statistics, a segment's event-id range and last event time (``span``: about
0.05 ms a segment, against about 0.9 ms to read the two columns).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

__all__ = ["STAMP_STEPS_MS", "check", "read", "restamp", "span", "stamp_after"]

STAMP_STEPS_MS = (1, 1000, 2000)  # a later stamp: ms, or a coarse file system's s or 2 s


def stamp_after(path: Path, prev_ms: int, apply: bool = True) -> bool:
    """Stamp ``path`` after ``prev_ms`` unless it is already later (ms resolution, as Spark's
    file source compares); True when it was (or, without ``apply``, would be) restamped. The
    stamp is 1 ms later, or 1 s or 2 s on a file system that keeps coarser times (it is read
    back): a stamp the file system rounded back would leave the tie in place."""
    if path.stat().st_mtime_ns // 1_000_000 > prev_ms:
        return False
    if apply:
        for step_ms in STAMP_STEPS_MS:
            t = (prev_ms + step_ms) * 1_000_000
            os.utime(path, ns=(t, t))
            if path.stat().st_mtime_ns // 1_000_000 > prev_ms:
                break
    return True


def restamp(files: Sequence[tuple[int, Path]], apply: bool = True) -> list[int]:
    """Stamp ``files`` ((index, path), in index order) each after the one before; returns the
    indices restamped (or, without ``apply``, that would be)."""
    moved: list[int] = []
    prev_ms: int | None = None
    for i, path in files:
        with contextlib.suppress(FileNotFoundError):  # trimmed meanwhile
            ms = path.stat().st_mtime_ns // 1_000_000
            if prev_ms is not None and stamp_after(path, prev_ms, apply):
                moved.append(i)
                ms = path.stat().st_mtime_ns // 1_000_000 if apply else prev_ms + 1
            prev_ms = ms
    return moved


def check(path: Path, columns: Sequence[str], streams: Collection[str] | None = None) -> None:
    """A ``ValueError`` naming ``path`` unless it is a readable Parquet file with ``columns``
    (its footer is read, not its rows) and, given ``streams``, rows of those streams only (a
    log written for another scenario, or events imported under another ``--stream``: their
    rows were read by no operator, unsaid); a file trimmed meanwhile passes."""
    try:
        md = pq.read_metadata(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as e:
        raise ValueError(_unreadable(path, e)) from None
    missing = [c for c in columns if c not in md.schema.names]
    if missing:
        raise ValueError(
            f"input log: {path} lacks the input column(s) {', '.join(missing)}; "
            "segments come from `trimtab input generate` or `trimtab input import`"
        )
    if streams is None or md.num_rows == 0 or "stream" not in md.schema.names:
        return
    found = _footer_min_max(md, ("stream",))  # one stream: its statistics say which
    if found is not None and found[0][0] == found[0][1]:
        names = {_text(found[0][0])}
    else:
        names = {_text(x) for x in read(path, ["stream"])["stream"].unique()}
    if stray := sorted(names - set(streams)):
        raise ValueError(
            f"input log: {path} holds rows of stream {stray[0]!r}, not a stream of the "
            f"scenario ({', '.join(sorted(streams))}); was the log written for another "
            "scenario, or the events imported under another --stream?"
        )


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def span(path: Path) -> tuple[int, int, float] | None:
    """A segment's first and last event id and last event time, from its footer's column
    statistics; the columns are read only for a file written without statistics. None when
    it is empty."""
    try:
        md = pq.read_metadata(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise ValueError(_unreadable(path, e)) from None
    if md.num_rows == 0:
        return None
    found = _footer_min_max(md, ("event_id", "ts"))
    if found is None:
        tbl = read(path, ["event_id", "ts"])
        return int(tbl["event_id"].min()), int(tbl["event_id"].max()), float(tbl["ts"].max())
    (lo, hi), (_, ts_max) = found
    return int(lo), int(hi), float(ts_max)


def read(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """A segment's rows (``columns`` only, when given). A file that is not a readable segment
    (truncated by a copy, or something else under its name) is a ``ValueError`` naming it."""
    try:
        return pq.read_table(path, columns=columns).to_pandas()
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(_unreadable(path, e)) from None


def _unreadable(path: Path, e: Exception) -> str:
    return (
        f"input log: {path} is not a readable input segment ({e}); restore the file, or remove "
        "it and the segments after it"
    )


def _footer_min_max(md: Any, names: tuple[str, ...]) -> list[tuple[Any, Any]] | None:
    """(min, max) of each named column over a Parquet file's row groups, from the footer's
    statistics; None when a row group lacks them."""
    out = []
    for name in names:
        j = md.schema.names.index(name)
        lo, hi = [], []
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(j).statistics
            if st is None or not st.has_min_max:
                return None
            lo.append(st.min)
            hi.append(st.max)
        out.append((min(lo), max(hi)))
    return out
