"""Unit tests of the client's arithmetic and its transport, against a local
HTTP server on 127.0.0.1 (no cluster)."""

import http.server
import json
import threading
import time
from datetime import timedelta

import pytest

import raftlock
from raftlock import _duration
from raftlock._transport import Transport, _public


def test_lost_after_is_lease_plus_delay_minus_margin():
    # 1% of ttl + lock-delay, plus 100 ms, as the Go client (session.LostAfter).
    assert raftlock.lost_margin(15, 10) == pytest.approx(0.35)
    assert raftlock.lost_after(15, 10) == pytest.approx(24.65)
    assert raftlock.lost_after(1, 0) == pytest.approx(0.89)


@pytest.mark.parametrize(
    "text,secs",
    [("15s", 15), ("1m0s", 60), ("1.5s", 1.5), ("500ms", 0.5), ("0s", 0), ("1h2m3s", 3723), ("250us", 0.00025)],
)
def test_durations_from_the_wire(text, secs):
    assert _duration.from_wire(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["", "s", "15", "1x", "1.5.s"])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError):
        _duration.from_wire(bad)


def test_durations_to_the_wire_take_seconds_or_timedelta():
    assert _duration.to_wire(3) == "3s"
    assert _duration.to_wire(1.5) == "1500ms"
    assert _duration.to_wire(timedelta(minutes=1)) == "60s"
    with pytest.raises(TypeError):
        _duration.to_wire("3s")


def test_session_ids_are_left_out_of_paths_in_errors():
    assert _public("/v1/sessions/secret123/keepalive") == "/v1/sessions/*/keepalive"
    assert _public("/v1/sessions/secret123") == "/v1/sessions/*"
    assert _public("/v1/acquire") == "/v1/acquire"


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers as scripted by the server's ``script``: a list of (status,
    body, headers) consumed per request, or (status, body, headers, hook)
    whose hook(server) runs before the answer is sent (to hold it back);
    records requests."""

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        self.server.seen.append((self.path, body, dict(self.headers)))
        if self.server.auto_keepalive and self.path.endswith("/keepalive"):
            status, ans, hdrs = 200, {"ttl": "1s", **self.server.keepalive_extra}, {}
            self.server.keepalives += 1
        else:
            step = self.server.script.pop(0)
            status, ans, hdrs = step[:3]
            if len(step) > 3:
                step[3](self.server)
        if status is None:
            self.server.hold.wait(5)  # an answer that never comes (until the test ends)
            return
        raw = json.dumps(ans).encode()
        self.send_response(status)
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_DELETE = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.script, srv.seen, srv.hold = [], [], threading.Event()
    srv.auto_keepalive = True  # keepalives answered apart from the script
    srv.keepalive_extra, srv.keepalives = {}, 0  # fields every keepalive answer adds; answers sent
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.hold.set()
    srv.shutdown()
    srv.server_close()


def addr(srv):
    return f"127.0.0.1:{srv.server_address[1]}"


def test_an_idempotent_request_is_retried_after_unknown_outcome_with_the_same_body(server):
    server.script = [
        (503, {"error": {"code": "unknown_outcome", "message": "leadership lost"}}, {}),
        (200, {"name": "a", "mode": "exclusive", "token": 7, "sequencer": "rl1:x:7:a"}, {}),
    ]
    t = Transport([addr(server)], request_timeout=2)
    ans = t.call("POST", "/v1/acquire", {"holder": "h1"}, deadline=time.monotonic() + 5, idempotent=True)
    assert ans["token"] == 7
    assert [b["holder"] for _, b, _ in server.seen] == ["h1", "h1"]


def test_a_lost_answer_of_an_idempotent_request_is_retried(server):
    server.script = [(None, None, {}), (200, {"released": True}, {})]
    t = Transport([addr(server)], request_timeout=0.3)
    assert t.call("POST", "/v1/release", {"holder": "h"}, deadline=time.monotonic() + 5, idempotent=True) == {
        "released": True
    }


def test_a_lost_answer_of_a_non_idempotent_request_is_an_unknown_outcome(server):
    server.script = [(None, None, {})]
    t = Transport([addr(server)], request_timeout=0.3)
    with pytest.raises(raftlock.UnknownOutcome):
        t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5)


def test_error_codes_become_their_classes(server):
    server.script = [(409, {"error": {"code": "lock_busy", "message": "held"}}, {})]
    t = Transport([addr(server)])
    with pytest.raises(raftlock.LockBusy) as e:
        t.call("POST", "/v1/acquire", {}, deadline=time.monotonic() + 5)
    assert e.value.code == "lock_busy"


def test_the_leader_named_by_an_answer_gets_the_next_call(server):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    other.script, other.seen, other.hold = [], [], threading.Event()
    other.auto_keepalive = False
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        server.script = [(200, {}, {"X-Raftlock-Leader-Addr": addr(other)})]
        other.script = [(200, {}, {})]
        t = Transport([addr(server), addr(other)])
        t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 5)
        t.call("POST", "/v1/y", {}, deadline=time.monotonic() + 5)
        assert [p for p, _, _ in other.seen] == ["/v1/y"]
    finally:
        other.shutdown()
        other.server_close()


def test_the_token_is_sent_and_never_shown(server):
    server.script = [(403, {"error": {"code": "permission_denied", "message": "no"}}, {})]
    t = Transport([addr(server)], token="s3cret-token")
    with pytest.raises(raftlock.RaftlockError) as e:
        t.call("POST", "/v1/acquire", {}, deadline=time.monotonic() + 5)
    assert server.seen[0][2]["Authorization"] == "Bearer s3cret-token"
    assert "s3cret" not in str(e.value) and "s3cret" not in repr(t)


def open_session(server, ttl="1s", lock_delay="0s", on_state=None):
    server.script.append((200, {"id": "sid-secret", "ttl": ttl, "lock_delay": lock_delay}, {}))
    c = raftlock.Client([addr(server)], request_timeout=0.2)
    return c.session(ttl=1.0, lock_delay=0, grace=0.5, on_state=on_state)


def test_a_lock_is_lost_before_its_lease_plus_delay_when_keepalives_stop(server):
    # Keepalives are never answered (the script holds them): the lock's
    # lost event must be set lost_after(ttl, delay) after the open's send.
    states, expired = [], threading.Event()

    def on_state(st):
        states.append(st)
        if st == raftlock.EXPIRED:
            expired.set()

    server.auto_keepalive = False  # keepalives take the script's held answers
    start = time.monotonic()
    s = open_session(server, on_state=on_state)
    server.script.append((200, {"name": "a", "mode": "exclusive", "token": 3, "sequencer": "rl1:x:3:a"}, {}))
    server.script.extend([(None, None, {})] * 50)
    lk = s.try_lock("a")
    assert lk.sequencer == raftlock.Sequencer("a", "exclusive", 3)
    assert lk.lost.wait(3)
    assert time.monotonic() - start < 1.0  # lost at lost_after(1, 0) = 0.89 s after the open's send at the latest
    assert expired.wait(3)
    assert states == [raftlock.JEOPARDY, raftlock.EXPIRED]
    assert "sid-secret" not in repr(s) and "sid-secret" not in repr(lk)


def test_an_acquire_on_a_closed_session_is_session_not_found(server):
    s = open_session(server)
    server.script.extend([(200, {"closed": True}, {})] + [(200, {"ttl": "1s"}, {})] * 10)
    s.close()
    with pytest.raises(raftlock.SessionNotFound):
        s.try_lock("a")


def test_bad_lock_names_are_refused_before_sending(server):
    s = open_session(server)
    server.script.extend([(200, {"ttl": "1s"}, {})] * 10)
    n = len(server.seen)
    for bad in ["", "a\x01b", "x" * 513]:
        with pytest.raises(raftlock.InvalidArgument):
            s.try_lock(bad)
    assert not [p for p, _, _ in server.seen[n:] if p == "/v1/acquire"]


def test_a_long_wait_is_reissued_in_slices_with_the_same_holder(server, monkeypatch):
    # A waiting acquire whose request goes unanswered past its slice asks
    # again with the same holder id: the cluster finds its queue place.
    monkeypatch.setattr(raftlock.client, "LOCK_POLL_SLICE", 0.2)
    s = open_session(server)
    server.script.extend(
        [(None, None, {}), (200, {"name": "q", "mode": "exclusive", "token": 5, "sequencer": "rl1:x:5:q"}, {})]
    )
    lk = s.lock("q", wait=30.0)
    lk.acquire()
    acquires = [b for p, b, _ in server.seen if p == "/v1/acquire"]
    assert len(acquires) == 2
    assert acquires[0]["holder"] == acquires[1]["holder"] == lk.holder
    assert all("wait" in b for b in acquires)
    assert lk.token == 5


def test_a_lock_the_session_holds_fails_at_once_with_already_held(server):
    # Locks are not re-entrant: a second acquire of a name the session holds
    # (any mode, any Lock object) or acquires fails at once, naming the lock
    # and the holder, without a request; once released, the name is free.
    s = open_session(server)
    server.script.append((200, {"name": "a", "mode": "exclusive", "token": 3, "sequencer": "rl1:x:3:a"}, {}))
    lk = s.try_lock("a")
    n = len([p for p, _, _ in server.seen if p == "/v1/acquire"])
    for again in (lambda: s.try_lock("a"), lambda: s.try_lock("a", shared=True), lk.acquire, s.lock("a").acquire):
        with pytest.raises(raftlock.AlreadyHeld) as e:
            again()
        assert e.value.code == "already_held"
        assert "'a'" in str(e.value) and lk.holder in str(e.value) and "sid-secret" not in str(e.value)
    assert len([p for p, _, _ in server.seen if p == "/v1/acquire"]) == n
    server.script.append((200, {"released": True}, {}))
    lk.release()
    server.script.append((200, {"name": "a", "mode": "exclusive", "token": 5, "sequencer": "rl1:x:5:a"}, {}))
    assert s.try_lock("a").token == 5


def test_a_second_acquire_while_one_waits_fails_with_already_held(server):
    s = open_session(server)
    # The first acquire's answer never comes; its abandoned place is then
    # given back (a release).
    server.script.extend([(None, None, {}), (200, {"released": True}, {})])
    first = s.lock("q", wait=1.0)

    def acquire_quietly():
        try:
            first.acquire()
        except raftlock.RaftlockError:
            pass  # its wait runs out: the script answers it nothing

    t = threading.Thread(target=acquire_quietly, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not [p for p, _, _ in server.seen if p == "/v1/acquire"] and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(raftlock.AlreadyHeld) as e:
        s.try_lock("q")
    assert "acquiring" in str(e.value)
    t.join(10)


def keepalives_answered(server, n, timeout=5.0):
    """Waits until n more keepalives were answered (with what the server
    answers now)."""
    want = server.keepalives + n
    deadline = time.monotonic() + timeout
    while server.keepalives < want:
        assert time.monotonic() < deadline, "no keepalive answered"
        time.sleep(0.02)


def grant(server, name, token):
    server.script.append((200, {"name": name, "mode": "exclusive", "token": token, "sequencer": f"rl1:x:{token}:{name}"}, {}))


def test_a_revoked_grant_is_lost_at_the_next_keepalive_with_the_operators_reason(server):
    s = open_session(server)
    grant(server, "a", 3)
    lk = s.try_lock("a")
    reasons = []
    lk.on_lost(lambda l: reasons.append(l.revoked))
    server.keepalive_extra = {
        "revoked": [{"name": "a", "holder": lk.holder, "token": 3, "kind": "admin", "reason": "stuck job"}]
    }
    assert lk.lost.wait(3)
    assert isinstance(lk.revoked, raftlock.LockRevoked)
    assert reasons == [lk.revoked]  # set before lost: on_lost sees it
    assert (lk.revoked.kind, lk.revoked.reason, lk.revoked.token) == ("admin", "stuck job", 3)
    assert str(lk.revoked) == "lock_lost: lock 'a' (token 3) revoked by an operator: stuck job"
    assert s.state == raftlock.SAFE  # the session goes on
    n = len(server.seen)
    lk.release()  # the grant is gone on the cluster: nothing to send
    assert not [p for p, _, _ in server.seen[n:] if p == "/v1/release"]


def test_a_hold_limit_revocation_says_so(server):
    s = open_session(server)
    grant(server, "a", 4)
    lk = s.try_lock("a")
    server.keepalive_extra = {"revoked": [{"name": "a", "holder": lk.holder, "token": 4, "kind": "max_hold", "reason": ""}]}
    assert lk.lost.wait(3)
    assert lk.revoked.kind == "max_hold"
    assert "hold limit (max_hold) ran out" in str(lk.revoked)


def test_a_revocation_of_another_grant_loses_nothing(server):
    # An earlier grant of the same holder id (another token), another
    # holder, another lock: none of them is this grant.
    s = open_session(server)
    grant(server, "a", 5)
    lk = s.try_lock("a")
    server.keepalive_extra = {
        "revoked": [
            {"name": "a", "holder": lk.holder, "token": 4, "kind": "admin", "reason": "old"},
            {"name": "a", "holder": "someone-else", "token": 5, "kind": "admin", "reason": "other"},
            {"name": "b", "holder": lk.holder, "token": 5, "kind": "admin", "reason": "other lock"},
            "not an object",
        ]
    }
    keepalives_answered(server, 3)
    assert not lk.lost.is_set() and lk.revoked is None


def test_a_grant_answered_after_a_keepalive_named_it_revoked_is_lost_at_once(server):
    # The keepalive answer can overtake the acquire's answer: the session
    # remembers the last answer's revocations for grants still to come.
    s = open_session(server)
    lk = s.lock("a", wait=0)
    server.keepalive_extra = {"revoked": [{"name": "a", "holder": lk.holder, "token": 6, "kind": "admin", "reason": "r"}]}
    keepalives_answered(server, 1)
    grant(server, "a", 6)
    lk.acquire()
    assert lk.lost.is_set() and lk.revoked.reason == "r"


def session_with(server, request_timeout):
    """A session (ttl 1 s, no lock-delay: lost_after 0.89 s) whose requests
    may take up to request_timeout."""
    server.script.append((200, {"id": "sid-secret", "ttl": "1s", "lock_delay": "0s"}, {}))
    c = raftlock.Client([addr(server)], request_timeout=request_timeout)
    return c.session(ttl=1.0, lock_delay=0, grace=0.5)


def held_back(seconds, first=None):
    """A script step's hook: the answer goes out ``seconds`` after the
    request came, first() having run meanwhile."""

    def hook(srv):
        start = time.monotonic()
        if first:
            first(srv)
        left = seconds - (time.monotonic() - start)
        if left > 0:
            time.sleep(left)  # the fault itself: a stalled answer

    return hook


def test_a_late_grant_answer_after_a_revocation_is_not_held(server):
    # The grant's answer comes 1.5 s after its request (lost_after 0.89 s):
    # meanwhile keepalive answers named its revocation, then no longer (its
    # ttl + lock-delay over), and the lock went to another session. The
    # client asks again (same holder), and its try finds the lock busy.
    s = session_with(server, 5.0)
    lk = s.lock("a", wait=0)

    def revoked_then_forgotten(srv):
        srv.keepalive_extra = {"revoked": [{"name": "a", "holder": lk.holder, "token": 6, "kind": "admin", "reason": "r"}]}
        keepalives_answered(srv, 2)
        srv.keepalive_extra = {}
        keepalives_answered(srv, 2)

    server.script.append(
        (200, {"name": "a", "mode": "exclusive", "token": 6, "sequencer": "rl1:x:6:a"}, {}, held_back(1.5, revoked_then_forgotten))
    )
    server.script.append((409, {"error": {"code": "lock_busy", "message": "lock 'a' is held by session 'other'"}}, {}))
    with pytest.raises(raftlock.LockBusy):
        lk.acquire()
    acquires = [b for p, b, _ in server.seen if p == "/v1/acquire"]
    assert len(acquires) == 2 and acquires[0]["holder"] == acquires[1]["holder"] == lk.holder
    assert not [p for p, _, _ in server.seen if p == "/v1/release"]  # nothing of ours to give back


def test_a_late_grant_answer_of_a_held_grant_is_confirmed(server):
    # Too late to trust, but still held: asking again (same holder) gets
    # the same grant in time, and the lock is held.
    s = session_with(server, 5.0)
    lk = s.lock("a", wait=0)
    server.script.append((200, {"name": "a", "mode": "exclusive", "token": 6, "sequencer": "rl1:x:6:a"}, {}, held_back(1.5)))
    grant(server, "a", 6)
    lk.acquire()
    assert lk.token == 6 and not lk.lost.is_set()
    assert len([p for p, _, _ in server.seen if p == "/v1/acquire"]) == 2
    server.script.append((200, {"released": True}, {}))
    lk.release()


def test_a_release_request_is_shown_and_the_lock_kept(server):
    s = open_session(server)
    grant(server, "a", 7)
    lk = s.try_lock("a")
    called = []
    lk.on_release_requested(lambda l: called.append(l.requested_by))
    server.keepalive_extra = {
        "release_requested": [
            {"name": "a", "holder": lk.holder, "token": 7, "by_session_handle": "1f0c9a7be24d5e86",
             "by_session_name": "waiter", "by_holder": "w1", "at": "2026-11-27T16:00:00Z"}
        ]
    }
    assert lk.release_requested.wait(3)
    assert lk.requested_by == raftlock.ReleaseRequest("1f0c9a7be24d5e86", "waiter", "w1", "2026-11-27T16:00:00Z")
    keepalives_answered(server, 2)
    assert called == [lk.requested_by]  # once, however many answers repeat it
    assert not lk.lost.is_set() and s.state == raftlock.SAFE  # the holder chooses


def test_request_release_asks_for_the_lock_on_behalf_of_the_session(server):
    s = open_session(server)
    server.script.append((200, {"requested": True}, {}))
    s.request_release("jobs/a")
    body = [b for p, b, _ in server.seen if p == "/v1/locks/request-release"][0]
    assert body["name"] == "jobs/a" and body["session"] == "sid-secret" and body["holder"].startswith("request-")
    server.script.append((404, {"error": {"code": "not_found", "message": "lock \"jobs/b\" is not held"}}, {}))
    with pytest.raises(raftlock.RaftlockError) as e:
        s.request_release("jobs/b")
    assert e.value.code == "not_found"


class KeepAliveHandler(Handler):
    """Handler over HTTP/1.1: connections stay open between requests; the
    server records each request's client port (one port: one connection).
    With ``close_after_first`` the server closes a connection after its
    first answer, without saying so (as an idle timeout does)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.server.ports.append(self.client_address[1])
        super().do_POST()
        if self.server.close_after_first:
            self.close_connection = True

    do_DELETE = do_POST


@pytest.fixture
def keepalive_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KeepAliveHandler)
    srv.script, srv.seen, srv.hold, srv.ports = [], [], threading.Event(), []
    srv.auto_keepalive, srv.keepalive_extra, srv.keepalives = True, {}, 0
    srv.close_after_first = False
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.hold.set()
    srv.shutdown()
    srv.server_close()


def test_sequential_requests_reuse_one_connection(keepalive_server):
    keepalive_server.script = [(200, {"ok": i}, {}) for i in range(5)]
    t = Transport([addr(keepalive_server)])
    for i in range(5):
        assert t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 5)["ok"] == i
    assert len(set(keepalive_server.ports)) == 1
    t.close()


def test_concurrent_requests_take_a_connection_each_and_give_it_back(keepalive_server):
    keepalive_server.script = [(200, {}, {}) for _ in range(40)]
    t = Transport([addr(keepalive_server)])
    go = threading.Barrier(4)

    def worker():
        go.wait()
        for _ in range(10):
            t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 5)

    ths = [threading.Thread(target=worker) for _ in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert len(keepalive_server.ports) == 40
    assert len(set(keepalive_server.ports)) <= 4
    t.close()


def test_a_connection_the_server_closed_is_not_reused_for_a_non_idempotent_request(keepalive_server):
    # The server drops each connection after one answer; the next request,
    # not idempotent (an open), must go on a new connection and succeed,
    # not fail as an unknown outcome.
    keepalive_server.close_after_first = True
    keepalive_server.script = [(200, {"n": 1}, {}), (200, {"n": 2}, {})]
    t = Transport([addr(keepalive_server)])
    assert t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5)["n"] == 1
    deadline = time.monotonic() + 5
    while len(keepalive_server.ports) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    # Await the server's close: the idle socket turns readable (EOF).
    idle = t._idle[0]
    while idle and not idle[0].dropped() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5)["n"] == 2
    assert len(set(keepalive_server.ports)) == 2


def raw_server(answers):
    """A TCP server on 127.0.0.1 that reads one request per answer on one
    connection and writes the answer's bytes as they are."""
    import socket

    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)

    def serve():
        c, _ = ls.accept()
        with c:
            for a in answers:
                got = b""
                while b"\r\n\r\n" not in got:
                    got += c.recv(65536)
                head, _, body = got.partition(b"\r\n\r\n")
                n = 0
                for ln in head.split(b"\r\n"):
                    if ln.lower().startswith(b"content-length:"):
                        n = int(ln.split(b":")[1])
                while len(body) < n:
                    body += c.recv(65536)
                c.sendall(a)
        ls.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{ls.getsockname()[1]}"


def test_chunked_answers_are_read_and_the_connection_kept():
    a = raw_server(
        [
            b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"n"\r\n4;x=y\r\n: 1}\r\n0\r\n\r\n',
            b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Raftlock-Leader-Addr: elsewhere\r\n\r\n{"n": 2}',
        ]
    )
    t = Transport([a])
    assert t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 5) == {"n": 1}
    assert t.call("GET", "/v1/y", deadline=time.monotonic() + 5) == {"n": 2}  # same connection: the server accepts one


def test_an_answer_that_is_not_http_is_an_unknown_outcome_not_a_crash():
    a = raw_server([b"SSH-2.0-nonsense\r\n\r\n"])
    t = Transport([a], request_timeout=1)
    with pytest.raises(raftlock.UnknownOutcome) as e:
        t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5)
    assert "status line" in str(e.value)


def test_holder_ids_are_unique_per_lock_and_across_sessions(server):
    # A holder id is the session's random prefix and a counter: every Lock
    # gets its own (32 hex digits, as before), and two sessions never share one.
    s1, s2 = open_session(server), open_session(server)
    ids = [s.lock(f"h/{i}").holder for s in (s1, s2) for i in range(50)]
    assert len(set(ids)) == len(ids)
    assert all(len(h) == 32 and int(h, 16) >= 0 for h in ids)


def script_server(steps):
    """A TCP server on 127.0.0.1 that accepts connections one after another
    and serves each request as the next step says: (delay in seconds before
    the answer, the answer's bytes or None for none, bytes sent unasked
    after it). Records the number of the connection of each request."""
    import socket

    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    conns: list[int] = []
    kept: list[socket.socket] = []
    stop = threading.Event()

    def serve():
        steps_left = list(steps)
        n = 0
        while steps_left and not stop.is_set():
            c, _ = ls.accept()
            n += 1
            kept.append(c)
            while steps_left:
                got = b""
                while b"\r\n\r\n" not in got:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                if not got:
                    break
                conns.append(n)
                delay, answer, extra = steps_left.pop(0)
                if answer is None:
                    stop.wait(10)
                    return
                time.sleep(delay)
                c.sendall(answer + extra)
                if extra:
                    break  # unasked bytes sent, the connection left open: serve the next one
        stop.wait(10)
        for c in kept:
            c.close()
        ls.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{ls.getsockname()[1]}", conns, stop


_OK = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"n": 1}'


def test_an_attempt_is_bounded_by_its_own_timeout_after_a_longer_one_on_the_connection():
    # The connection's kernel timeout was armed for a 30 s attempt; the next
    # attempt, bounded by 0.5 s, must not wait for the kernel's 30.
    a, _, stop = script_server([(0, _OK, b""), (0, None, b"")])
    t = Transport([a], request_timeout=30)
    assert t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 30) == {"n": 1}
    started = time.monotonic()
    with pytest.raises(raftlock.UnknownOutcome):
        t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 5
    stop.set()


def test_a_shorter_kernel_timeout_left_by_an_earlier_attempt_does_not_cut_a_longer_one():
    # A 0.2 s attempt leaves the kernel timeout at 0.2 s; the next attempt
    # may take 10 s, and its answer, 0.6 s later, is read.
    a, conns, stop = script_server([(0, _OK, b""), (0.6, _OK, b"")])
    t = Transport([a], request_timeout=10)
    assert t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 0.2) == {"n": 1}
    assert t.call("POST", "/v1/x", {}, deadline=time.monotonic() + 10) == {"n": 1}
    assert conns == [1, 1]
    stop.set()


def test_an_idle_connection_with_bytes_nobody_asked_for_is_not_reused():
    # The server writes past its answer: those bytes must not be read as the
    # next request's answer; the next request goes on a new connection.
    a, conns, stop = script_server([(0, _OK, b"HTTP/1.1 408 Request Timeout\r\n\r\n"), (0, _OK, b"")])
    t = Transport([a])
    assert t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5) == {"n": 1}
    deadline = time.monotonic() + 5
    while not t._idle[0][0].dropped() and time.monotonic() < deadline:
        time.sleep(0.01)  # await the unasked bytes' arrival
    assert t.call("POST", "/v1/sessions", {}, deadline=time.monotonic() + 5) == {"n": 1}
    assert conns == [1, 2]
    stop.set()


def test_the_lost_event_is_set_whether_taken_before_or_after_the_loss(server):
    # lost is made when first asked for: one taken before the release is set
    # by it, one first asked for after it starts set; callbacks run once.
    s = open_session(server)
    grant = (200, {"name": "a", "mode": "exclusive", "token": 3, "sequencer": "rl1:x:3:a"}, {})
    server.script.extend([grant, (200, {"released": True}, {}), grant, (200, {"released": True}, {})])
    before, after, calls = s.try_lock("a"), None, []
    ev = before.lost
    before.on_lost(calls.append)
    assert not ev.is_set() and not before.release_requested.is_set()
    before.release()
    assert ev.is_set() and before.lost is ev and calls == [before]
    after = s.try_lock("a")
    after.release()
    assert after.lost.is_set()
    after.on_lost(calls.append)
    assert calls == [before, after]
    assert not after.release_requested.is_set()


def test_lock_names_of_printable_ascii_and_of_other_text_are_checked_alike():
    from raftlock.fence import MalformedSequencer, check_name

    for ok in ("jobs/a", "a b~", "caf\u00e9", "\u65e5\u672c"):
        check_name(ok)
    for bad in ("a\x00", "a\x1fb", "\x7f", "a\u0085"):
        with pytest.raises(MalformedSequencer):
            check_name(bad)


def test_a_semaphore_acquire_sends_its_permits_and_keeps_the_slot(server):
    s = open_session(server)
    server.script.append(
        (200, {"name": "pool", "mode": "exclusive", "token": 7, "sequencer": "rl1:p1/2:7:pool", "permits": 2, "slot": 1}, {})
    )
    n = len(server.seen)
    lk = s.try_lock("pool", permits=2)
    [body] = [b for p, b, _ in server.seen[n:] if p == "/v1/acquire"]
    assert body["permits"] == 2 and body["mode"] == "exclusive"
    assert lk.permits == 2 and lk.slot == 1
    assert lk.sequencer == raftlock.Sequencer("pool", "exclusive", 7, 1, 2)
    assert str(lk.sequencer) == "rl1:p1/2:7:pool"


def test_a_plain_lock_sends_no_permits_and_has_no_slot(server):
    s = open_session(server)
    grant(server, "a", 3)
    n = len(server.seen)
    lk = s.try_lock("a")
    [body] = [b for p, b, _ in server.seen[n:] if p == "/v1/acquire"]
    assert "permits" not in body
    assert lk.permits == 0 and lk.slot is None


def test_a_revoked_slot_grant_is_lost_with_the_operators_reason(server):
    s = open_session(server)
    server.script.append(
        (200, {"name": "pool", "mode": "exclusive", "token": 9, "sequencer": "rl1:p0/2:9:pool", "permits": 2, "slot": 0}, {})
    )
    lk = s.lock("pool", wait=5, permits=2).acquire()
    server.keepalive_extra = {
        "revoked": [{"name": "pool", "holder": lk.holder, "token": 9, "kind": "admin", "reason": "slot stuck"}]
    }
    assert lk.lost.wait(3)
    assert (lk.revoked.kind, lk.revoked.reason, lk.revoked.token) == ("admin", "slot stuck", 9)


@pytest.mark.parametrize("permits,shared", [(-1, False), (257, False), (1.5, False), (True, False), (2, True)])
def test_bad_permits_are_refused_before_sending(server, permits, shared):
    s = open_session(server)
    n = len(server.seen)
    with pytest.raises(raftlock.InvalidArgument):
        s.try_lock("pool", shared, permits=permits)
    assert not [p for p, _, _ in server.seen[n:] if p == "/v1/acquire"]
