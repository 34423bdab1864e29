"""The HTTP/JSON transport: endpoints, retries, leader tracking, TLS, tokens."""

from __future__ import annotations

import json
import random
import select
import socket
import ssl
import struct
import sys
import threading
import time
from typing import Any
from urllib.parse import quote

from .errors import NoLeader, RaftlockError, UnknownOutcome, Unreachable, from_code

LEADER_ADDR_HEADER = "X-Raftlock-Leader-Addr"
_LEADER_KEY = LEADER_ADDR_HEADER.lower()
# One encoder and decoder for every request (json.dumps with options builds
# an encoder per call; loads of bytes detects their encoding first).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_decode = json.JSONDecoder().decode

#: How long one HTTP request may take, by default (seconds).
DEFAULT_REQUEST_TIMEOUT = 10.0
_MIN_BACKOFF, _MAX_BACKOFF = 0.05, 1.0
#: Idle connections kept per endpoint for reuse (more are closed).
MAX_IDLE_PER_ENDPOINT = 64


class _Endpoint:
    """One node's address: ``host:port``, ``http://host:port`` or ``https://host:port``."""

    def __init__(self, text: str) -> None:
        scheme, _, rest = text.rpartition("://")
        self.tls = scheme == "https"
        if scheme not in ("", "http", "https"):
            raise ValueError(f"endpoint {text!r}: scheme must be http or https")
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"endpoint {text!r}: want host:port")
        self.host = host.strip("[]")
        self.port = int(port)
        self.hostport = f"{host}:{port}"
        self.key = 0  # its place in the transport's list (set there)

    def __repr__(self) -> str:
        return ("https://" if self.tls else "http://") + self.hostport


class Transport:
    """Sends API requests to the cluster, retrying what fails transiently.

    Each attempt is bounded by ``request_timeout`` and by the call's own
    deadline. A request is retried on another node after a connection
    failure or ``no_leader``; after a failure that may have applied it
    (a timeout or reset after sending, ``unknown_outcome``) only when it is
    idempotent (an acquire with a holder id, a release, a keepalive).
    Answers name the leader (``X-Raftlock-Leader-Addr``); the next call goes
    there if it is one of the endpoints given.

    Connections are kept alive and reused (HTTP/1.1): a pool per endpoint
    of up to MAX_IDLE_PER_ENDPOINT idle connections, so that each thread
    in a request takes one and gives it back, as Go's net/http does. An
    idle connection the server closed is noticed before reuse (it polls
    readable) and dropped.
    """

    def __init__(
        self,
        endpoints: list[str],
        *,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        if not endpoints:
            raise ValueError("no endpoints")
        self._eps = [_Endpoint(e) for e in endpoints]
        for i, e in enumerate(self._eps):
            e.key = i
        self._tls = tls
        self.request_timeout = request_timeout
        self._mu = threading.Lock()
        self._cur = 0
        self._pool_mu = threading.Lock()
        self._idle: dict[int, list[_Conn]] = {i: [] for i in range(len(self._eps))}
        # The fixed header lines of every request (the token a secret: never
        # logged, never in an exception or repr).
        self._head = "Accept: application/json\r\n" + (f"Authorization: Bearer {token}\r\n" if token else "")

    def __repr__(self) -> str:
        return f"Transport({self._eps!r})"

    def _pick(self) -> _Endpoint:
        with self._mu:
            return self._eps[self._cur % len(self._eps)]

    def _follow(self, current: _Endpoint, leader: str | None) -> None:
        with self._mu:
            if leader:
                for i, e in enumerate(self._eps):
                    if e.hostport == leader or repr(e) == leader:
                        self._cur = i
                        return

    def _rotate(self, failed: _Endpoint) -> None:
        with self._mu:
            if self._eps[self._cur % len(self._eps)] is failed:
                self._cur = (self._cur + 1) % len(self._eps)

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        deadline: float | None = None,
        idempotent: bool = False,
        attempt_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Runs one API call until it has an answer or ``deadline``
        (time.monotonic()) passes; returns the JSON answer or raises the
        RaftlockError of its code."""
        backoff = _MIN_BACKOFF
        last: RaftlockError | None = None
        uncertain = False
        while True:
            now = time.monotonic()
            per = attempt_timeout if attempt_timeout is not None else self.request_timeout
            if deadline is not None:
                if now >= deadline:
                    if uncertain:
                        raise UnknownOutcome(f"{method} {_public(path)}: gave up; it may have been applied ({last})")
                    raise last or Unreachable(f"{method} {_public(path)}: no node answered in time")
                per = min(per, deadline - now)
            ep = self._pick()
            try:
                status, answer, leader = self._attempt(ep, method, path, body, per)
            except _Sent as e:
                # The request may have reached the cluster.
                self._rotate(ep)
                last = UnknownOutcome(f"{method} {_public(path)} via {ep!r}: {e.cause}")
                if not idempotent:
                    raise last from None
                uncertain = True
            except _NotSent as e:
                self._rotate(ep)
                last = Unreachable(f"{method} {_public(path)}: no answer at {ep!r} ({e.cause})")
            else:
                self._follow(ep, leader)
                if 200 <= status < 300:
                    return answer
                err = _error_of(status, answer)
                if err.code == "unknown_outcome" and idempotent:
                    uncertain, last = True, err
                elif err.code == "no_leader":
                    self._rotate(ep)
                    last = err
                else:
                    raise err
            time.sleep(min(backoff, max(0.0, (deadline - time.monotonic()) if deadline else backoff)) * random.uniform(0.5, 1.0))
            backoff = min(2 * backoff, _MAX_BACKOFF)

    def close(self) -> None:
        """Closes the idle connections. The transport stays usable: later
        calls open new ones."""
        with self._pool_mu:
            conns = [c for idle in self._idle.values() for c in idle]
            for idle in self._idle.values():
                idle.clear()
        for c in conns:
            c.close()

    def _take(self, ep: _Endpoint, timeout: float) -> _Conn:
        """An idle connection to ep that the server has not closed, or a new
        one (connected here: a failure is _NotSent)."""
        key = ep.key
        while True:
            with self._pool_mu:
                idle = self._idle[key]
                conn = idle.pop() if idle else None
            if conn is None:
                break
            if not conn.dropped():
                conn.arm(timeout)
                return conn
            conn.close()
        try:
            sock = socket.create_connection((ep.host, ep.port), timeout=timeout)
        except (OSError, socket.timeout) as e:
            raise _NotSent(_why(e)) from None
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.tls or self._tls is not None:
                ctx = self._tls or ssl.create_default_context()
                sock = ctx.wrap_socket(sock, server_hostname=ep.host)
        except (OSError, socket.timeout) as e:
            sock.close()
            raise _NotSent(_why(e)) from None
        conn = _Conn(sock, ep.hostport)
        conn.arm(timeout)
        return conn

    def _give(self, ep: _Endpoint, conn: _Conn) -> None:
        key = ep.key
        with self._pool_mu:
            idle = self._idle[key]
            if len(idle) < MAX_IDLE_PER_ENDPOINT:
                idle.append(conn)
                return
        conn.close()

    def _attempt(
        self, ep: _Endpoint, method: str, path: str, body: dict[str, Any] | None, timeout: float
    ) -> tuple[int, dict[str, Any], str | None]:
        timeout = max(timeout, 0.001)
        data = b"" if body is None else _encode(body).encode("utf-8")
        conn = self._take(ep, timeout)
        head = f"{method} {path} HTTP/1.1\r\nHost: {conn.hostport}\r\n{self._head}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        elif method in ("POST", "PUT", "DELETE"):
            head += "Content-Length: 0\r\n"
        try:
            status, headers, raw, close = conn.exchange(head.encode("latin-1") + b"\r\n" + data)
        except (OSError, socket.timeout, _BadAnswer) as e:
            conn.close()
            raise _Sent(_why(e)) from None
        except BaseException:
            conn.close()
            raise
        if close:
            conn.close()
        else:
            self._give(ep, conn)
        leader = headers.get(_LEADER_KEY)
        if leader is not None:
            leader = leader.strip()
        try:
            answer = _decode(raw.decode("utf-8")) if raw else {}
        except ValueError:
            answer = {"error": {"code": "internal", "message": f"HTTP {status}: an answer that is not JSON"}}
        return status, answer, leader


class _BadAnswer(Exception):
    """An answer that is not HTTP/1.x as the transport reads it."""


class _Conn:
    """One kept-alive HTTP/1.1 connection: a request is written with one
    send and its answer read straight from the socket (status line,
    headers, a Content-Length or chunked body), without http.client's
    general machinery (its e-mail header parser, a buffered file per
    answer, two sends per request).

    A plain TCP connection is a blocking socket whose reads and writes are
    bounded by the kernel (SO_RCVTIMEO, SO_SNDTIMEO), not by a Python
    timeout: with one, every recv and send is preceded by a poll, each a
    system call that gives up the interpreter lock, which 16 threads then
    hand to each other. The kernel timeout is only lowered when an
    attempt's bound is shorter, and a read it ends early is re-armed up to
    the attempt's own bound (``until``). A TLS connection keeps the socket
    module's timeout."""

    __slots__ = ("sock", "hostport", "buf", "plain", "until", "armed", "nread")

    def __init__(self, sock: socket.socket, hostport: str) -> None:
        self.sock = sock
        self.hostport = hostport
        self.buf = b""
        self.plain = not isinstance(sock, ssl.SSLSocket)
        self.until = 0.0  # time.monotonic() bound of the current attempt
        self.armed = 0.0  # the kernel timeout set on a plain socket (0: none yet)
        self.nread = 0  # bytes read off a plain socket: compared with the kernel's count
        if self.plain:
            sock.settimeout(None)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def arm(self, timeout: float) -> None:
        """Bounds the next exchange by ``timeout`` seconds."""
        if not self.plain:
            self.sock.settimeout(timeout)
            return
        self.until = time.monotonic() + timeout
        if self.armed == 0.0 or timeout < self.armed:
            self._kernel_timeout(timeout)

    def _kernel_timeout(self, t: float) -> None:
        t = max(t, 0.001)
        tv = _timeval(t)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self.armed = t

    def _recv(self) -> bytes:
        """One read off the socket, within the attempt's bound."""
        if not self.plain:
            return self.sock.recv(65536)
        while True:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:  # the kernel timeout ran out
                left = self.until - time.monotonic()
                if left <= 0:
                    raise socket.timeout("timed out") from None
                self._kernel_timeout(left)
                continue
            self.nread += len(chunk)
            return chunk

    def _send(self, data: bytes) -> None:
        if not self.plain:
            self.sock.sendall(data)
            return
        try:
            self.sock.sendall(data)
        except BlockingIOError:
            # A partial write may have gone out: the request is not resent.
            raise socket.timeout("timed out") from None

    def dropped(self) -> bool:
        """Whether the idle connection is unusable: bytes left over, or the
        server closed it or sent something unasked. A plain socket asks the
        kernel (TCP_INFO: the connection's state and the bytes it received,
        against those read), which takes no poll and keeps the interpreter
        lock; a TLS socket polls readable."""
        if self.buf:
            return True
        if self.plain and _TCP_INFO_OK:
            try:
                info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
            except OSError:
                return True
            if len(info) >= _TCP_INFO_LEN:
                return info[0] != _TCP_ESTABLISHED or int.from_bytes(info[128:136], "little") != self.nread
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        p = select.poll()
        p.register(self.sock, select.POLLIN)
        return bool(p.poll(0))

    def _fill(self) -> None:
        chunk = self._recv()
        if not chunk:
            raise _BadAnswer("connection closed")
        self.buf += chunk

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2 :]
                return line
            if len(self.buf) > _MAX_HEAD:
                raise _BadAnswer("header line too long")
            self._fill()

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes, bool]:
        """Sends one request; returns the answer's status, headers (names in
        lower case), body and whether the connection must be closed."""
        self._send(request)
        while True:
            while True:
                i = self.buf.find(b"\r\n\r\n")
                if i >= 0:
                    break
                if len(self.buf) > _MAX_HEAD:
                    raise _BadAnswer("header too long")
                self._fill()
            lines = self.buf[:i].decode("latin-1").split("\r\n")
            self.buf = self.buf[i + 4 :]
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise _BadAnswer(f"status line {lines[0][:40]!r}")
            status = int(parts[1])
            # Values are kept as sent (stripped where read): an answer
            # has eight headers, of which four are read.
            headers: dict[str, str] = {}
            for ln in lines[1:]:
                k, sep, v = ln.partition(":")
                if not sep:
                    raise _BadAnswer("malformed header")
                headers[k.strip().lower()] = v
            if status >= 200 or status == 101:
                break  # 1xx interim answers are skipped
        conn = headers.get("connection", "").strip().lower()
        close = conn == "close" or (parts[0] == "HTTP/1.0" and conn != "keep-alive")
        if status in (204, 304):
            return status, headers, b"", close
        if headers.get("transfer-encoding", "").strip().lower() == "chunked":
            body = bytearray()
            while True:
                size_line = self._line().split(b";", 1)[0].strip()
                try:
                    size = int(size_line, 16)
                except ValueError:
                    raise _BadAnswer("bad chunk size") from None
                if size == 0:
                    while self._line():  # trailers, then the empty line
                        pass
                    return status, headers, bytes(body), close
                if len(body) + size > _MAX_BODY:
                    raise _BadAnswer("answer too large")
                body += self._take(size)
                if self._take(2) != b"\r\n":
                    raise _BadAnswer("bad chunk end")
        if "content-length" in headers:
            try:
                n = int(headers["content-length"])  # int() takes the spaces
            except ValueError:
                raise _BadAnswer("bad Content-Length") from None
            if n < 0 or n > _MAX_BODY:
                raise _BadAnswer("bad Content-Length")
            return status, headers, self._take(n), close
        # No length: the body runs to the end of the connection.
        while True:
            chunk = self._recv()
            if not chunk:
                break
            self.buf += chunk
            if len(self.buf) > _MAX_BODY:
                raise _BadAnswer("answer too large")
        body, self.buf = self.buf, b""
        return status, headers, body, True


_MAX_HEAD = 64 << 10
_MAX_BODY = 64 << 20

# TCP_INFO (Linux): struct tcp_info's first byte is the state, and
# tcpi_bytes_received (since Linux 4.1) the u64 at offset 128.
_TCP_ESTABLISHED = 1
_TCP_INFO_LEN = 136
_TCP_INFO_OK = hasattr(socket, "TCP_INFO") and sys.platform.startswith("linux") and sys.byteorder == "little"


def _timeval(t: float) -> bytes:
    """A struct timeval of t seconds (the platform's longs)."""
    sec = int(t)
    return struct.pack("@ll", sec, int((t - sec) * 1e6))


class _Sent(Exception):
    def __init__(self, cause: str) -> None:
        self.cause = cause


class _NotSent(Exception):
    def __init__(self, cause: str) -> None:
        self.cause = cause


def _why(e: BaseException) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(e, _BadAnswer):
        return f"not an HTTP/1.1 answer ({e})"
    return type(e).__name__ + (f" ({e.strerror})" if isinstance(e, OSError) and e.strerror else "")


def _public(path: str) -> str:
    """The path with a session id (a secret) left out."""
    if path.startswith("/v1/sessions/"):
        rest = path[len("/v1/sessions/") :]
        tail = rest[rest.find("/") :] if "/" in rest else ""
        return "/v1/sessions/*" + tail
    return path


def _error_of(status: int, answer: dict[str, Any]) -> RaftlockError:
    e = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(e, dict):
        return from_code(str(e.get("code", "")), str(e.get("message", "")))
    if status in (502, 503, 504):
        return NoLeader(f"HTTP {status}")
    return RaftlockError(f"HTTP {status}")


def session_path(session_id: str, suffix: str = "") -> str:
    """The path of a session's route."""
    return "/v1/sessions/" + quote(session_id, safe="") + suffix
