"""The asyncio flavour of the client: the same API, awaitable.

    import raftlock.aio

    client = raftlock.aio.Client(["127.0.0.1:7001"])
    async with client.session(ttl=3.0) as session:
        async with session.lock("jobs/a") as lock:
            ...  # lock.lost is an asyncio.Event

It runs the blocking client on the default executor's threads: the
session's lease threads are the same, so the lost signal never waits for
the event loop (``lock.lost`` is set on the loop as soon as it runs). A
cancelled acquire gives the lock back if its grant arrives afterwards.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, TypeVar

from . import client as _sync
from ._duration import Duration
from .errors import LockRevoked
from .fence import Sequencer

T = TypeVar("T")


async def _run(f: Callable[..., T], *args: Any, **kw: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: f(*args, **kw))


class Client:
    """An asyncio client of a raftlock cluster; see raftlock.Client."""

    def __init__(self, endpoints: list[str], **kw: Any) -> None:
        self._c = _sync.Client(endpoints, **kw)

    def session(self, ttl: Duration | None = None, lock_delay: Duration | None = None, **kw: Any) -> _Opening:
        """Opens a session: ``async with client.session(...) as s`` or
        ``s = await client.session(...)``."""
        return _Opening(self._c, ttl, lock_delay, kw)

    async def lock_state(self, name: str) -> dict[str, Any]:
        """The lock's state as the leader sees it."""
        return await _run(self._c.lock_state, name)

    async def watch(self, name: str, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        """Yields the lock's state at each change; see raftlock.Client.watch."""
        stop = threading.Event()
        it = self._c.watch(name, stop=stop, **kw)
        try:
            while True:
                st = await _run(next, it, None)
                if st is None:
                    return
                yield st
        finally:
            stop.set()

    async def observe(self, name: str) -> AsyncIterator[_sync.Leader]:
        """Yields the election's leaders in order; see raftlock.Client.observe."""
        stop = threading.Event()
        it = self._c.observe(name, stop=stop)
        try:
            while True:
                ld = await _run(next, it, None)
                if ld is None:
                    return
                yield ld
        finally:
            stop.set()


class _Opening:
    """A session being opened: awaitable, or an async context manager."""

    def __init__(self, c: _sync.Client, ttl: Duration | None, lock_delay: Duration | None, kw: dict[str, Any]) -> None:
        self._args = (c, ttl, lock_delay, kw)
        self._s: Session | None = None

    async def _open(self) -> Session:
        c, ttl, lock_delay, kw = self._args
        return Session(await _run(c.session, ttl, lock_delay, **kw))

    def __await__(self) -> Generator[Any, None, Session]:
        return self._open().__await__()

    async def __aenter__(self) -> Session:
        self._s = await self._open()
        return self._s

    async def __aexit__(self, *exc: object) -> None:
        if self._s is not None:
            await self._s.close()


class Session:
    """An asyncio session; see raftlock.Session."""

    def __init__(self, s: _sync.Session) -> None:
        self._s = s

    @property
    def state(self) -> str:
        return self._s.state

    @property
    def safe(self) -> bool:
        return self._s.safe

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends the session; its locks are lost and released at once."""
        await _run(self._s.close)

    def lock(self, name: str, shared: bool = False, *, wait: Duration | None = None, value: str = "") -> Lock:
        """A lock handle: ``async with session.lock(name)`` or acquire()/release()."""
        return Lock(self._s.lock(name, shared, wait=wait, value=value))

    async def try_lock(self, name: str, shared: bool = False, *, value: str = "") -> Lock:
        """Acquires ``name`` if it is free now; raises LockBusy otherwise."""
        return await self.lock(name, shared, wait=0, value=value).acquire()

    async def campaign(self, name: str, value: str = "", *, wait: Duration | None = None) -> Lock:
        """Blocks until this session leads election ``name``."""
        return await Lock(_sync.Lock(self._s, name, "exclusive", wait, value)).acquire()


class Lock:
    """An asyncio lock handle; ``lost`` and ``release_requested`` are
    asyncio.Events, set on the loop when the sync handle's are."""

    def __init__(self, lock: _sync.Lock) -> None:
        self._l = lock
        self.lost = asyncio.Event()
        self.release_requested = asyncio.Event()

    @property
    def revoked(self) -> LockRevoked | None:
        """Why the cluster revoked the grant (set before ``lost``), or None."""
        return self._l.revoked

    @property
    def requested_by(self) -> _sync.ReleaseRequest | None:
        """Who asked the holder to release (``release_requested``), or None."""
        return self._l.requested_by

    @property
    def sequencer(self) -> Sequencer | None:
        return self._l.sequencer

    @property
    def token(self) -> int:
        return self._l.token

    @property
    def holder(self) -> str:
        return self._l.holder

    async def __aenter__(self) -> Lock:
        return await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def on_lost(self, f: Callable[[_sync.Lock], None]) -> None:
        """Calls f(lock) from the session's thread when the lock is lost."""
        self._l.on_lost(f)

    async def acquire(self) -> Lock:
        """Acquires the lock; see raftlock.Lock.acquire."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self._l.acquire)
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            # The grant may still come: give it back when it does.
            def give_back(f: asyncio.Future[Any]) -> None:
                if not f.cancelled() and f.exception() is None:
                    threading.Thread(target=self._l.release, daemon=True).start()

            fut.add_done_callback(give_back)
            raise
        self._l.on_lost(lambda _l: loop.call_soon_threadsafe(self.lost.set))
        self._l.on_release_requested(lambda _l: loop.call_soon_threadsafe(self.release_requested.set))
        return self

    async def release(self) -> None:
        """Releases the lock (lost first)."""
        await _run(self._l.release)

    async def resign(self) -> None:
        """Gives a leadership up; the next campaigner is elected at once."""
        await self.release()
