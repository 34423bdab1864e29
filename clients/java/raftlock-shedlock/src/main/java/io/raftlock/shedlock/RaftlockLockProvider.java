package io.raftlock.shedlock;

import io.raftlock.client.Grant;
import io.raftlock.client.Mode;
import io.raftlock.client.RaftlockClient;
import io.raftlock.client.RaftlockException;
import io.raftlock.client.Sequencer;
import io.raftlock.client.Session;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link LockProvider} on raftlock.
 *
 * <p>Each lock is a session of its own (lock-delay 0) holding the exclusive
 * lock {@code prefix + name}:
 * <ul>
 * <li><b>lockAtMostFor</b> maps onto the session: its ttl is lockAtMostFor
 * (clamped to raftlock's 1 s – 5 min), so a crashed holder's lock is free at
 * the latest after lockAtMostFor (earlier when it is over 5 min), and the
 * provider closes the session at lockAtMostUntil, whether the task has ended
 * or not;</li>
 * <li><b>lockAtLeastFor</b> is honoured: an unlock before lockAtLeastUntil
 * keeps the session (and the lock) until then;</li>
 * <li>the task reads its grant's sequencer with {@link #currentSequencer()}
 * (on the thread that locked) or {@link RaftlockSimpleLock#sequencer()}, to
 * fence its writes, and {@link RaftlockSimpleLock#lost()} tells when it can
 * no longer trust it.</li>
 * </ul>
 * Lock attempts try once (a held lock gives {@code Optional.empty()}).
 * {@link SimpleLock#extend} moves lockAtMostUntil (the session's ttl stays).
 * Close the provider to stop its timer thread.
 */
public final class RaftlockLockProvider implements LockProvider, AutoCloseable {
    /** The lock names' prefix by default. */
    public static final String DEFAULT_PREFIX = "shedlock/";
    private static final Duration MIN_TTL = Duration.ofSeconds(1);
    private static final Duration MAX_TTL = Duration.ofMinutes(5);
    private static final ThreadLocal<Sequencer> CURRENT = new ThreadLocal<>();

    private final RaftlockClient client;
    private final String prefix;
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "raftlock-shedlock-timer");
        t.setDaemon(true);
        return t;
    });

    /** A provider whose locks are named "shedlock/" + the task's lock name. */
    public RaftlockLockProvider(RaftlockClient client) {
        this(client, DEFAULT_PREFIX);
    }

    /** A provider whose locks are named {@code prefix} + the task's lock name. */
    public RaftlockLockProvider(RaftlockClient client, String prefix) {
        this.client = client;
        this.prefix = prefix;
    }

    /** The sequencer of the lock the calling thread took last and has not unlocked (empty: none). */
    public static Optional<Sequencer> currentSequencer() {
        return Optional.ofNullable(CURRENT.get());
    }

    /** The raftlock lock name of a ShedLock lock name. */
    public String lockName(String shedlockName) {
        return prefix + shedlockName;
    }

    static Duration ttlOf(Duration lockAtMostFor) {
        if (lockAtMostFor.compareTo(MIN_TTL) < 0) {
            return MIN_TTL;
        }
        return lockAtMostFor.compareTo(MAX_TTL) > 0 ? MAX_TTL : lockAtMostFor;
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration c) {
        Session s;
        try {
            s = client.session().ttl(ttlOf(c.getLockAtMostFor())).lockDelay(Duration.ZERO)
                    .name("shedlock " + c.getName()).open();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
        Grant g;
        try {
            g = s.acquire(lockName(c.getName()), Mode.EXCLUSIVE, Duration.ZERO, "");
        } catch (RaftlockException e) {
            s.close();
            if (e.code().equals(RaftlockException.LOCK_BUSY)) {
                return Optional.empty();
            }
            throw e;
        } catch (InterruptedException e) {
            s.close();
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
        Held h = new Held(s, g);
        h.endAt(c.getLockAtMostUntil());
        CURRENT.set(g.sequencer());
        return Optional.of(new RaftlockSimpleLock(h, c));
    }

    /** Stops the timer; sessions of locks still held are closed. */
    @Override
    public void close() {
        for (Runnable r : timer.shutdownNow()) {
            r.run();
        }
    }

    /** The session and grant behind one lock, and when the session ends. */
    private final class Held {
        final Session session;
        final Grant grant;
        private final ReentrantLock mu = new ReentrantLock();
        private ScheduledFuture<?> end;

        Held(Session session, Grant grant) {
            this.session = session;
            this.grant = grant;
        }

        void endAt(Instant t) {
            long nanos = Math.max(0, Duration.between(ClockProvider.now(), t).toNanos());
            mu.lock();
            try {
                if (end != null) {
                    end.cancel(false);
                }
                end = timer.schedule(session::close, nanos, TimeUnit.NANOSECONDS);
            } finally {
                mu.unlock();
            }
        }

        void endNow() {
            mu.lock();
            try {
                if (end != null) {
                    end.cancel(false);
                }
            } finally {
                mu.unlock();
            }
            session.close();
        }
    }

    /** A lock the provider gave: ShedLock's {@link SimpleLock}, with the grant's sequencer. */
    public final class RaftlockSimpleLock implements SimpleLock {
        private final Held held;
        private final LockConfiguration config;
        private final ReentrantLock mu = new ReentrantLock();
        private boolean valid = true;

        private RaftlockSimpleLock(Held held, LockConfiguration config) {
            this.held = held;
            this.config = config;
        }

        /** The grant's sequencer: pass it to the resource the task writes. */
        public Sequencer sequencer() {
            return held.grant.sequencer();
        }

        /** Completes when the grant can no longer be trusted (lockAtMostFor passed, the session lost or closed). */
        public CompletableFuture<Void> lost() {
            return held.grant.lost();
        }

        private void invalidate() {
            mu.lock();
            try {
                if (!valid) {
                    throw new IllegalStateException("lock \"" + config.getName() + "\" was already unlocked or extended");
                }
                valid = false;
            } finally {
                mu.unlock();
            }
        }

        /** Unlocks: at once, or at lockAtLeastUntil if that is later (the lock stays held until then). */
        @Override
        public void unlock() {
            invalidate();
            if (sequencer().equals(CURRENT.get())) {
                CURRENT.remove();
            }
            Instant atLeast = config.getLockAtLeastUntil();
            if (ClockProvider.now().isBefore(atLeast)) {
                held.endAt(atLeast);
            } else {
                held.endNow();
            }
        }

        /**
         * A lock with new limits from now (this one becomes invalid), or empty
         * when the grant is already lost.
         */
        @Override
        public Optional<SimpleLock> extend(Duration lockAtMostFor, Duration lockAtLeastFor) {
            invalidate();
            if (held.grant.isLost()) {
                return Optional.empty();
            }
            LockConfiguration next = new LockConfiguration(ClockProvider.now(), config.getName(), lockAtMostFor, lockAtLeastFor);
            held.endAt(next.getLockAtMostUntil());
            return Optional.of(new RaftlockSimpleLock(held, next));
        }
    }
}
