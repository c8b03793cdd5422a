from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from core.cluster import NodeStatus
from ha.active_standby import place_replicas
from ha.detector import FailureDetector
from ha.passive_standby import place_standbys, young_daly_batches
from ha.recovery import replace_lost
from ha.upstream_backup import UpstreamBackup
from placement.baselines import llf


class UpstreamBackupMachine(RuleBasedStateMachine):
    """Tumbling windows of W offsets: the state after acking ``a`` needs offsets from the start
    of the window holding a + 1. Trimming must never remove what a recovery would replay."""

    @initialize(w=st.integers(1, 7))
    def setup(self, w: int) -> None:
        self.w = w
        self.ub = UpstreamBackup()
        self.newest = -1

    def dep(self, acked: int) -> int:
        return ((acked + 1) // self.w) * self.w

    @rule(n=st.integers(1, 5))
    def append(self, n: int) -> None:
        for _ in range(n):
            self.newest += 1
            self.ub.append(self.newest)

    @precondition(lambda self: self.newest > self.ub.acked)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        a = data.draw(st.integers(self.ub.acked + 1, self.newest))
        self.ub.ack(a, self.dep(a))

    @precondition(lambda self: self.ub.acked >= 0)
    @rule()
    def checkpoint(self) -> None:
        self.ub.checkpoint(self.ub.acked, self.dep(self.ub.acked))

    @rule()
    def trim(self) -> None:
        self.ub.trim()

    @invariant()
    def recovery_finds_everything(self) -> None:
        if self.newest < 0:
            return
        start = self.ub.replay_from()
        # the live state and un-acked outputs are rebuilt from `start`: it must cover both
        assert start <= self.dep(self.ub.acked)
        assert start <= self.ub.acked + 1
        # and every offset from there on is still retained (nothing it needs was trimmed)
        assert set(range(start, self.newest + 1)) <= set(self.ub.retained)
        assert self.ub.trimmed_below <= start


TestUpstreamBackup = UpstreamBackupMachine.TestCase


def test_upstream_backup_trims_after_checkpoint() -> None:
    ub = UpstreamBackup()
    for o in range(20):
        ub.append(o)
    assert ub.trim() == []  # nothing acked: nothing may go
    ub.ack(9, state_depends_from=5)
    assert ub.trim() == [0, 1, 2, 3, 4]
    ub.checkpoint(9, state_depends_from=10)
    ub.ack(14, state_depends_from=10)
    assert ub.trim() == [5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="offset"):
        ub.append(3)
    # a checkpoint ahead of the acknowledged output: the trim point is the smaller of the
    # oldest unacknowledged offset and what the checkpointed state needs
    ahead = UpstreamBackup()
    for o in range(10):
        ahead.append(o)
    ahead.checkpoint(9, state_depends_from=10)
    ahead.ack(4)
    assert ahead.trim() == [0, 1, 2, 3, 4] and ahead.retained == [5, 6, 7, 8, 9]


def test_detector_pause_shorter_than_timeout_is_not_a_failure() -> None:
    d = FailureDetector(["a", "b"], suspect_s=3.0, fail_s=6.0, now=0.0)
    for t in np.arange(0.0, 20.0, 1.0):
        d.heartbeat("b", t)
        if not 5.0 <= t < 9.0:  # a pauses for 4 s: suspected, not failed
            d.heartbeat("a", t)
        d.check(t + 0.5)
    assert d.status["a"] is NodeStatus.UP and d.status["b"] is NodeStatus.UP
    d2 = FailureDetector(["a"], suspect_s=3.0, fail_s=6.0, now=0.0)
    tr = d2.check(7.0)
    assert tr[0].new is NodeStatus.DOWN
    assert not d2.heartbeat("a", 7.5)  # late heartbeat does not cancel recovery
    assert d2.rejoin("a", 8.0) == 1
    assert not d2.heartbeat("a", 8.5, epoch=0)  # the old incarnation is fenced
    assert d2.heartbeat("a", 8.5, epoch=1)
    with pytest.raises(ValueError, match="timeouts"):
        FailureDetector(["a"], suspect_s=5, fail_s=1)


@given(st.integers(2, 6), st.lists(st.floats(0.01, 5.0), min_size=1, max_size=30), st.data())
def test_standbys_are_apart_and_spread(n: int, loads: list[float], data: st.DataObject) -> None:
    load = np.array(loads)
    primary = np.array(
        data.draw(st.lists(st.integers(0, n - 1), min_size=len(loads), max_size=len(loads)))
    )
    sb = place_standbys(primary, load, n)
    assert np.all(sb != primary)
    assert np.all((sb >= 0) & (sb < n))
    per = np.bincount(sb, weights=load, minlength=n)
    assert (
        per.max() <= load.sum() / (n - 1) + load.max() + 1e-9
    )  # no node takes more than its share + one unit
    rep = place_replicas(primary, load, n)
    assert np.all(rep != primary)


def test_young_daly_and_recovery() -> None:
    assert young_daly_batches(2.0, 100.0, 1.0) == 20
    assert young_daly_batches(0.0, 100.0, 1.0, lo=2) == 2
    with pytest.raises(ValueError, match="mtbf"):
        young_daly_batches(1.0, 0.0, 1.0)
    r = replace_lost(
        np.array([0, 1, 2, 1]),
        np.array([True, False, True]),
        np.array([0.3, 0.5, 0.2, 0.1]),
        np.ones(3),
        llf,
    )
    assert r.moved.tolist() == [1, 3]
    assert np.all(r.assignment != 1)
    assert r.shortfall == 0.0
