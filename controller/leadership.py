"""Which of several controller daemons steers: a lease with an epoch beside the decision log.

Two ``trimtab run`` processes with the same config share one decision log. The one holding the
lease (``core.lease``, in the file ``decisionlog.lease_file`` names beside the log, never in
the log's own database, whose write lock a frozen primary can hold) is the *primary*: it runs the
control rounds and renews the lease every quarter of ``control.lease_timeout_s``. The other is
a *warm standby*: it has built its policy and substrate and polls the lease; when the lease
expires (the primary died or was paused), it takes it with the next epoch, resumes from the
last plan in the decision log and publishes it as the next version. Every plan carries its
controller's epoch, and the decision log and a pipeline's plan store refuse a write from an
older epoch, so a paused primary that wakes up cannot publish; it steps down to standby.

``controller_fault`` is ``trimtab inject kill-controller|stop-controller|
stop-controller-in-commit``: it signals the process that holds the lease, found beside the
decision log; the last pauses it as if frozen inside a commit of the decision log (a helper
holds the log's write lock for the pause).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from controller.decisionlog import lease_file
from core.lease import Lease, LeaseState, holder_name, read_lease

__all__ = ["CONTROLLER_FAULTS", "Leadership", "controller_fault"]

CONTROLLER_FAULTS = ("kill-controller", "stop-controller", "stop-controller-in-commit")


class Leadership:
    """One daemon's side of the lease: its role, epoch and the holder it took over from."""

    def __init__(self, decision_log: str | Path, timeout_s: float, first_epoch: int = 0) -> None:
        """``first_epoch``: the least epoch of this daemon's first lead (``--take-over``)."""
        self.lease = Lease(lease_file(decision_log), timeout_s)
        self.first_epoch = first_epoch
        # one name per daemon instance, so two daemons in one process (tests) are two holders
        self.holder = holder_name(f"controller.{secrets.token_hex(3)}")
        self.epoch: int | None = None
        self.previous: LeaseState | None = None  # the lease as it was when this one took it

    @property
    def primary(self) -> bool:
        """True while this daemon believes it holds the lease."""
        return self.epoch is not None

    @property
    def heartbeat_s(self) -> float:
        """How often the lease is renewed (primary) or polled (standby)."""
        return self.lease.ttl_s / 4

    def try_acquire(self) -> int | None:
        """Take the lease if it is free or expired; the new epoch (the first at least
        ``first_epoch``), or None."""
        before = self.lease.state()
        epoch = self.lease.acquire(self.holder, min_epoch=self.first_epoch)
        if epoch is not None:
            self.epoch, self.previous, self.first_epoch = epoch, before, 0
        return epoch

    def renew(self) -> bool:
        """Extend the lease; False (and no longer primary) when it was lost."""
        if self.epoch is None:
            return False
        if self.lease.renew(self.holder, self.epoch):
            return True
        self.epoch = None
        return False

    def step_down(self) -> None:
        """Stop believing this daemon is primary (the lease was lost or a write refused)."""
        self.epoch = None

    def release(self) -> None:
        """Give the lease up at once (a clean stop), so a standby need not wait for it."""
        if self.epoch is not None:
            self.lease.release(self.holder, self.epoch)
            self.epoch = None

    def took_over_from(self) -> dict[str, Any] | None:
        """The other holder this daemon took the lease from (None on a first or own start)."""
        p = self.previous
        if p is None or not p.holder or p.holder == self.holder:
            return None
        return {"holder": p.holder, "epoch": p.epoch, "pid": p.pid}

    def status(self) -> dict[str, Any]:
        """Role, epoch and leader as the lease has them now."""
        st = self.lease.state()
        held = st.held()
        return {
            "role": "primary" if self.primary else "standby",
            "epoch": st.epoch,
            "own_epoch": self.epoch,
            "leader_pid": st.pid if held else None,
            "lease_timeout_s": self.lease.ttl_s,
        }

    def close(self) -> None:
        """Release the lease and close its connection."""
        self.release()
        self.lease.close()


def controller_fault(fault: str, decision_log: Path | None, seconds: float) -> dict[str, Any]:
    """Kill (SIGKILL) or stop (SIGSTOP for ``seconds``, holding the decision log's write lock
    as well for ``stop-controller-in-commit``) the controller holding the lease beside
    ``decision_log``. Raises ValueError for a bad request and LookupError when no controller
    on this host holds the lease."""
    from spark_adapter.faults import pause_process

    if fault not in CONTROLLER_FAULTS:
        raise ValueError(f"fault: {fault!r} is not {', '.join(CONTROLLER_FAULTS)}")
    if fault != "kill-controller" and not seconds > 0:
        raise ValueError(f"--seconds: must be > 0, got {seconds}")
    if decision_log is None:
        raise ValueError(f"{fault}: --decision-log is needed (the controllers' decision log)")
    if not decision_log.is_file():
        raise ValueError(f"--decision-log: {decision_log} does not exist")
    st = read_lease(lease_file(decision_log))
    if st is None or not st.held() or st.pid is None:
        raise LookupError(f"no controller holds the lease in {decision_log}")
    if st.host != socket.gethostname():
        raise LookupError(f"the controller holding the lease runs on {st.host}, not here")
    if not _is_trimtab(st.pid):
        raise LookupError(f"process {st.pid} holding the lease is not a running trimtab")
    if fault == "kill-controller":
        os.kill(st.pid, signal.SIGKILL)
        return {"killed_controller": st.pid, "epoch": st.epoch}
    if fault == "stop-controller-in-commit":
        helper = _pause_holding_the_log(st.pid, seconds, decision_log)
    else:
        helper = pause_process(st.pid, seconds)
    return {
        "stopped_controller": st.pid,
        "epoch": st.epoch,
        "resumes_after_s": seconds,
        "helper_pid": helper,
    }


_HOLD = """
import os, signal, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
db.execute("BEGIN IMMEDIATE")  # after any commit in flight; a primary frozen mid-commit holds it
os.kill(int(sys.argv[2]), signal.SIGSTOP)
print("stopped", flush=True)
time.sleep(float(sys.argv[3]))
db.execute("ROLLBACK")
try:
    os.kill(int(sys.argv[2]), signal.SIGCONT)
except ProcessLookupError:
    pass
"""


def _pause_holding_the_log(pid: int, seconds: float, decision_log: Path) -> int:
    """Take the decision log's write lock, stop ``pid`` and, after ``seconds``, release the
    lock and resume it, from a detached helper (its own session) that outlives the caller.
    Returns once ``pid`` is stopped; the helper's pid."""
    helper = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(decision_log), str(pid), repr(float(seconds))],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout is not None
    assert helper.stderr is not None
    if helper.stdout.readline().strip() != "stopped":  # the helper's lock wait is bounded
        helper.wait()
        why = (helper.stderr.read().strip().splitlines() or ["no reason given"])[-1]
        raise LookupError(f"could not hold the write lock of {decision_log}: {why}")
    return helper.pid


def _is_trimtab(pid: int) -> bool:
    """True when ``pid`` runs and its command line names trimtab (a recycled pid does not)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"trimtab" in cmd
