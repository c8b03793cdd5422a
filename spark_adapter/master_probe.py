"""What answers at a standalone master's address, asked before Spark starts.

Pointed at a port that is not a master's RPC port (a worker's or a driver's, the master's web
UI, its REST submission port, any other server), Spark's application client retries for about
a minute before it gives up. The probe tells in milliseconds. It asks what Spark's client asks
first: a ``RpcRequest`` frame of Spark's transport protocol for the RPC server's
``endpoint-verifier``, whether an endpoint named ``Master`` runs there (``CheckExistence``,
Java-serialized as Spark's ``JavaSerializer`` writes it), then a blank line. A Spark RPC
server answers with a ``RpcResponse`` holding a serialized ``java.lang.Boolean``: true on a
master, false on a worker's or a driver's port; it logs nothing of it, and the blank line is
an unfinished frame it waits on until the probe leaves. One that cannot read the question
answers a ``RpcFailure`` (and logs it): a Spark of another version, whose class differs, or
a patch release of this one whose class changed its serialVersionUID. The probe cannot tell
them apart, and Spark's own client works in the second case, so such a server is left to that
client (a minute's retries if it fails too) rather than refused. An HTTP server answers the
malformed request line with its error page, and a server that speaks neither says nothing or
closes. A Spark master's web UI is then asked for its JSON page, which names the master's URL.
"""

from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request
from typing import Literal

from spark_adapter.session import LOOPBACK

__all__ = ["master_address_problem", "verifier_request"]

# Spark's transport protocol (spark-network-common, ``Message.Type``): a frame is its length
# (8 bytes, counting itself), the message type (1 byte) and the message. A RpcRequest (3) and
# its RpcResponse (4) carry a request id (8 bytes) and a body (its size, 4 bytes, then the
# bytes); a RpcFailure (5) the request id and the error as a length-prefixed string.
RPC_REQUEST, RPC_RESPONSE, RPC_FAILURE = 3, 4, 5
REQUEST_ID = 0x7472696D746162  # "trimtab"
VERIFIER, MASTER = b"endpoint-verifier", b"Master"  # Spark's endpoint names
# The question's class and its serialVersionUID (Java's default for the class, which declares
# none: ``serialver`` prints it from Spark's jars). A stale one fails the tests that ask a
# real driver (test_master_probe) and a real master and worker (test_standalone)
CHECK_EXISTENCE = b"org.apache.spark.rpc.netty.RpcEndpointVerifier$CheckExistence"
CHECK_EXISTENCE_UID = 5378738997755484868
# The answer: a serialized java.lang.Boolean, its value the stream's last byte
BOOLEAN = b"\xac\xed\x00\x05sr\x00\x11java.lang.Boolean"
RESPONSE_HEAD = 8 + 1 + 8 + 4  # a RpcResponse's length, type, request id and body size
MAX_FRAME = 1 << 20  # a longer frame is no answer to the probe
WAIT_S = 3.0  # a master answers in milliseconds; a loaded machine gets seconds
WHERE = (
    "(7077 by default; `trimtab cluster status` prints the URL, and a master's web UI shows "
    "it at its top)"
)


def _utf(text: bytes) -> bytes:
    """A string as Java's ``DataOutput.writeUTF`` writes one (ASCII: its length, 2 bytes)."""
    return struct.pack(">H", len(text)) + text


def verifier_request(port: int, endpoint: bytes = MASTER) -> bytes:
    """The RpcRequest frame asking the RPC server at ``port`` whether ``endpoint`` runs there:
    Spark's ``RequestMessage`` (no sender, the receiver's address and name, then the content
    in a Java serialization stream), the content ``CheckExistence(endpoint)``."""
    content = b"".join(
        [
            b"\xac\xed\x00\x05",  # stream magic and version
            b"\x73\x72" + _utf(CHECK_EXISTENCE),  # TC_OBJECT, TC_CLASSDESC, the class name
            struct.pack(">qbH", CHECK_EXISTENCE_UID, 0x02, 1),  # its UID, SC_SERIALIZABLE, 1 field
            b"L" + _utf(b"name") + b"\x74" + _utf(b"Ljava/lang/String;"),  # name: String
            b"\x78\x70",  # TC_ENDBLOCKDATA, no superclass
            b"\x74" + _utf(endpoint),  # the field's value, a TC_STRING
        ]
    )
    receiver = b"\x01" + _utf(LOOPBACK.encode()) + struct.pack(">i", port) + _utf(VERIFIER)
    body = b"\x00" + receiver + content  # \x00: no sender address (a client)
    msg = struct.pack(">bqi", RPC_REQUEST, REQUEST_ID, len(body)) + body
    return struct.pack(">q", 8 + len(msg)) + msg


def _answer(reply: bytes) -> Literal["master", "no master", "unreadable"] | None:
    """The server's answer from a whole frame: the verifier's boolean from a RpcResponse
    (``master`` or ``no master``), ``unreadable`` from a RpcFailure; None when ``reply`` is
    neither to this request."""
    if len(reply) < RESPONSE_HEAD:
        return None
    length, kind, rid = struct.unpack(">qbq", reply[:17])
    if rid != REQUEST_ID or length != len(reply):
        return None
    if kind == RPC_FAILURE:
        return "unreadable"
    body = reply[RESPONSE_HEAD:]
    if kind == RPC_RESPONSE and body.startswith(BOOLEAN) and body[-1:] in (b"\x00", b"\x01"):
        return "master" if body[-1:] == b"\x01" else "no master"
    return None


def master_address_problem(master: str, wait_s: float = WAIT_S) -> str | None:
    """Why ``master`` (``spark://127.0.0.1:PORT``) is not a Spark master's RPC port, or None
    when its RPC server says a master runs there, or is a Spark RPC server that could not read
    the question (left to Spark's client)."""
    port = int(master.rsplit(":", 1)[1])
    try:
        s = socket.create_connection((LOOPBACK, port), timeout=2.0)
    except OSError:
        return f"nothing listens at {master} (`trimtab cluster up` starts one and prints its URL)"
    with s:
        reply, closed = _read_reply(s, port, wait_s)
    answer = _answer(reply)
    if answer == "no master":
        return (
            f"{master} is a Spark RPC server with no master there (a worker's or a driver's "
            f"port), not a Spark master's RPC port {WHERE}"
        )
    if answer is not None:  # a master, or a Spark RPC server that could not read the question
        return None
    if not reply:
        how = "closed the connection at" if closed else f"did not answer in {wait_s:g} s to"
        return f"{master} {how} a Spark RPC request: not a Spark master's RPC port {WHERE}"
    if spark := _spark_http(port):
        return f"{master} is {spark}"
    what = "an HTTP server" if reply.startswith(b"HTTP/") or b"<" in reply else "a server"
    return f"{master} answers as {what} does, not as a Spark master's RPC port {WHERE}"


def _read_reply(s: socket.socket, port: int, wait_s: float) -> tuple[bytes, bool]:
    """What the server at ``s`` says to the probe within ``wait_s`` (a Spark server's whole
    frame: a socket closed with unread data resets the connection, which a Spark server logs
    as an exception), and whether it closed the connection, or reset it, first."""
    reply = b""
    try:
        s.sendall(verifier_request(port) + b"\r\n\r\n")
        s.settimeout(wait_s)
        while True:
            if len(reply) >= 8:
                n = struct.unpack(">q", reply[:8])[0]
                if n > MAX_FRAME or len(reply) >= n:  # no answer to the probe, or a whole frame
                    return reply, False
            chunk = s.recv(65536)
            if not chunk:
                return reply, True
            reply += chunk
            if not reply.startswith(b"\x00"):  # not a frame length: another protocol's answer
                return reply, False
    except TimeoutError:
        return reply, False
    except OSError:  # a reset
        return reply, True


def _spark_http(port: int) -> str | None:
    """Which of a Spark master's HTTP ports ``port`` is, from its ``/json/`` page: the web UI
    names the master's URL; the REST submission server answers with its Spark version."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/json/", timeout=2.0) as r:
            body = r.read(1 << 20)
    except urllib.error.HTTPError as e:  # the REST server answers its own error page
        body = e.read(1 << 20)
    except OSError:
        return None
    try:
        page = json.loads(body)
    except ValueError:
        return None
    if not isinstance(page, dict):
        return None
    if isinstance(url := page.get("url"), str) and url.startswith("spark://"):
        return f"a Spark master's web UI; the master's URL is {url}"
    if "serverSparkVersion" in page:
        return "a Spark master's REST submission port, not its RPC port (7077 by default)"
    return None
