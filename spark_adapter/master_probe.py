"""What answers at a standalone master's address, asked before Spark starts.

Pointed at a port that is not a master's RPC port (the master's web UI, its REST submission
port, any other server), Spark's application client retries for about a minute before it
gives up. The probe tells in well under a second: it sends the 8-byte length that starts a
Spark RPC frame and a blank line. A Spark RPC server waits for the rest of the frame and says
nothing (the master logs only that a client left, as for any client); an HTTP server answers
the malformed request at once. A Spark master's web UI is then asked for its JSON page, which
names the master's URL.
"""

from __future__ import annotations

import json
import socket
import struct
import urllib.error
import urllib.request

from spark_adapter.session import LOOPBACK

__all__ = ["master_address_problem"]

# a Spark RPC frame's length (64 bytes) and a blank line: an incomplete frame to Spark, a
# malformed request to an HTTP server
PROBE = struct.pack(">q", 64) + b"\r\n\r\n"


def master_address_problem(master: str, wait_s: float = 0.5) -> str | None:
    """Why ``master`` (``spark://127.0.0.1:PORT``) is not a Spark master's RPC port, or None
    when nothing there answered the probe within ``wait_s`` (a master, or a server that stays
    silent: Spark's own client then finds out, in about a minute)."""
    port = int(master.rsplit(":", 1)[1])
    try:
        s = socket.create_connection((LOOPBACK, port), timeout=2.0)
    except OSError:
        return f"nothing listens at {master} (`trimtab cluster up` starts one and prints its URL)"
    with s:
        try:
            s.sendall(PROBE)
            s.settimeout(wait_s)
            reply = s.recv(64)
        except OSError:  # a timeout (silence, as from a Spark RPC server), or a reset
            reply = b""
    if not reply:
        return None
    if spark := _spark_http(port):
        return f"{master} is {spark}"
    what = "an HTTP server" if reply.startswith(b"HTTP/") or b"<" in reply else "a server"
    return (
        f"{master} answers as {what} does, not as a Spark master's RPC port (7077 by default; "
        "`trimtab cluster status` prints the URL, and a master's web UI shows it at its top)"
    )


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
