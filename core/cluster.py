"""Nodes: the places that run operators, each with a capacity, a measured latency and a status.

Capacity is in cores (1.0 = one full core, CPU-seconds per second). On Spark a node is a
processing partition (task slot) of the controlled stage; in the simulator it is a server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

__all__ = ["Cluster", "Node", "NodeStatus", "alive_mask"]


class NodeStatus(StrEnum):
    """Liveness of a node as the controller sees it."""

    UP = "up"
    SUSPECTED = "suspected"
    DOWN = "down"
    LOST = "lost"


def alive_mask(statuses: Iterable[NodeStatus]) -> NDArray[np.bool_]:
    """Nodes that may host operators: up, or only suspected.

    >>> alive_mask([NodeStatus.UP, NodeStatus.SUSPECTED, NodeStatus.DOWN, NodeStatus.LOST])
    array([ True,  True, False, False])
    """
    return np.array([s in (NodeStatus.UP, NodeStatus.SUSPECTED) for s in statuses], dtype=bool)


@dataclass(frozen=True)
class Node:
    """One node: ``capacity`` in cores, ``latency_ms`` the measured per-hop latency."""

    id: str
    capacity: float = 1.0
    latency_ms: float = 1.0
    status: NodeStatus = NodeStatus.UP


@dataclass(frozen=True)
class Cluster:
    """An ordered set of nodes; node indices are positions in ``nodes``."""

    nodes: tuple[Node, ...]

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @property
    def ids(self) -> tuple[str, ...]:
        """Node ids in index order."""
        return tuple(nd.id for nd in self.nodes)

    def capacities(self) -> NDArray[np.float64]:
        """Capacity vector in cores."""
        return np.array([nd.capacity for nd in self.nodes], dtype=float)

    def latencies_ms(self) -> NDArray[np.float64]:
        """Measured latency vector in milliseconds."""
        return np.array([nd.latency_ms for nd in self.nodes], dtype=float)

    def alive(self) -> NDArray[np.bool_]:
        """Mask of nodes that may host operators (up or only suspected)."""
        return alive_mask(nd.status for nd in self.nodes)

    def with_status(self, index: int, status: NodeStatus) -> Cluster:
        """A copy with node ``index`` set to ``status``."""
        nodes = list(self.nodes)
        nodes[index] = replace(nodes[index], status=status)
        return Cluster(tuple(nodes))
