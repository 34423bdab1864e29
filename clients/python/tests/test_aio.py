"""The asyncio flavour against the scripted local HTTP server."""

import asyncio

import pytest

import raftlock
import raftlock.aio
from test_client import addr, server  # noqa: F401  (the fixture)


def test_aio_session_and_lock_as_async_context_managers(server):  # noqa: F811
    server.script = [
        (200, {"id": "sid", "ttl": "5s", "lock_delay": "0s"}, {}),
        (200, {"name": "a", "mode": "exclusive", "token": 9, "sequencer": "rl1:x:9:a"}, {}),
        (200, {"released": True}, {}),
        (200, {"closed": True}, {}),
    ] + [(200, {"ttl": "5s"}, {})] * 10

    async def main():
        c = raftlock.aio.Client([addr(server)])
        async with c.session(ttl=5.0, lock_delay=0) as s:
            async with s.lock("a") as lk:
                assert lk.token == 9 and str(lk.sequencer) == "rl1:x:9:a"
                assert not lk.lost.is_set()
            await asyncio.wait_for(lk.lost.wait(), 2)
        assert s.state == raftlock.CLOSED

    asyncio.run(main())
    paths = [p for p, _, _ in server.seen if not p.endswith("/keepalive")]
    assert paths == ["/v1/sessions", "/v1/acquire", "/v1/release", "/v1/sessions/sid"]


def test_aio_try_lock_raises_lock_busy(server):  # noqa: F811
    server.script = [
        (200, {"id": "sid", "ttl": "5s", "lock_delay": "0s"}, {}),
        (409, {"error": {"code": "lock_busy", "message": "held"}}, {}),
        (200, {"closed": True}, {}),
    ] + [(200, {"ttl": "5s"}, {})] * 10

    async def main():
        s = await raftlock.aio.Client([addr(server)]).session(ttl=5.0)
        with pytest.raises(raftlock.LockBusy):
            await s.try_lock("a")
        await s.close()

    asyncio.run(main())


def test_aio_a_revoked_lock_is_lost_and_a_release_request_shown(server):  # noqa: F811
    server.script = [
        (200, {"id": "sid", "ttl": "1s", "lock_delay": "0s"}, {}),
        (200, {"name": "a", "mode": "exclusive", "token": 9, "sequencer": "rl1:x:9:a"}, {}),
        (200, {"closed": True}, {}),
    ]

    async def main():
        s = await raftlock.aio.Client([addr(server)]).session(ttl=1.0, lock_delay=0)
        lk = await s.try_lock("a")
        server.keepalive_extra = {
            "release_requested": [{"name": "a", "holder": lk.holder, "token": 9, "by_session_name": "waiter"}]
        }
        await asyncio.wait_for(lk.release_requested.wait(), 3)
        assert lk.requested_by.by_session_name == "waiter" and not lk.lost.is_set()
        server.keepalive_extra = {"revoked": [{"name": "a", "holder": lk.holder, "token": 9, "kind": "admin", "reason": "r"}]}
        await asyncio.wait_for(lk.lost.wait(), 3)
        assert lk.revoked.reason == "r"
        await s.close()

    asyncio.run(main())
