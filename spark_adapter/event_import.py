"""A user's own events into the input log: one segment per tick, by the events' time.

``import_events`` reads CSV, Parquet or JSON-lines files with a time column (seconds), a key
column and an optional value column, checks every row, and writes the input log's segments:
event time is shifted to start at 0 and divided by ``speedup``; segment t holds the events of
``[t tick_s, (t + 1) tick_s)``, in time order, with event ids ``t x 2^32 + i`` as the
generator's; a tick without events has no segment (the next batch simply comes later). Keys may be integers (``0 <= key < 2^53``, exact as doubles) or strings, hashed
stably to ``[0, 2^53)`` (pandas' fixed-key SipHash, the same in every process). A row whose
time or value is not a finite number, or whose key is missing or out of range, is bad: bad
rows are counted and reported with the first one's place (``file:line`` in a CSV or JSON-lines
file, ``file row N`` in Parquet) and reason; above
``max_bad_fraction`` nothing is written. The log is closed after the import (the stream has
ended), so a pipeline driver closes every window at its end. No pyspark import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.files import file_problem, text_encoding
from spark_adapter.source import SEGMENT_ID_BITS, InputLog, first_event_id

__all__ = [
    "FORMATS",
    "READER_COLUMNS",
    "CheckedEvents",
    "EventImportError",
    "ImportReport",
    "checked_events",
    "event_format",
    "event_seconds",
    "import_events",
    "read_events",
    "row_place",
    "stable_keys",
]

TS_BAD = "neither a number of seconds nor a date-time"

FORMATS = ("csv", "parquet", "jsonl")
# CSV and JSON lines may come compressed: told by the suffix before this one (events.csv.gz)
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zip")
READER_COLUMNS = ("_file", "_row")  # what read_events adds to the files' own columns
KEY_LIMIT = 1 << 53  # keys travel through a double in the fold's concatenation


class EventImportError(ValueError):
    """A problem with the user's files, naming the file, the row or the column."""


@dataclass(frozen=True)
class ImportReport:
    """What an import read, refused and wrote."""

    rows_read: int
    rows_written: int
    bad_rows: int
    first_bad: str  # "place: reason" (``row_place``), or ""
    segments: int
    span_s: float  # event-time span after the speedup
    string_keys: bool
    unused_columns: list[str]  # read and left out: not the time, key or value column

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data."""
        return dict(self.__dict__)


def event_format(path: Path, fmt: str | None, default: str | None = None) -> str:
    """The format to read ``path`` as: ``fmt`` if given, else by its suffix (the one before a
    compression's: ``events.csv.gz`` is CSV, which pandas decompresses), else ``default``
    (None: an error asking for ``--format``).

    >>> [event_format(Path(n), None) for n in ("a.csv", "a.CSV.gz", "a.jsonl.bz2", "a.json")]
    ['csv', 'csv', 'jsonl', 'jsonl']
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise EventImportError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
        return fmt
    *rest, last = [x.lower() for x in path.suffixes] or [""]
    packed = last in (*COMPRESSIONS, ".zst")
    suffix = ((rest or [""])[-1] if packed else last).lstrip(".")
    if last == ".zst":  # pandas reads it only with a package not installed
        raise EventImportError(f"{path}: zstd-compressed; decompress it first (zstd -d)")
    if packed and suffix == "parquet":
        raise EventImportError(
            f"{path}: a compressed Parquet file; decompress it first (Parquet compresses its "
            "own columns)"
        )
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    if suffix in FORMATS:
        return suffix
    if default is not None:
        return default
    raise EventImportError(f"{path}: cannot tell the format from the name; give --format")


def read_events(paths: list[Path], fmt: str | None = None) -> pd.DataFrame:
    """The files' rows as one frame, with ``_file`` and ``_row`` (1-based data row) columns;
    ``attrs["formats"]`` maps each file to the format it was read as (for ``row_place``),
    ``attrs["columns"]`` to its columns. A file named twice is refused (``EventImportError``)."""
    frames: list[pd.DataFrame] = []
    formats: dict[str, str] = {}
    columns: dict[str, list[str]] = {}
    seen: dict[Path, Path] = {}
    for p in paths:
        if (problem := file_problem(p, named=False)) is not None:
            if p.is_dir():  # a dataset written as a directory of part files, say
                some = sorted(x.name for x in p.iterdir() if x.is_file())[:1]
                problem += f": give the event files in it ({p / some[0]} ...)" if some else ""
            raise EventImportError(f"{p}: {problem}")
        if (first := seen.setdefault(p.resolve(), p)) is not p:
            same = "named twice" if first == p else f"the same file as {first}"
            raise EventImportError(f"{p}: {same}: its events would be read twice")
        kind = event_format(p, fmt)
        try:
            if kind == "csv":
                df = pd.read_csv(p, encoding=text_encoding(p))
            elif kind == "parquet":
                df = pd.read_parquet(p)
            else:
                df = pd.read_json(p, lines=True, encoding=text_encoding(p))
        except (ValueError, OSError, ImportError, pd.errors.ParserError) as e:
            raise EventImportError(f"{p}: not readable as {kind} ({str(e).splitlines()[0]})") from e
        frames.append(df.assign(_file=str(p), _row=np.arange(1, len(df) + 1)))
        formats[str(p)], columns[str(p)] = kind, list(df.columns)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out.attrs["formats"], out.attrs["columns"] = formats, columns
    return out


def row_place(events: pd.DataFrame, i: int) -> str:
    """Where row ``i`` of ``read_events``'s frame is, as an editor shows it: ``file:line`` in
    a CSV (the header is line 1) or JSON-lines file, ``file row N`` in Parquet. Blank lines,
    which the readers skip, are not counted.

    >>> df = pd.DataFrame({"_file": ["a.csv", "b.jsonl", "c.parquet"], "_row": [1, 1, 1]})
    >>> df.attrs["formats"] = {"a.csv": "csv", "b.jsonl": "jsonl", "c.parquet": "parquet"}
    >>> [row_place(df, i) for i in range(3)]
    ['a.csv:2', 'b.jsonl:1', 'c.parquet row 1']
    """
    file, row = str(events["_file"].iat[i]), int(events["_row"].iat[i])
    kind = events.attrs.get("formats", {}).get(file, "csv")
    if kind == "parquet":
        return f"{file} row {row}"
    return f"{file}:{row + 1 if kind == 'csv' else row}"


def stable_keys(col: pd.Series) -> tuple[np.ndarray, np.ndarray, bool]:
    """(int64 keys, bad mask, keys were strings): integers as they are (bad: negative,
    fractional or >= 2^53), anything else as text hashed stably into [0, 2^53)."""
    if pd.api.types.is_integer_dtype(col.dtype):
        k = col.to_numpy(dtype=np.int64)
        return k, (k < 0) | (k >= KEY_LIMIT), False
    if pd.api.types.is_float_dtype(col.dtype):  # integers with gaps read as floats
        v = col.to_numpy(dtype=float)
        ok = np.isfinite(v) & (v == np.floor(v)) & (v >= 0) & (v < KEY_LIMIT)
        return np.where(ok, v, 0).astype(np.int64), ~ok, False
    missing = col.isna().to_numpy()
    text = col.astype(str).to_numpy(dtype=object)
    h = pd.util.hash_array(text).astype(np.uint64) & np.uint64(KEY_LIMIT - 1)
    return h.astype(np.int64), missing, True


def event_seconds(col: pd.Series) -> np.ndarray:
    """A time column in seconds: numbers as they are; date-times (a timestamp column, as
    Parquet and pandas write them, or ISO 8601 text such as ``2026-11-28T07:00:00.5Z``, one
    without a zone read as UTC) in seconds since the epoch; anything else NaN.

    >>> event_seconds(pd.Series(["1.5", "1970-01-01T00:00:02.5Z", "1970-01-01 00:01", "x"]))
    array([ 1.5,  2.5, 60. ,  nan])
    """
    if pd.api.types.is_datetime64_any_dtype(col):
        return _epoch_s(col)
    ts = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
    text = np.isnan(ts) & col.notna().to_numpy()
    if text.any() and col.dtype == object:  # the rows that are no number: date-times?
        when = pd.to_datetime(col[text].astype(str), utc=True, errors="coerce", format="ISO8601")
        ts[text] = _epoch_s(when)
    return ts


def _epoch_s(when: pd.Series) -> np.ndarray:
    """Date-times as seconds since the epoch (one without a zone read as UTC); NaT as NaN."""
    if when.dt.tz is None:
        when = when.dt.tz_localize("UTC")
    return ((when - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(dtype=float)


def _checked(
    df: pd.DataFrame, ts_col: str, key_col: str, value_col: str | None
) -> tuple[pd.DataFrame, np.ndarray, list[str], bool]:
    """(ts, key, v) per row, the bad mask, the reasons, whether keys were strings."""
    for col, flag in ((ts_col, "--ts-col"), (key_col, "--key-col"), (value_col, "--value-col")):
        if col is None:
            continue
        if col not in df.columns:
            cols = ", ".join(c for c in df.columns if not c.startswith("_"))
            raise EventImportError(f"{flag}: no column {col!r} in the events (columns: {cols})")
        for f, cols in df.attrs.get("columns", {}).items():  # else its rows would read as bad
            if col not in cols:
                have = ", ".join(map(str, cols))
                raise EventImportError(f"{flag}: no column {col!r} in {f} (columns: {have})")
    ts = event_seconds(df[ts_col])
    key, key_bad, strings = stable_keys(df[key_col])
    v = (
        pd.to_numeric(df[value_col], errors="coerce").to_numpy(dtype=float)
        if value_col is not None
        else np.ones(len(df))
    )
    reasons = [
        (~np.isfinite(ts), f"{ts_col}: {TS_BAD}"),
        (key_bad, f"{key_col}: missing, negative, fractional or >= 2^53"),
        (~np.isfinite(v), f"{value_col}: not a finite number"),
    ]
    bad = np.zeros(len(df), dtype=bool)
    why = np.full(len(df), "", dtype=object)
    for mask, text in reasons:
        why[mask & ~bad] = text
        bad |= mask
    clean = pd.DataFrame({"ts": ts, "key": key, "v": v})
    return clean, bad, list(why), strings


@dataclass(frozen=True)
class CheckedEvents:
    """The good rows of a user's events, in time order, and what was left out."""

    ts: np.ndarray
    keys: np.ndarray  # int64 in [0, 2^53)
    values: np.ndarray
    raw_keys: np.ndarray  # the key column as given (strings before hashing)
    rows_read: int
    bad_rows: int
    first_bad: str  # "place: reason" (``row_place``), or ""
    string_keys: bool
    unused_columns: list[str]  # neither the time, the key nor the value column


def checked_events(
    paths: list[Path],
    ts_col: str = "ts",
    key_col: str = "key",
    value_col: str | None = None,
    fmt: str | None = None,
) -> CheckedEvents:
    """Read and check the events row by row (one checking path for import and profile)."""
    df = read_events(paths, fmt)
    if df.empty:
        raise EventImportError(f"{', '.join(map(str, paths))}: no events")
    clean, bad, why, strings = _checked(df, ts_col, key_col, value_col)
    n_bad = int(bad.sum())
    first = ""
    if n_bad:
        i = int(np.flatnonzero(bad)[0])
        first = f"{row_place(df, i)}: {why[i]}"
    if n_bad == len(df):
        raise EventImportError(f"every row is bad; first: {first}")
    order = np.argsort(clean["ts"].to_numpy()[~bad], kind="stable")
    good = clean[~bad]
    return CheckedEvents(
        ts=good["ts"].to_numpy()[order],
        keys=good["key"].to_numpy()[order],
        values=good["v"].to_numpy()[order],
        raw_keys=df[key_col].to_numpy()[~bad][order],
        rows_read=len(df),
        bad_rows=n_bad,
        first_bad=first,
        string_keys=strings,
        unused_columns=[
            str(c)
            for c in dict.fromkeys(c for cols in df.attrs["columns"].values() for c in cols)
            if c not in (ts_col, key_col, value_col)
        ],
    )


def import_events(
    paths: list[Path],
    log: InputLog,
    stream: str,
    tick_s: float,
    ts_col: str = "ts",
    key_col: str = "key",
    value_col: str | None = None,
    fmt: str | None = None,
    speedup: float = 1.0,
    max_bad_fraction: float = 0.01,
) -> ImportReport:
    """Check the events and write them as segments of ``log`` (which must be empty)."""
    if not speedup > 0 or not np.isfinite(speedup):
        raise EventImportError(f"--speedup: must be a positive number (got {speedup})")
    if not tick_s > 0:
        raise EventImportError(f"tick_s: must be positive (got {tick_s})")
    if log.segments() or log.trimmed_below():
        raise EventImportError(f"{log.root}: already holds an input log; import into a new workdir")
    ev = checked_events(paths, ts_col, key_col, value_col, fmt)
    if ev.bad_rows > max_bad_fraction * ev.rows_read:
        raise EventImportError(
            f"{ev.bad_rows} of {ev.rows_read} rows are bad (more than {max_bad_fraction:.1%}); "
            f"first: {ev.first_bad}; nothing was written"
        )
    good = pd.DataFrame({"ts": ev.ts, "key": ev.keys, "v": ev.values})
    _check_span(good["ts"].to_numpy(), ts_col, speedup, tick_s)
    t, segments = _write_segments(log, good, stream, speedup, tick_s)
    log.close()  # the imported stream is complete: a driver closes every window at its end
    return ImportReport(
        rows_read=ev.rows_read,
        rows_written=len(good),
        bad_rows=ev.bad_rows,
        first_bad=ev.first_bad,
        segments=segments,
        span_s=float(t[-1]),
        string_keys=ev.string_keys,
        unused_columns=ev.unused_columns,
    )


MAX_SEGMENTS = 1 << (63 - SEGMENT_ID_BITS)  # segment t's event ids start at t x 2^32


def _check_span(ts: np.ndarray, ts_col: str, speedup: float, tick_s: float) -> None:
    """The events (in time order) fit an input log: fewer ticks from first to last than it
    has segment indices, else nothing is written. A span past it (68 years of 1 s ticks) is
    a time column in another unit or a stray row; milliseconds read as seconds fit but space
    the segments 1,000 apart, which ``--speedup 1000`` undoes.

    >>> _check_span(np.array([0.0, 5e9]), "ts", 1.0, 1.0)
    Traceback (most recent call last):
    ...
    spark_adapter.event_import.EventImportError: ts: the events span 5e+09 s (from 0 to 5e+09): 5e+09 ticks of 1 s, more than the 2,147,483,648 an input log holds; is the column in seconds (milliseconds: --speedup 1000), or is a row's time wrong?
    >>> _check_span(np.array([0.0, 5e9]), "ts", 1000.0, 1.0)
    >>> _check_span(np.array([0.0, 14.0]), "ts", 1e-300, 1.0)
    Traceback (most recent call last):
    ...
    spark_adapter.event_import.EventImportError: --speedup: 1e-300 stretches the events' 14 s to 1.4e+301 ticks of 1 s, more than the 2,147,483,648 an input log holds
    """
    if not len(ts):
        return
    span = float(ts[-1] - ts[0])
    ticks = span / speedup / tick_s
    if ticks >= MAX_SEGMENTS - 1 and speedup < 1 and span / tick_s < MAX_SEGMENTS - 1:
        raise EventImportError(  # the events fit at event time: the slow-down does not
            f"--speedup: {speedup:g} stretches the events' {span:.4g} s to {ticks:.4g} ticks "
            f"of {tick_s:g} s, more than the {MAX_SEGMENTS:,} an input log holds"
        )
    if ticks >= MAX_SEGMENTS - 1:
        raise EventImportError(
            f"{ts_col}: the events span {span:.4g} s (from {ts[0]:.6g} to {ts[-1]:.6g}): "
            f"{ticks:.4g} ticks of {tick_s:g} s, more than the {MAX_SEGMENTS:,} an input log "
            "holds; is the column in seconds (milliseconds: --speedup 1000), or is a row's "
            "time wrong?"
        )


def _write_segments(
    log: InputLog, good: pd.DataFrame, stream: str, speedup: float, tick_s: float
) -> tuple[np.ndarray, int]:
    """Events in time order as one segment per tick; (shifted times, segments written)."""
    t = (good["ts"].to_numpy() - good["ts"].iat[0]) / speedup
    seg = np.floor(t / tick_s + 1e-12).astype(np.int64)
    cuts = np.flatnonzero(np.diff(seg)) + 1
    starts = np.r_[0, cuts]
    for a, b in zip(starts, np.r_[cuts, len(good)], strict=True):
        idx = int(seg[a])
        log.write(
            idx,
            pd.DataFrame(
                {
                    "event_id": first_event_id(idx) + np.arange(b - a, dtype=np.int64),
                    "stream": stream,
                    "ts": t[a:b],
                    "key": good["key"].to_numpy()[a:b],
                    "v": good["v"].to_numpy()[a:b],
                    "c": 0.0,
                }
            ),
        )
    return t, len(starts)
