package io.raftlock.client;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Lock} held on the cluster by a session, with the grant's
 * {@link #sequencer()} and {@link #token()} to fence the writes it protects.
 *
 * <p><b>Re-entrancy</b> (on by default, the Java convention): a thread that
 * holds the lock may lock it again; the client counts the holds, and the
 * cluster sees one holder until the last {@link #unlock()}. An exclusive lock
 * serialises the JVM's threads locally (a fair {@link ReentrantLock}) before
 * asking the cluster, so the cluster sees one holder per FencedLock; a shared
 * lock gives each thread its own grant. Off ({@link Session#lock(String,
 * boolean)}), a second lock by the holding thread throws
 * IllegalStateException. Re-entering a hold whose grant is lost is refused:
 * {@code tryLock} is false, {@code lock} throws IllegalStateException (unlock
 * it, then lock again for a new grant).
 *
 * <p>Blocking happens in {@link ReentrantLock} and in the HTTP client, never
 * under a monitor: a virtual thread blocked in {@link #lock()} does not pin its
 * carrier. Failures are RaftlockException (unchecked): {@code
 * session_not_found} once the session is over. {@link #lost()} tells when the
 * current grant can no longer be trusted.
 */
public final class FencedLock implements Lock {
    private static final class Hold {
        final Grant grant;
        int count = 1;

        Hold(Grant g) {
            grant = g;
        }
    }

    private final Session session;
    private final String name;
    private final Mode mode;
    private final boolean reentrant;
    private final String value;
    private final ReentrantLock local = new ReentrantLock(true); // exclusive mode only
    private final ConcurrentHashMap<Thread, Hold> holds = new ConcurrentHashMap<>();

    FencedLock(Session session, String name, Mode mode, boolean reentrant, String value) {
        this.session = session;
        this.name = name;
        this.mode = mode;
        this.reentrant = reentrant;
        this.value = value;
    }

    @Override
    public String toString() {
        return "FencedLock(\"" + name + "\", " + mode.wire() + ")";
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** The lock's mode. */
    public Mode mode() {
        return mode;
    }

    private Hold mine() {
        return holds.get(Thread.currentThread());
    }

    /** Whether the calling thread holds the lock. */
    public boolean isHeldByCurrentThread() {
        return mine() != null;
    }

    /** How many times the calling thread holds the lock (0: not). */
    public int getHoldCount() {
        Hold h = mine();
        return h == null ? 0 : h.count;
    }

    /** The calling thread's grant's sequencer; IllegalMonitorStateException if it does not hold the lock. */
    public Sequencer sequencer() {
        return grant().sequencer();
    }

    /** The calling thread's grant's fencing token; IllegalMonitorStateException if it does not hold the lock. */
    public long token() {
        return grant().token();
    }

    /** Completes when the calling thread's grant is lost; IllegalMonitorStateException if it does not hold the lock. */
    public CompletableFuture<Void> lost() {
        return grant().lost();
    }

    /**
     * Why the cluster revoked the calling thread's grant (an operator, or its
     * hold limit), set before {@link #lost()} completes; empty if it did not.
     * IllegalMonitorStateException if the thread does not hold the lock.
     */
    public Optional<LockRevokedException> revoked() {
        return grant().revoked();
    }

    /**
     * Completes, with who asked, when another session asks the calling
     * thread's grant to be released (the holder chooses whether to);
     * IllegalMonitorStateException if the thread does not hold the lock.
     */
    public CompletableFuture<ReleaseRequest> releaseRequested() {
        return grant().releaseRequested();
    }

    /** The calling thread's grant; IllegalMonitorStateException if it does not hold the lock. */
    public Grant grant() {
        Hold h = mine();
        if (h == null) {
            throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by this thread");
        }
        return h.grant;
    }

    private static final int FRESH = 0;
    private static final int AGAIN = 1;
    private static final int LOST = 2;

    /** Whether the calling thread holds the lock already (then one more hold is counted), or holds a lost grant. */
    private int again() {
        Hold h = mine();
        if (h == null) {
            return FRESH;
        }
        if (!reentrant) {
            throw new IllegalStateException("lock \"" + name + "\" is not re-entrant and this thread holds it");
        }
        if (h.grant.isLost()) {
            return LOST;
        }
        h.count++;
        return AGAIN;
    }

    private static boolean lostAgain(int a, String name) {
        if (a == LOST) {
            throw new IllegalStateException("lock \"" + name + "\": this thread's grant is lost; unlock it first");
        }
        return a == AGAIN;
    }

    /** Whether some thread of this JVM holds the lock through this object. */
    public boolean isLocked() {
        return !holds.isEmpty();
    }

    /** Takes the local lock (exclusive mode): false if the time ran out. */
    private boolean localLock(long nanos, boolean interruptible) throws InterruptedException {
        if (mode != Mode.EXCLUSIVE) {
            return true;
        }
        if (nanos < 0) {
            if (interruptible) {
                local.lockInterruptibly();
            } else {
                local.lock();
            }
            return true;
        }
        return nanos == 0 ? local.tryLock() : local.tryLock(nanos, TimeUnit.NANOSECONDS);
    }

    private void localUnlock() {
        if (mode == Mode.EXCLUSIVE) {
            local.unlock();
        }
    }

    /** Acquires on the cluster; the local lock is held. */
    private void remote(Duration wait, boolean interruptible) throws InterruptedException {
        Grant g = new Grant(session, name, mode, value);
        try {
            g.acquire(wait, interruptible);
        } catch (InterruptedException | RuntimeException e) {
            localUnlock();
            throw e;
        }
        holds.put(Thread.currentThread(), new Hold(g));
    }

    /** Waits as long as it takes (interrupts are kept for later); throws RaftlockException if the session is over. */
    @Override
    public void lock() {
        if (lostAgain(again(), name)) {
            return;
        }
        try {
            localLock(-1, false);
            remote(null, false);
        } catch (InterruptedException e) {
            throw new IllegalStateException("not reached: uninterruptible", e);
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        if (lostAgain(again(), name)) {
            return;
        }
        localLock(-1, true);
        remote(null, true);
    }

    /** Tries once: false if the lock is held (by this JVM or on the cluster) or in lock-delay. */
    @Override
    public boolean tryLock() {
        int a = again();
        if (a != FRESH) {
            return a == AGAIN;
        }
        try {
            if (!localLock(0, false)) {
                return false;
            }
            remote(Duration.ZERO, false);
            return true;
        } catch (RaftlockException e) {
            if (e.code().equals(RaftlockException.LOCK_BUSY)) {
                return false;
            }
            throw e;
        } catch (InterruptedException e) {
            throw new IllegalStateException("not reached: uninterruptible", e);
        }
    }

    /** Waits up to {@code time}, keeping the FIFO place on the cluster: false if it ran out. */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        int a = again();
        if (a != FRESH) {
            return a == AGAIN;
        }
        long end = System.nanoTime() + unit.toNanos(time);
        if (!localLock(Math.max(unit.toNanos(time), 0), true)) {
            return false;
        }
        long left = end - System.nanoTime();
        try {
            remote(left <= 0 ? Duration.ZERO : Duration.ofNanos(left), true);
            return true;
        } catch (RaftlockException e) {
            if (e.code().equals(RaftlockException.LOCK_BUSY) || e.code().equals(RaftlockException.WAIT_TIMEOUT)) {
                return false;
            }
            throw e;
        }
    }

    /** Releases one hold; the last releases the grant on the cluster. IllegalMonitorStateException if the thread does not hold it. */
    @Override
    public void unlock() {
        Hold h = mine();
        if (h == null) {
            throw new IllegalMonitorStateException("lock \"" + name + "\" is not held by this thread");
        }
        if (--h.count > 0) {
            return;
        }
        holds.remove(Thread.currentThread());
        try {
            h.grant.release();
        } finally {
            localUnlock();
        }
    }

    /** Not supported: a condition would need the cluster's notification. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("FencedLock has no conditions");
    }
}
