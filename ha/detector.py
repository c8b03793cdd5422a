"""Heartbeat failure detection with suspected and failed states, and fencing epochs.

After the HA lecture slides and Hwang et al. (ICDE 2005): a node is *suspected* after
``suspect_s`` without a heartbeat and *failed* after ``fail_s``. A late heartbeat from a
suspected node clears the suspicion; one from a failed node does not cancel its recovery: the
node must rejoin under a new epoch (fencing), so output stamped with its old epoch is refused.
A stopped (SIGSTOP) node is indistinguishable from a crashed one and is treated the same.
The clock is injected, so the detector is pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from core.cluster import NodeStatus

__all__ = ["FailureDetector", "Transition"]


@dataclass(frozen=True)
class Transition:
    """A status change: node, old and new status, time, and the node's epoch."""

    node: str
    old: NodeStatus
    new: NodeStatus
    at: float
    epoch: int


@dataclass
class FailureDetector:
    """Per-node last heartbeat, status and epoch.

    Examples
    --------
    >>> d = FailureDetector(["a"], suspect_s=3, fail_s=6, now=0.0)
    >>> d.check(4.0)[0].new.value, d.check(7.0)[0].new.value
    ('suspected', 'down')
    >>> d.heartbeat("a", 8.0, epoch=0)      # a stale epoch is refused
    False
    >>> d.rejoin("a", 9.0), d.status["a"].value
    (1, 'up')
    """

    nodes: Iterable[str]
    suspect_s: float = 3.0
    fail_s: float = 10.0
    now: float = 0.0
    last: dict[str, float] = field(init=False)
    status: dict[str, NodeStatus] = field(init=False)
    epoch: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        if not 0 < self.suspect_s <= self.fail_s:
            raise ValueError(
                f"timeouts: need 0 < suspect_s ({self.suspect_s}) <= fail_s ({self.fail_s})"
            )
        names = list(self.nodes)
        self.last = dict.fromkeys(names, self.now)
        self.status = dict.fromkeys(names, NodeStatus.UP)
        self.epoch = dict.fromkeys(names, 0)

    def heartbeat(self, node: str, at: float, epoch: int | None = None) -> bool:
        """Record a heartbeat; returns False when it is refused (failed node or stale epoch)."""
        if node not in self.last:
            raise KeyError(f"node: unknown node {node!r}")
        if epoch is not None and epoch != self.epoch[node]:
            return False
        if self.status[node] in (NodeStatus.DOWN, NodeStatus.LOST):
            return False  # recovery has started: the node must rejoin with a new epoch
        self.last[node] = max(self.last[node], at)
        if self.status[node] is NodeStatus.SUSPECTED:
            self.status[node] = NodeStatus.UP
        return True

    def check(self, at: float) -> list[Transition]:
        """Advance the clock to ``at``; returns the status changes."""
        out = []
        for node, last in self.last.items():
            st = self.status[node]
            if st in (NodeStatus.DOWN, NodeStatus.LOST):
                continue
            silent = at - last
            new = (
                NodeStatus.DOWN
                if silent >= self.fail_s
                else NodeStatus.SUSPECTED
                if silent >= self.suspect_s
                else st
            )
            if new is not st:
                self.status[node] = new
                out.append(Transition(node, st, new, at, self.epoch[node]))
        self.now = at
        return out

    def rejoin(self, node: str, at: float) -> int:
        """A failed node comes back: it gets a new epoch (fencing its old incarnation)."""
        self.epoch[node] += 1
        self.status[node] = NodeStatus.UP
        self.last[node] = at
        return self.epoch[node]
