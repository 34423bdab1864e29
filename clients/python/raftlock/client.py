"""Client, Session and Lock: the raftlock client's promise in Python.

A Session keeps its lease alive with a keepalive every ttl/3 (every ttl/10 in
jeopardy) and tracks safe → jeopardy → safe or expired, counting the lease
from the *send* time of the last acknowledged keepalive. A Lock's ``lost``
event is set before the cluster could grant the lock to anyone else:
``lost_after(ttl, lock_delay)`` after that send time (docs/DESIGN.md, "The
client's promise"), or as soon as a keepalive answer names its grant as
revoked (``Lock.revoked`` then says why). A keepalive answer's release
requests set ``Lock.release_requested``.
"""

from __future__ import annotations

import itertools
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from . import _duration
from ._duration import Duration
from ._transport import DEFAULT_REQUEST_TIMEOUT, Transport, session_path
from .errors import (
    AlreadyHeld,
    InvalidArgument,
    LockBusy,
    LockRevoked,
    NotHolder,
    RaftlockError,
    SessionNotFound,
    WaitTimeout,
)
from .fence import EXCLUSIVE, MAX_SLOTS, SHARED, Sequencer, check_name

SAFE, JEOPARDY, EXPIRED, CLOSED = "safe", "jeopardy", "expired", "closed"

#: How long jeopardy may last before the client declares the session expired.
DEFAULT_GRACE = 15.0
#: The longest one waiting acquire request runs before it is re-issued.
LOCK_POLL_SLICE = 10.0
_LOST_LATENCY = 0.1
_MIN_JEOPARDY_RETRY = 0.1


def lost_margin(ttl: float, lock_delay: float) -> float:
    """How long before the earliest moment the cluster could grant a lock of
    the session to someone else its ``lost`` is set: 1% of ttl + lock-delay
    (clock-rate drift) plus 100 ms (the client's own latency)."""
    return (ttl + lock_delay) / 100 + _LOST_LATENCY


def lost_after(ttl: float, lock_delay: float) -> float:
    """How long after the send time of the last acknowledged keepalive a
    session's locks are lost: ttl + lock_delay − lost_margin."""
    return ttl + lock_delay - lost_margin(ttl, lock_delay)


class Client:
    """A client of a raftlock cluster.

    ``endpoints`` are the nodes' HTTP addresses (``"host:port"``, or
    ``"https://host:port"``); ``tls`` an ``ssl.SSLContext`` (with a client
    certificate, for ``--client-cert-auth``); ``token`` an ACL secret, sent
    as a bearer token, never logged nor put in an exception.
    """

    def __init__(
        self,
        endpoints: list[str],
        *,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
        request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self._t = Transport(list(endpoints), tls=tls, token=token, request_timeout=_duration.seconds(request_timeout))

    def __repr__(self) -> str:
        return f"Client({self._t!r})"

    def session(
        self,
        ttl: Duration | None = None,
        lock_delay: Duration | None = None,
        *,
        name: str = "",
        grace: Duration = DEFAULT_GRACE,
        on_state: Callable[[str], None] | None = None,
        timeout: Duration = 30.0,
    ) -> Session:
        """Opens a session (a context manager that closes it).

        ``ttl``: the lease (1 s – 5 min; None: the cluster's default, 15 s);
        ``lock_delay``: how long an expired session's locks stay unavailable
        (None: the default, 10 s; 0: none); ``on_state`` is called with each
        new state ("jeopardy", "safe", "expired", "closed") from the
        session's thread, and must return quickly."""
        return Session._open(self, ttl, lock_delay, name, _duration.seconds(grace), on_state, _duration.seconds(timeout))

    def lock_state(self, name: str, *, timeout: Duration = 30.0) -> dict[str, Any]:
        """The lock's state as the leader sees it (the JSON of GET /v1/lock)."""
        return self._t.call("GET", "/v1/lock?name=" + quote(name, safe=""), deadline=_deadline(timeout), idempotent=True)

    def watch(self, name: str, *, stop: threading.Event | None = None, wait: Duration = 10.0) -> Iterator[dict[str, Any]]:
        """Yields the state of lock ``name`` (GET /v1/lock's JSON): first its
        current state, then each change, from blocking queries (nothing
        polls). A slow reader skips intermediate states. Failures are retried
        a second later; the iteration ends when ``stop`` is set (checked
        between queries, so within ``wait`` seconds) or the caller stops."""
        try:
            check_name(name)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        w = _duration.seconds(wait)
        index, last = 0, None
        while stop is None or not stop.is_set():
            path = "/v1/lock?name=" + quote(name, safe="")
            if index:
                path += f"&index={index}&wait={_duration.to_wire(w)}"
            try:
                st = self._t.call(
                    "GET", path, deadline=time.monotonic() + w + 5, idempotent=True, attempt_timeout=w + 2
                )
            except InvalidArgument:
                raise
            except RaftlockError:
                if stop is not None:
                    stop.wait(1.0)
                else:
                    time.sleep(1.0)
                continue
            index = max(index, int(st.get("index", 0)))
            same = {k: v for k, v in st.items() if k != "index"}
            if same != last:
                last = same
                yield st

    def observe(self, name: str, *, stop: threading.Event | None = None) -> Iterator[Leader]:
        """Yields the leaders of election ``name``: the current one (if any),
        then every leader elected after it, in grant order, each once, from
        the lock's grant history; ``gap`` is set on a leader when leaders
        before it may be missing (the history did not reach back)."""
        started, known, gap = False, 0, False
        for st in self.watch(name, stop=stop):
            nxt: list[Leader] = []
            if not started:
                started = True
                ld = _leader_of(st)
                if ld is not None:
                    nxt.append(ld)
            else:
                since = int(st.get("grants_since", 0))
                if since == 0:
                    ld = _leader_of(st)
                    if ld is not None and ld.token > known:
                        nxt.append(ld)
                else:
                    for g in st.get("grants") or []:
                        if g.get("mode") == EXCLUSIVE and int(g["token"]) > known:
                            nxt.append(Leader(st.get("name", name), g.get("value", ""), int(g["token"]), g.get("session_name", "")))
                    nxt.sort(key=lambda ld: ld.token)
                    gap = gap or since > known + 1
            for ld in nxt:
                ld.gap = gap
                gap = False
                known = max(known, ld.token)
                yield ld
            known = max(known, int(st.get("index", 0)))


class Leader:
    """A leader of an election: what it campaigned with (``value``), its
    term's ``token`` and ``sequencer``, its session's name, and ``gap``:
    leaders elected between the previous one reported and this one may be
    missing."""

    def __init__(self, election: str, value: str, token: int, session_name: str = "") -> None:
        self.election = election
        self.value = value
        self.token = token
        self.session_name = session_name
        self.gap = False

    @property
    def sequencer(self) -> Sequencer:
        return Sequencer(self.election, EXCLUSIVE, self.token)

    def __repr__(self) -> str:
        return f"Leader({self.election!r}, value={self.value!r}, token={self.token}, gap={self.gap})"


def _leader_of(st: dict[str, Any]) -> Leader | None:
    holders = st.get("holders") or []
    if st.get("mode") != EXCLUSIVE or len(holders) != 1:
        return None
    h = holders[0]
    return Leader(st.get("name", ""), h.get("value", ""), int(h["token"]), h.get("session_name", ""))


def _deadline(timeout: Duration | None) -> float | None:
    return None if timeout is None else time.monotonic() + _duration.seconds(timeout)


@dataclass(frozen=True)
class ReleaseRequest:
    """Who asked a lock's holder to release it (docs/API.md, "Release
    requests"): the asking session's public handle and name, its holder id,
    and when (the leader's RFC 3339 time). Never a session id."""

    by_session_handle: str = ""
    by_session_name: str = ""
    by_holder: str = ""
    at: str = ""


def _grants(v: Any) -> list[dict[str, Any]]:
    """The grants a keepalive answer lists under a field (``revoked``,
    ``release_requested``): its objects, whatever else it holds left out."""
    if not isinstance(v, list):
        return []
    return [g for g in v if isinstance(g, dict)]


@dataclass(frozen=True)
class _Opened:
    """What opening a session on the cluster gave: Session's constructor
    arguments (the id a secret, never in a repr)."""

    transport: Transport
    session_id: str = field(repr=False)
    name: str
    ttl: float
    lock_delay: float
    grace: float
    on_state: Callable[[str], None] | None
    sent: float


class Session:
    """A session: a lease kept alive by keepalives from a thread of its own.

    Use it as a context manager (``with client.session(ttl=3.0) as s:``), or
    call close(). Its methods are safe for concurrent use."""

    def __init__(self, _opened: _Opened) -> None:
        """Use Client.session(), which opens the session on the cluster."""
        if not isinstance(_opened, _Opened):
            raise TypeError("use Client.session() to open a session")
        self._t = _opened.transport
        self.__id = _opened.session_id
        self.name = _opened.name
        self.ttl = _opened.ttl
        self.lock_delay = _opened.lock_delay
        self.grace = _opened.grace
        self._on_state = _opened.on_state
        # _mu is _cv's lock: the callers' paths take it bare (a Condition's
        # own __enter__ and __exit__ are Python calls).
        self._mu = threading.RLock()
        self._cv = threading.Condition(self._mu)
        self._state = SAFE
        self._acked_sent = _opened.sent  # send time of the last acknowledged request
        self._last_send = _opened.sent  # send time of the last keepalive
        self._lapsed = False  # past the lost deadline: locks are lost
        self._locks: set[Lock] = set()
        self._acquiring: set[str] = set()  # names an acquire is under way for
        # The grants the last keepalive answer named as revoked: a grant
        # whose acquire returns after that answer is lost at once.
        self._revoked: list[dict[str, Any]] = []
        self._stop = False
        self._events: list[str] = []
        # Holder ids: a random prefix per session and a counter, unique
        # without a read of the system's randomness (a system call) per lock.
        self._holder_prefix = secrets.token_hex(8)
        self._holder_seq = itertools.count(1)
        for target, name in ((self._keep, "keepalive"), (self._watch, "lease"), (self._notify, "events")):
            threading.Thread(target=target, name="raftlock-" + name, daemon=True).start()

    @classmethod
    def _open(
        cls,
        client: Client,
        ttl: Duration | None,
        lock_delay: Duration | None,
        name: str,
        grace: float,
        on_state: Callable[[str], None] | None,
        timeout: float,
    ) -> Session:
        body: dict[str, Any] = {"name": name}
        if ttl is not None:
            body["ttl"] = _duration.to_wire(ttl)
        if lock_delay is not None:
            body["lock_delay"] = _duration.to_wire(lock_delay)
        sent = time.monotonic()
        ans = client._t.call("POST", "/v1/sessions", body, deadline=sent + timeout)
        return cls(
            _Opened(
                transport=client._t,
                session_id=str(ans["id"]),
                name=name,
                ttl=_duration.from_wire(ans.get("ttl", "15s")),
                lock_delay=_duration.from_wire(ans.get("lock_delay", "0s")),
                grace=grace,
                on_state=on_state,
                sent=sent,
            )
        )

    def __repr__(self) -> str:
        return f"Session(name={self.name!r}, ttl={self.ttl}, state={self.state!r})"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def id(self) -> str:
        """The session id: a secret capability (whoever knows it can release
        the session's locks or close it). Never log it."""
        return self.__id

    @property
    def state(self) -> str:
        """"safe", "jeopardy", "expired" or "closed"."""
        with self._cv:
            return self._state

    @property
    def safe(self) -> bool:
        """Whether the session's locks can be trusted now."""
        return self.state == SAFE

    def lost_deadline(self) -> float:
        """The time.monotonic() moment every lock of the session is lost
        unless a keepalive is acknowledged before."""
        with self._cv:
            return self._acked_sent + lost_after(self.ttl, self.lock_delay)

    # ---- the lease ----

    def _set_state(self, st: str) -> None:
        # with self._cv held
        if self._state != st:
            self._state = st
            self._events.append(st)
            self._cv.notify_all()

    def _notify(self) -> None:
        """Calls on_state with each new state, in order, off the lease's
        threads (a slow callback never delays a lost signal)."""
        while True:
            with self._cv:
                while not self._events and not (self._stop and self._state in (EXPIRED, CLOSED)):
                    self._cv.wait()
                if not self._events:
                    return
                st = self._events.pop(0)
            if self._on_state is not None:
                try:
                    self._on_state(st)
                except Exception:  # the caller's bug must not stop the session
                    pass
            if st in (EXPIRED, CLOSED):
                return

    def _keep(self) -> None:
        """Sends keepalives: every ttl/3 while safe, every ttl/10 in jeopardy."""
        while True:
            with self._cv:
                if self._stop:
                    return
                jeopardy = self._state == JEOPARDY
                last = self._last_send
                interval = max(self.ttl / 10, _MIN_JEOPARDY_RETRY) if jeopardy else self.ttl / 3
                wake = last + interval
                now = time.monotonic()
                if now < wake:
                    self._cv.wait(wake - now)
                    continue
                self._last_send = now
            sent = now
            try:
                ans = self._t.call(
                    "POST",
                    session_path(self.__id, "/keepalive"),
                    deadline=sent + max(self.ttl / 3, _MIN_JEOPARDY_RETRY),
                    idempotent=True,
                )
            except SessionNotFound:
                self._end(EXPIRED)
                return
            except RaftlockError:
                continue
            revoked = _grants(ans.get("revoked"))
            requested = _grants(ans.get("release_requested"))
            with self._cv:
                if self._stop:
                    return
                # A revoked grant is lost, and gone from the cluster (no
                # release): before anything else of the answer.
                self._revoked = revoked
                hit = [(lk, g) for lk in self._locks for g in revoked if lk._is(g)]
                for lk, _ in hit:
                    self._locks.discard(lk)
                asked = [(lk, g) for lk in self._locks for g in requested if lk._is(g)]
                if sent > self._acked_sent:
                    self._acked_sent = sent
                    try:
                        self.ttl = _duration.from_wire(ans.get("ttl", "")) or self.ttl
                    except ValueError:
                        pass
                recovered = self._state == JEOPARDY and time.monotonic() < self._acked_sent + self.ttl
                if recovered:
                    self._lapsed = False
                    self._set_state(SAFE)
                    stale = [lk for lk in self._locks if lk._is_lost]
                else:
                    stale = []
                self._cv.notify_all()
            for lk, g in hit:
                lk._revoke(g)
            for lk, g in asked:
                lk._ask(g)
            for lk in stale:  # lost while in jeopardy: give it back
                threading.Thread(target=lk._release_quietly, daemon=True).start()

    def _watch(self) -> None:
        """Fires jeopardy, lost and expiry on time, whatever the keepalives do."""
        while True:
            to_lose: list[Lock] = []
            with self._cv:
                if self._stop:
                    return
                now = time.monotonic()
                s = self._acked_sent
                lost_at = s + lost_after(self.ttl, self.lock_delay)
                jeopardy_at = min(s + self.ttl, lost_at)
                expire_at = s + self.ttl + self.grace
                expired = now >= expire_at
                if not expired:
                    if now >= jeopardy_at and self._state == SAFE:
                        self._set_state(JEOPARDY)
                    if now >= lost_at and not self._lapsed:
                        self._lapsed = True
                        to_lose = list(self._locks)
                    if not to_lose:
                        pending = [t for t in (jeopardy_at, lost_at, expire_at) if t > now]
                        self._cv.wait(min(pending) - now)
                        continue
            for lk in to_lose:
                lk._lose()
            if expired:
                self._end(EXPIRED)
                return

    def _end(self, st: str) -> None:
        with self._cv:
            if self._state in (EXPIRED, CLOSED):
                return
            self._stop = True
            self._set_state(st)
            locks = list(self._locks)
            self._locks.clear()
            self._cv.notify_all()
        for lk in locks:
            lk._lose()

    def close(self, timeout: Duration = 30.0) -> None:
        """Ends the session: every lock is lost at once and released by the
        cluster without lock-delay. Repeated calls do nothing."""
        with self._cv:
            over = self._state in (EXPIRED, CLOSED)
        if over:
            return
        self._end(CLOSED)
        try:
            self._t.call("DELETE", session_path(self.__id), deadline=_deadline(timeout), idempotent=True)
        except SessionNotFound:
            pass

    # ---- locks ----

    def lock(
        self, name: str, shared: bool = False, *, wait: Duration | None = None, value: str = "", permits: int = 0
    ) -> Lock:
        """A lock handle on ``name``, not yet acquired: ``with
        session.lock(name):`` acquires it (waiting up to ``wait`` seconds,
        None: as long as it takes) and releases it; or call acquire() and
        release(). ``permits`` N (1 to 256, exclusive only) takes one slot of
        the semaphore ``name`` of N slots (``lock.slot``; every holder and
        waiter asks for the same N); 0, the default: a plain lock."""
        return Lock(self, name, SHARED if shared else EXCLUSIVE, wait, value, permits)

    def campaign(self, name: str, value: str = "", *, wait: Duration | None = None) -> Lock:
        """Blocks until this session leads election ``name`` (campaigners are
        elected in the order they began, FIFO), publishing ``value`` to
        observers; returns the leadership, a Lock: act as leader while its
        ``lost`` is clear, and resign() (release()) to hand over at once."""
        lk = Lock(self, name, EXCLUSIVE, wait, value)
        lk.acquire()
        return lk

    def try_lock(self, name: str, shared: bool = False, *, value: str = "", permits: int = 0) -> Lock:
        """Acquires ``name`` (a slot of it, with ``permits``: see lock()) if
        it is free now; raises LockBusy otherwise."""
        lk = Lock(self, name, SHARED if shared else EXCLUSIVE, 0, value, permits)
        lk.acquire()
        return lk

    def request_release(self, name: str, *, timeout: Duration = 30.0) -> None:
        """Asks the holders of lock ``name`` to release it, on behalf of this
        session (POST /v1/locks/request-release; write on the lock): each
        sees it at its next keepalive (``Lock.release_requested``) and
        chooses. A lock not held raises RaftlockError ``not_found``."""
        try:
            check_name(name)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        self._check_open()
        body = {"name": name, "session": self.__id, "holder": "request-" + secrets.token_hex(8)}
        self._t.call("POST", "/v1/locks/request-release", body, deadline=_deadline(timeout), idempotent=True)

    def _check_open(self) -> None:
        with self._mu:
            if self._state in (EXPIRED, CLOSED):
                raise SessionNotFound(f"session {self.name!r} is {self._state}")

    def _claim(self, lk: Lock) -> None:
        """Marks an acquire of lk's name under way, or raises AlreadyHeld
        while the session holds that name (a Lock not yet released, lost or
        not) or acquires it already: locks are not re-entrant, and a second
        grant to the same session would wait on the first forever."""
        with self._mu:
            for other in self._locks:
                if other.name == lk.name:
                    raise AlreadyHeld(
                        f"lock {lk.name!r}: this session already holds it (holder {other.holder}, "
                        f"token {other.token}); locks are not re-entrant: release it first, or use the Lock you have"
                    )
            if lk.name in self._acquiring:
                raise AlreadyHeld(
                    f"lock {lk.name!r}: this session is acquiring it already; locks are not re-entrant: "
                    "one grant (or attempt) per session and lock"
                )
            self._acquiring.add(lk.name)

    def _unclaim(self, name: str) -> None:
        with self._mu:
            self._acquiring.discard(name)

    def _register(self, lk: Lock) -> None:
        with self._mu:
            if self._state in (EXPIRED, CLOSED):
                raise SessionNotFound(f"session {self.name!r} is {self._state}")
            self._locks.add(lk)
            lapsed = self._lapsed
            hit = [g for g in self._revoked if lk._is(g)]
            if hit:
                self._locks.discard(lk)
        if hit:
            lk._revoke(hit[0])
        if lapsed:
            lk._lose()

    def _forget(self, lk: Lock) -> None:
        with self._mu:
            self._locks.discard(lk)

    def _new_holder(self) -> str:
        """A holder id not used before: 32 hex digits, the session's random
        prefix and a counter (next() of itertools.count is atomic)."""
        return f"{self._holder_prefix}{next(self._holder_seq):016x}"

    def _lease_budget(self) -> float:
        """How long a request may take before the lease could lapse."""
        return max(self.lost_deadline() - time.monotonic(), _MIN_JEOPARDY_RETRY)


class Lock:
    """One grant of a lock to a session (one holder id for its lifetime).

    ``lost`` (a threading.Event) is set when the grant can no longer be
    trusted, always before the cluster could grant the lock to anyone else;
    ``on_lost`` callbacks run then, on the session's thread. ``revoked`` is
    a LockRevoked (set before ``lost``) when the cluster revoked the grant,
    else None. ``release_requested`` (a threading.Event) is set when another
    session asked the holder to release (``requested_by`` says who; the
    holder chooses whether to). ``permits`` is the semaphore's permits the
    lock is taken with (0: a plain lock), and ``slot`` the slot granted
    (None before the grant and on a plain lock), which its sequencer names
    (``rl1:p<slot>/<permits>:<token>:<name>``)."""

    def __init__(
        self, session: Session, name: str, mode: str, wait: Duration | None, value: str, permits: int = 0
    ) -> None:
        self.session = session
        self.name = name
        self.mode = mode
        self.value = value
        self.permits = permits
        self.holder = session._new_holder()
        # lost and release_requested are threading.Events made when first
        # asked for (most grants are released without anyone looking: two
        # Events are most of a Lock's cost); the flags are the truth, kept
        # under _mu, and an Event made later starts set when its flag is.
        self._is_lost = False
        self._lost_ev: threading.Event | None = None
        self.revoked: LockRevoked | None = None
        self._is_asked = False
        self._asked_ev: threading.Event | None = None
        self.requested_by: ReleaseRequest | None = None
        self._asked_callbacks: list[Callable[[Lock], None]] = []
        self.sequencer: Sequencer | None = None
        self._wait = None if wait is None else _duration.seconds(wait)
        self._callbacks: list[Callable[[Lock], None]] = []
        self._mu = threading.Lock()
        self._held = False

    def __repr__(self) -> str:
        return f"Lock({self.name!r}, {self.mode}, sequencer={str(self.sequencer) if self.sequencer else None})"

    @property
    def slot(self) -> int | None:
        """The semaphore slot granted (0 to permits - 1); None before the
        grant and on a plain lock."""
        return self.sequencer.slot if self.sequencer is not None else None

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def lost(self) -> threading.Event:
        """Set when the grant can no longer be trusted (see the class)."""
        with self._mu:
            if self._lost_ev is None:
                self._lost_ev = threading.Event()
                if self._is_lost:
                    self._lost_ev.set()
            return self._lost_ev

    @property
    def release_requested(self) -> threading.Event:
        """Set when another session asked the holder to release the lock."""
        with self._mu:
            if self._asked_ev is None:
                self._asked_ev = threading.Event()
                if self._is_asked:
                    self._asked_ev.set()
            return self._asked_ev

    @property
    def token(self) -> int:
        """The grant's fencing token (0 before the grant)."""
        return self.sequencer.token if self.sequencer else 0

    def on_lost(self, f: Callable[[Lock], None]) -> None:
        """Calls f(lock) when the lock is lost (at once if it already is)."""
        with self._mu:
            if not self._is_lost:
                self._callbacks.append(f)
                return
        f(self)

    def on_release_requested(self, f: Callable[[Lock], None]) -> None:
        """Calls f(lock) when another session asks the holder to release the
        lock (at once if one has), from the session's thread."""
        with self._mu:
            if not self._is_asked:
                self._asked_callbacks.append(f)
                return
        f(self)

    def _is(self, g: dict[str, Any]) -> bool:
        """Whether a keepalive answer's grant g is this lock's grant."""
        try:
            token = int(g.get("token", 0))
        except (TypeError, ValueError):
            return False
        return self.token != 0 and g.get("name") == self.name and g.get("holder") == self.holder and token == self.token

    def _revoke(self, g: dict[str, Any]) -> None:
        """Loses the lock, revoked as g says (the grant is gone on the
        cluster: nothing to release)."""
        with self._mu:
            if self.revoked is None:
                self.revoked = LockRevoked(self.name, self.token, str(g.get("kind") or "admin"), str(g.get("reason") or ""))
            self._held = False
        self._lose()

    def _ask(self, g: dict[str, Any]) -> None:
        """Sets release_requested, once, with who asked."""
        with self._mu:
            if self._is_asked:
                return
            self.requested_by = ReleaseRequest(
                str(g.get("by_session_handle", "")),
                str(g.get("by_session_name", "")),
                str(g.get("by_holder", "")),
                str(g.get("at", "")),
            )
            self._is_asked = True
            if self._asked_ev is not None:
                self._asked_ev.set()
            cbs, self._asked_callbacks = self._asked_callbacks, []
        for f in cbs:
            try:
                f(self)
            except Exception:
                pass

    def _lose(self) -> None:
        with self._mu:
            if self._is_lost:
                return
            self._is_lost = True
            if self._lost_ev is not None:
                self._lost_ev.set()
            cbs, self._callbacks = self._callbacks, []
        for f in cbs:
            try:
                f(self)
            except Exception:
                pass

    def acquire(self) -> Lock:
        """Acquires the lock: once (wait 0), for up to ``wait`` seconds, or
        for as long as it takes (wait None). Raises LockBusy (try),
        WaitTimeout (the wait ran out), SessionNotFound (the session is over),
        InvalidArgument, or AlreadyHeld at once, without asking the cluster,
        when the session holds the name already or acquires it (locks are
        not re-entrant: one grant per session and name).

        A grant answered lost_after(ttl, lock_delay) or more after its
        request was sent is not trusted (a revocation may have come and gone
        meanwhile): the request is sent again, and only an answer in time is
        taken. If the grant is gone by then, a try raises LockBusy and a
        wait waits on."""
        s = self.session
        try:
            check_name(self.name)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        p = self.permits
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= MAX_SLOTS:
            raise InvalidArgument(f"lock {self.name!r}: permits is {p!r}; it must be 0 (a plain lock) to {MAX_SLOTS}")
        if p and self.mode != EXCLUSIVE:
            raise InvalidArgument(f"lock {self.name!r}: a semaphore's slots are exclusive: permits with shared")
        s._check_open()
        s._claim(self)
        try:
            return self._acquire()
        finally:
            s._unclaim(self.name)

    def _acquire(self) -> Lock:
        s = self.session
        body: dict[str, Any] = {"name": self.name, "session": s.id, "holder": self.holder, "mode": self.mode}
        if self.value:
            body["value"] = self.value
        if self.permits:
            body["permits"] = self.permits
        waiting = self._wait is None or self._wait > 0
        until = None if self._wait is None else time.monotonic() + self._wait
        uncertain = False
        while True:
            attempt: float | None = None
            if waiting:
                left = 600.0 if until is None else until - time.monotonic()
                if left <= 0:
                    self._abandon(uncertain)
                    raise WaitTimeout(f"lock {self.name!r}: the wait ran out")
                body["wait"] = _duration.to_wire(min(left, 600.0))
                # The server holds a waiting request up to the slice; its
                # answer gets a second more to arrive.
                attempt = min(left, LOCK_POLL_SLICE) + 1.0
                slice_end = time.monotonic() + attempt
            else:
                slice_end = time.monotonic() + max(s._lease_budget(), s._t.request_timeout)
            sent = time.monotonic()
            try:
                ans = s._t.call(
                    "POST", "/v1/acquire", body, deadline=slice_end, idempotent=True, attempt_timeout=attempt
                )
            except WaitTimeout:
                uncertain = False
                if self._wait is None or time.monotonic() < until:  # type: ignore[operator]
                    continue
                raise
            except RaftlockError as e:
                if e.code in ("unknown_outcome", "unreachable") and waiting:
                    uncertain = True  # the slice ended: ask again, same holder
                    continue
                if e.code == "lock_busy":
                    uncertain = False
                if e.code == "session_not_found":
                    s._end(EXPIRED)
                if uncertain:
                    self._abandon(True)
                raise
            if time.monotonic() - sent >= lost_after(s.ttl, s.lock_delay):
                # Too late to trust: a revocation may have come and left
                # the keepalive answers meanwhile. Ask again (same holder:
                # the same grant if still held); only a timely answer counts.
                uncertain = True
                continue
            seq = ans.get("sequencer")
            if seq:
                self.sequencer = Sequencer.parse(seq)
            elif self.permits:
                self.sequencer = Sequencer(
                    ans.get("name", self.name), EXCLUSIVE, int(ans["token"]), int(ans["slot"]), self.permits
                )
            else:
                self.sequencer = Sequencer(ans.get("name", self.name), ans.get("mode", self.mode), int(ans["token"]))
            self._held = True
            s._register(self)
            return self

    def _abandon(self, uncertain: bool) -> None:
        """Gives back, in the background, a place or grant an abandoned
        acquire may hold."""
        if uncertain:
            threading.Thread(target=self._release_quietly, daemon=True).start()

    def _release_quietly(self) -> None:
        try:
            self._send_release()
        except RaftlockError:
            pass

    def _send_release(self) -> None:
        s = self.session
        body = {"name": self.name, "session": s.id, "holder": self.holder}
        try:
            s._t.call("POST", "/v1/release", body, deadline=time.monotonic() + max(s.ttl, s._t.request_timeout), idempotent=True)
        except (NotHolder, SessionNotFound):
            pass

    def resign(self) -> None:
        """Gives a leadership up (release): the next campaigner is elected
        at once."""
        self.release()

    def release(self) -> None:
        """Releases the lock (setting ``lost`` first). Once it has
        succeeded, or once the session is over, it does nothing."""
        self._lose()
        if not self._held:
            return
        with self.session._mu:
            over = self.session._state in (EXPIRED, CLOSED)
        if not over:
            self._send_release()
        self._held = False
        self.session._forget(self)
