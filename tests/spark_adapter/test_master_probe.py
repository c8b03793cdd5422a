"""The probe of a standalone master's address: the RPC question Spark's client asks first
(does an endpoint named ``Master`` run there?), asked of a real Spark RPC server and of a
stand-in that answers as one would."""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_adapter.master_probe import (
    BOOLEAN,
    REQUEST_ID,
    RPC_FAILURE,
    RPC_REQUEST,
    RPC_RESPONSE,
    master_address_problem,
    verifier_request,
)
from tests.conftest import SCENARIOS

BOOLEAN_UID = -3665804199014368530  # java.lang.Boolean's serialVersionUID (the JDK's)
WHERE = (
    "not a Spark master's RPC port (7077 by default; `trimtab cluster status` prints the URL, "
    "and a master's web UI shows it at its top)"
)


def _boolean(value: bool) -> bytes:
    """A java.lang.Boolean as Java serializes one."""
    return BOOLEAN + struct.pack(">qbH", BOOLEAN_UID, 2, 1) + b"Z\x00\x05valuexp" + bytes([value])


def _frame(kind: int, request_id: int, payload: bytes) -> bytes:
    """A frame of ``kind`` for ``request_id`` with ``payload`` after its size (4 bytes)."""
    msg = struct.pack(">bqi", kind, request_id, len(payload)) + payload
    return struct.pack(">q", 8 + len(msg)) + msg


class FakeRpcServer(threading.Thread):
    """Answers every RpcRequest as a Spark RPC server would answer the verifier: ``True`` or
    ``False``, or a RpcFailure carrying the text; other frames (one-way messages, such as a
    client's registration with a master) go unanswered. ``asked`` counts the requests."""

    def __init__(self, answer: bool | str) -> None:
        super().__init__(daemon=True)
        self.answer, self.asked, self.conns = answer, 0, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"spark://127.0.0.1:{self.sock.getsockname()[1]}"

    def run(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn = self.sock.accept()[0]
                self.conns.append(conn)
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(65536):
                buf += chunk
                while len(buf) >= 8 and len(buf) >= (n := struct.unpack(">q", buf[:8])[0]):
                    frame, buf = buf[:n], buf[n:]
                    if frame[8] == RPC_REQUEST:
                        self.asked += 1
                        rid = struct.unpack(">q", frame[9:17])[0]
                        if isinstance(self.answer, bool):
                            conn.sendall(_frame(RPC_RESPONSE, rid, _boolean(self.answer)))
                        else:  # a RpcFailure's error: a length-prefixed string
                            conn.sendall(_frame(RPC_FAILURE, rid, self.answer.encode()))

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_the_request_is_spark_s_requestmessage_for_the_verifier() -> None:
    """The frame's fields where Spark's decoder reads them: a frame length that counts the
    whole frame, a RpcRequest with the probe's id and its body's size, no sender, the
    receiver's address and the verifier's name, then the Java serialization stream."""
    f = verifier_request(7077)
    length, kind, rid, size = struct.unpack(">qbqi", f[:21])
    assert (length, kind, rid, size) == (len(f), RPC_REQUEST, REQUEST_ID, len(f) - 21)
    body = f[21:]
    assert body[:1] == b"\x00"  # no sender address
    assert body[1:13] == b"\x01\x00\x09127.0.0.1" and struct.unpack(">i", body[13:17]) == (7077,)
    assert body[17:36] == b"\x00\x11endpoint-verifier"
    assert body[36:40] == b"\xac\xed\x00\x05" and body.endswith(b"\x74\x00\x06Master")


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (True, None),
        (False, "is a Spark RPC server with no master there (a worker's or a driver's port), "),
        ("java.io.InvalidClassException: CheckExistence; local class incompatible\n\tat x", None),
    ],
    ids=["master", "no-master", "cannot-read"],
)
def test_the_verifier_s_answer_decides(answer: bool | str, said: str | None) -> None:
    """True: a master runs there; False: a worker's or a driver's RPC server, named. A
    RpcFailure (the question's class unreadable: another Spark version, or a stale
    serialVersionUID where Spark's own client would work) is left to Spark's client."""
    srv = FakeRpcServer(answer)
    srv.start()
    try:
        got = master_address_problem(srv.url, wait_s=5.0)
    finally:
        srv.close()
    assert srv.asked == 1
    assert got == (f"{srv.url} {said}{WHERE}" if said else None)


def test_a_driver_s_rpc_port_is_named_at_once(spark) -> None:  # type: ignore[no-untyped-def]
    """A real Spark RPC server reads the question and answers it: a driver's (this session's)
    has no master. A question its decoder or its Java deserializer could not read (a wrong
    frame, a wrong serialVersionUID) is answered with a RpcFailure instead, which the probe
    leaves to Spark's client (None)."""
    port = spark.sparkContext.getConf().get("spark.driver.port")
    master = f"spark://127.0.0.1:{port}"
    t0 = time.monotonic()
    got = master_address_problem(master)
    assert got == (
        f"{master} is a Spark RPC server with no master there (a worker's or a driver's port), "
        + WHERE
    )
    assert time.monotonic() - t0 < 2.0


@pytest.mark.cluster
def test_a_master_that_never_registers_the_application_is_one_line(tmp_path: Path) -> None:
    """A master's RPC server that never answers the registration (a standby master ignores
    it): Spark's client gives up after its three 20 s attempts and stops the context. The run
    ends in one line naming the URL (exit 3), not in the Py4J error about a stopped context
    that followed, and it wrote nothing."""
    srv = FakeRpcServer(True)
    srv.start()
    work = tmp_path / "w"
    argv = [str(Path(sys.executable).parent / "trimtab"), "replay"]
    argv += [str(SCENARIOS / "seed-groupby-window.yaml"), "--substrate", "spark"]
    argv += ["--master", srv.url, "--workdir", str(work)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    finally:
        srv.close()
    assert r.returncode == 3, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: environment not ready: --master: {srv.url} did not take the application "
        "(Spark's client gave up after about a minute): a Spark RPC server answers there but "
        "never registered it (a standby master waits for its leader, and a Spark of another "
        "version cannot read this one's requests; the server's log says why)"
    )
    assert "Traceback" not in r.stderr
    assert srv.asked >= 2  # the probe, then Spark's client
    assert not (work / "output").exists()
