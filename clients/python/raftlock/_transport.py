"""The HTTP/JSON transport: endpoints, retries, leader tracking, TLS, tokens."""

from __future__ import annotations

import http.client
import json
import random
import select
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import quote

from .errors import NoLeader, RaftlockError, UnknownOutcome, Unreachable, from_code

LEADER_ADDR_HEADER = "X-Raftlock-Leader-Addr"

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
        self._tls = tls
        self.__token = token  # a secret: never logged, never in an exception or repr
        self.request_timeout = request_timeout
        self._mu = threading.Lock()
        self._cur = 0
        self._pool_mu = threading.Lock()
        self._idle: dict[int, list[http.client.HTTPConnection]] = {i: [] for i in range(len(self._eps))}
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = "Bearer " + token

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

    def _take(self, ep: _Endpoint, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection to ep that the server has not closed, or a new
        one (connected here: a failure is _NotSent); and whether it was
        reused."""
        key = self._eps.index(ep)
        while True:
            with self._pool_mu:
                idle = self._idle[key]
                conn = idle.pop() if idle else None
            if conn is None:
                break
            if conn.sock is not None and not _dropped(conn.sock):
                conn.sock.settimeout(timeout)
                return conn, True
            conn.close()
        if ep.tls or self._tls is not None:
            ctx = self._tls or ssl.create_default_context()
            conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout, context=ctx)
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
        try:
            conn.connect()
        except (OSError, socket.timeout) as e:
            conn.close()
            raise _NotSent(_why(e)) from None
        if conn.sock is not None and conn.sock.family in (socket.AF_INET, socket.AF_INET6):
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def _give(self, ep: _Endpoint, conn: http.client.HTTPConnection) -> None:
        key = self._eps.index(ep)
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
        headers = self._headers
        data = None
        if body is not None:
            headers = dict(headers)
            headers["Content-Type"] = "application/json"
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        conn, _ = self._take(ep, timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, socket.timeout, http.client.HTTPException) as e:
            conn.close()
            raise _Sent(_why(e)) from None
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give(ep, conn)
        leader = resp.getheader(LEADER_ADDR_HEADER)
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"error": {"code": "internal", "message": f"HTTP {resp.status}: an answer that is not JSON"}}
        return resp.status, answer, leader


def _dropped(sock: socket.socket) -> bool:
    """Whether an idle connection's socket is readable: the server closed
    it (or sent something unasked); either way it is not reused."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(0))


class _Sent(Exception):
    def __init__(self, cause: str) -> None:
        self.cause = cause


class _NotSent(Exception):
    def __init__(self, cause: str) -> None:
        self.cause = cause


def _why(e: BaseException) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
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
