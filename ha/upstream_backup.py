"""Upstream backup: the upstream keeps what un-checkpointed downstream state depends on.

Hwang et al., "High-Availability Algorithms for Distributed Stream Processing", ICDE 2005.
Inputs are numbered (offsets: tuple ids, segments or batches). A downstream acknowledges an
offset once its output for it is committed (level-1 ack); its *state* may still depend on older
offsets (a windowed aggregate depends on the first tuple of each open window) until a
checkpoint covers them. The trim point is therefore the smallest of: the oldest unacknowledged
offset, and the oldest offset the state since the last checkpoint depends on. The log is
trimmed only below it, so a recovery (restore the checkpoint, replay from the trim point)
always finds what it needs. Recovery work grows with the retained span.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["UpstreamBackup"]


@dataclass
class UpstreamBackup:
    """Retention bookkeeping for one input log.

    Examples
    --------
    >>> ub = UpstreamBackup()
    >>> for o in range(10):
    ...     ub.append(o)
    >>> ub.ack(6, state_depends_from=3)   # outputs up to 6 committed; open windows start at 3
    >>> ub.trim_point()
    3
    >>> ub.checkpoint(6, state_depends_from=5)
    >>> ub.trim_point(), ub.trim()
    (5, [0, 1, 2, 3, 4])
    """

    retained: list[int] = field(default_factory=list)
    acked: int = -1  # every offset <= acked has committed output
    checkpointed: int = -1  # state up to this offset is in a checkpoint
    depends_from: int | None = None  # oldest offset the live state still needs
    ckpt_depends_from: int | None = None  # oldest offset the checkpointed state needs
    trimmed_below: int = 0

    def append(self, offset: int) -> None:
        """A new input offset entered the log (offsets increase)."""
        if self.retained and offset <= self.retained[-1]:
            raise ValueError(f"offset: {offset} is not after {self.retained[-1]}")
        self.retained.append(offset)

    def ack(self, offset: int, state_depends_from: int | None = None) -> None:
        """Output up to ``offset`` is committed; the live state needs offsets >= ``state_depends_from``."""
        self.acked = max(self.acked, offset)
        if state_depends_from is not None:
            self.depends_from = state_depends_from

    def checkpoint(self, offset: int, state_depends_from: int | None = None) -> None:
        """State covering inputs up to ``offset`` is durable; it still needs ``state_depends_from``."""
        self.checkpointed = max(self.checkpointed, offset)
        self.ckpt_depends_from = state_depends_from

    def trim_point(self) -> int:
        """The smallest offset a recovery could need (nothing below it is needed)."""
        candidates = [self.acked + 1]
        if self.checkpointed < 0:
            # no checkpoint: recovery rebuilds the state from empty by replaying what it depends on
            candidates.append(
                self.depends_from if self.depends_from is not None else self.trimmed_below
            )
        else:
            candidates.append(self.checkpointed + 1)
            if self.ckpt_depends_from is not None:
                candidates.append(self.ckpt_depends_from)
        return max(self.trimmed_below, min(candidates))

    def trim(self) -> list[int]:
        """Drop retained offsets below the trim point; returns them."""
        tp = self.trim_point()
        gone = [o for o in self.retained if o < tp]
        self.retained = [o for o in self.retained if o >= tp]
        self.trimmed_below = max(self.trimmed_below, tp)
        return gone

    def replay_from(self) -> int:
        """Where a recovery starts replaying (the checkpoint's own dependency, or the start)."""
        if self.checkpointed < 0:
            start = self.depends_from if self.depends_from is not None else self.trimmed_below
            return min(start, self.acked + 1)
        return min(
            self.acked + 1,
            self.checkpointed + 1,
            self.ckpt_depends_from if self.ckpt_depends_from is not None else self.checkpointed + 1,
        )
