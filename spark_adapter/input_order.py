"""The input log is read in segment order, or a batch stops before it writes anything.

Spark's file source takes new files in modification-time order, not by name. The driver
restamps the log into index order before its query starts and after every batch
(``InputLog.restamp``), so segments that a copy or an archive left out of order are read in
order. What it cannot restamp is a file that lands between a batch's end and the next listing
already stamped before a segment the driver has read. Such a segment's rows are behind the
watermark the later segments advanced, and they would be dropped as late: a silent loss.
``ReadOrder`` refuses it. A batch that reads a segment at or below one an earlier committed
batch read raises ``InputOutOfOrder`` before it pins, folds or writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

from spark_adapter.actuator import PlanLog
from spark_adapter.source import SEGMENT_ID_BITS, segment_index

__all__ = ["InputOutOfOrder", "ReadOrder", "segment_indices"]

KEEP = 64  # committed batches remembered (a replay re-runs the last batch or two)


class InputOutOfOrder(RuntimeError):
    """A batch would read a segment behind one an earlier batch committed."""


def segment_indices(files: Iterable[str]) -> list[int]:
    """The input segments among a batch's files, by index (other files are ignored).

    >>> segment_indices(["file:///w/input/seg-000012.parquet", "/w/input/seg-000003.parquet"])
    [3, 12]
    """
    names = (Path(urlparse(f).path).name for f in files)
    return sorted(
        segment_index(n) for n in names if n.startswith("seg-") and n.endswith(".parquet")
    )


class ReadOrder:
    """The highest segment each recently committed batch read; ``check`` a batch against them."""

    def __init__(self, log: PlanLog, input_root: Path) -> None:
        self.log = log
        self.input_root = input_root
        self._read: dict[int, int] | None = None  # batch -> highest segment it read

    def _known(self) -> dict[int, int]:
        if self._read is None:  # a restarted driver: what its commit log says
            self._read = {}
            for b, info in sorted(self.log.commit_infos().items())[-KEEP:]:
                hi = info.get("event_range", (-1, -1))[1]
                if hi >= 0:
                    self._read[b] = hi >> SEGMENT_ID_BITS
        return self._read

    def check(self, batch_id: int, read: list[int]) -> None:
        """Raise ``InputOutOfOrder`` when batch ``batch_id`` reads a segment at or below the
        highest one a committed batch before it read. A replay of a batch is checked against
        the batches before it only."""
        earlier = [(hi, b) for b, hi in self._known().items() if b < batch_id]
        if not read or not earlier:
            return
        hi, b = max(earlier)
        if read[0] <= hi:
            raise InputOutOfOrder(
                f"input log {self.input_root}: batch {batch_id} reads seg-{read[0]:06d} after "
                f"batch {b} committed seg-{hi:06d}; Spark's file source takes files by "
                "modification time and this segment was stamped before one already read "
                "(copied in while the driver ran?). Its rows would be behind the watermark and "
                f"dropped as late, so batch {batch_id} wrote nothing. Rerun from a new workdir "
                "with the log in order (the driver restamps a log it starts on)."
            )

    def committed(self, batch_id: int, event_range: tuple[int, int]) -> None:
        """Remember the highest segment a committed batch read."""
        known = self._known()
        if event_range[1] >= 0:
            known[batch_id] = event_range[1] >> SEGMENT_ID_BITS
        while len(known) > KEEP:
            del known[min(known)]
