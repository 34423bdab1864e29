package io.raftlock.spring;

import io.raftlock.client.FencedLock;
import io.raftlock.client.Session;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.integration.support.locks.ExpirableLockRegistry;

/**
 * A Spring Integration lock registry of raftlock {@link FencedLock}s, all held
 * by one session: {@code obtain(key)} gives the exclusive, re-entrant lock
 * {@code prefix + key} (one object per key, as Spring's registries do), whose
 * {@link FencedLock#sequencer()} fences the writes it guards and whose
 * {@link FencedLock#lost()} completes before the cluster could grant it to
 * another holder. Leadership: Spring's
 * {@code LockRegistryLeaderInitiator} over this registry publishes the
 * granted and revoked events (a lost grant makes its next heartbeat fail).
 */
public final class RaftlockLockRegistry implements ExpirableLockRegistry<FencedLock> {
    /** The lock names' prefix by default. */
    public static final String DEFAULT_PREFIX = "spring/";

    private record Entry(FencedLock lock, long lastUsed) {
    }

    private final Session session;
    private final String prefix;
    private final Map<String, Entry> locks = new ConcurrentHashMap<>();

    /** A registry of locks named "spring/" + key, held by {@code session}. */
    public RaftlockLockRegistry(Session session) {
        this(session, DEFAULT_PREFIX);
    }

    /** A registry of locks named {@code prefix} + key, held by {@code session}. */
    public RaftlockLockRegistry(Session session, String prefix) {
        this.session = session;
        this.prefix = prefix;
    }

    /** The lock of {@code lockKey} (a String): the same object for the same key until it is expired unused. */
    @Override
    public FencedLock obtain(Object lockKey) {
        if (!(lockKey instanceof String)) {
            throw new IllegalArgumentException("lockKey must be a String, not " + (lockKey == null ? "null" : lockKey.getClass().getName()));
        }
        String key = (String) lockKey;
        long now = System.currentTimeMillis();
        return locks.compute(key, (k, e) -> new Entry(e == null ? session.lock(prefix + k) : e.lock(), now)).lock();
    }

    /** Forgets the locks no thread holds that were last obtained more than {@code age} ms ago. */
    @Override
    public void expireUnusedOlderThan(long age) {
        long now = System.currentTimeMillis();
        locks.entrySet().removeIf(e -> now - e.getValue().lastUsed() > age && !e.getValue().lock().isLocked());
    }
}
