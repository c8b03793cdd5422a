"""What answers at a standalone master's address, asked before Spark starts.

Pointed at a port that is not a master's RPC port (the master's web UI, its REST submission
port, any other server), Spark's application client retries for about a minute before it
gives up. The probe tells in milliseconds. It sends one request of Spark's transport protocol
(a ``StreamRequest`` frame for a file no Spark server serves) and a blank line. Any Spark RPC
server answers the request with a ``StreamFailure`` frame ("Stream ... was not found"), and
logs nothing of it; the blank line is an unfinished frame it waits on until the probe leaves.
An HTTP server answers the malformed request line with its error page, and a server that
speaks neither says nothing or closes. A Spark master's web UI is then asked for its JSON
page, which names the master's URL.

What the probe cannot tell is which Spark RPC server answered: a worker's or a driver's port
answers as a master's does, and Spark's own client finds that out, in about a minute
(``session.MasterRefused``).
"""

from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request

from spark_adapter.session import LOOPBACK

__all__ = ["master_address_problem"]

# Spark's transport protocol (spark-network-common, ``Message.Type``): a frame is its length
# (8 bytes, counting itself), the message type (1 byte) and the message; a StreamRequest is
# type 6 with the stream id as a length-prefixed string, and its refusal a StreamFailure, 8
STREAM_REQUEST, STREAM_FAILURE = 6, 8
STREAM_ID = b"/files/trimtab-master-probe"  # the /files/ of an RPC server that serves none
_REQUEST = struct.pack(">bi", STREAM_REQUEST, len(STREAM_ID)) + STREAM_ID
PROBE = struct.pack(">q", 8 + len(_REQUEST)) + _REQUEST + b"\r\n\r\n"
HEAD = 8 + len(_REQUEST)  # a StreamFailure's length, type and stream id; its error follows
WAIT_S = 3.0  # a master answers in milliseconds; a loaded machine gets seconds
WHERE = (
    "(7077 by default; `trimtab cluster status` prints the URL, and a master's web UI shows "
    "it at its top)"
)


def _stream_failure(reply: bytes) -> bool:
    """Whether ``reply`` opens with Spark's refusal of the probe's stream: a StreamFailure
    frame naming ``STREAM_ID``."""
    if len(reply) < HEAD:
        return False
    length, kind, id_len = struct.unpack(">qbi", reply[:13])
    return (
        kind == STREAM_FAILURE
        and length >= HEAD
        and id_len == len(STREAM_ID)
        and reply[13:HEAD] == STREAM_ID
    )


def master_address_problem(master: str, wait_s: float = WAIT_S) -> str | None:
    """Why ``master`` (``spark://127.0.0.1:PORT``) is not a Spark master's RPC port, or None
    when a Spark RPC server answered the probe there (a master's; a worker's or a driver's
    too, which Spark's client then refuses, in about a minute)."""
    port = int(master.rsplit(":", 1)[1])
    try:
        s = socket.create_connection((LOOPBACK, port), timeout=2.0)
    except OSError:
        return f"nothing listens at {master} (`trimtab cluster up` starts one and prints its URL)"
    with s:
        reply, closed = _read_reply(s, wait_s)
    if _stream_failure(reply):
        return None
    if not reply:
        how = "closed the connection at" if closed else f"did not answer in {wait_s:g} s to"
        return f"{master} {how} a Spark RPC request: not a Spark master's RPC port {WHERE}"
    if spark := _spark_http(port):
        return f"{master} is {spark}"
    what = "an HTTP server" if reply.startswith(b"HTTP/") or b"<" in reply else "a server"
    return f"{master} answers as {what} does, not as a Spark master's RPC port {WHERE}"


def _read_reply(s: socket.socket, wait_s: float) -> tuple[bytes, bool]:
    """What the server at ``s`` says to the probe within ``wait_s`` (a Spark server's whole
    StreamFailure frame: a socket closed with unread data resets the connection, which a
    master logs as an exception), and whether it closed the connection, or reset it, first."""
    reply = b""
    try:
        s.sendall(PROBE)
        s.settimeout(wait_s)
        while len(reply) < HEAD or (
            _stream_failure(reply) and len(reply) < struct.unpack(">q", reply[:8])[0]
        ):
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
    return reply, False


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
