package io.raftlock.client;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A {@link ReadWriteLock} on one lock name: the read lock is the shared mode
 * (any number of holders), the write lock the exclusive mode. Both are
 * re-entrant per thread. A thread holding the read lock must not take the
 * write lock (no upgrade: it would wait behind itself).
 */
public final class FencedReadWriteLock implements ReadWriteLock {
    private final FencedLock read;
    private final FencedLock write;

    FencedReadWriteLock(Session session, String name) {
        read = new FencedLock(session, name, Mode.SHARED, true, "");
        write = new FencedLock(session, name, Mode.EXCLUSIVE, true, "");
    }

    /** The shared mode. */
    @Override
    public FencedLock readLock() {
        return read;
    }

    /** The exclusive mode. */
    @Override
    public FencedLock writeLock() {
        return write;
    }
}
