package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import jdk.jfr.consumer.RecordedEvent;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The locks against a real cluster: its HTTP addresses in RAFTLOCK_ENDPOINTS
 * (comma-separated), as `raftlock-conformance -exec` sets them; skipped
 * without. CI runs them so, the virtual-thread case under a JDK 21+.
 */
class ClusterTest {
    private static RaftlockClient client;

    @BeforeAll
    static void connect() {
        String eps = System.getenv("RAFTLOCK_ENDPOINTS");
        assumeTrue(eps != null && !eps.isBlank(), "RAFTLOCK_ENDPOINTS is not set: no cluster");
        client = RaftlockClient.builder().endpoints(eps.split(",")).build();
    }

    private static String fresh(String what) {
        return "java-test/" + what + "/" + UUID.randomUUID();
    }

    @Test
    void reentrantLockIsOneHolderOnTheCluster() throws Exception {
        String name = fresh("reentrant");
        try (Session s = client.session().ttl(Duration.ofSeconds(5)).open()) {
            FencedLock l = s.lock(name);
            l.lock();
            long token = l.token();
            l.lock();
            assertEquals(2, l.getHoldCount());
            assertEquals(token, l.token());
            assertEquals(1, client.lockState(name).path("holders").size());
            l.unlock();
            assertEquals(1, client.lockState(name).path("holders").size());
            l.unlock();
            assertEquals(0, client.lockState(name).path("holders").size());
            assertFalse(l.isHeldByCurrentThread());
        }
    }

    @Test
    void tryLockOfALockAnotherSessionHoldsIsFalse() throws Exception {
        String name = fresh("try");
        try (Session a = client.session().ttl(Duration.ofSeconds(5)).open();
                Session b = client.session().ttl(Duration.ofSeconds(5)).open()) {
            FencedLock la = a.lock(name);
            assertTrue(la.tryLock());
            FencedLock lb = b.lock(name);
            assertFalse(lb.tryLock());
            assertFalse(lb.tryLock(300, TimeUnit.MILLISECONDS));
            long first = la.token();
            la.unlock();
            assertTrue(lb.tryLock(5, TimeUnit.SECONDS));
            assertTrue(lb.token() > first);
            assertEquals(Mode.EXCLUSIVE, lb.sequencer().mode());
            lb.unlock();
        }
    }

    @Test
    void readLocksAreSharedAndTheWriteLockWaitsForThem() throws Exception {
        String name = fresh("rw");
        try (Session a = client.session().ttl(Duration.ofSeconds(5)).open();
                Session b = client.session().ttl(Duration.ofSeconds(5)).open()) {
            FencedReadWriteLock ra = a.readWriteLock(name);
            FencedReadWriteLock rb = b.readWriteLock(name);
            ra.readLock().lock();
            assertTrue(rb.readLock().tryLock());
            assertEquals(Mode.SHARED, rb.readLock().sequencer().mode());
            assertEquals(2, client.lockState(name).path("holders").size());
            assertFalse(rb.writeLock().tryLock());
            ra.readLock().unlock();
            rb.readLock().unlock();
            assertTrue(rb.writeLock().tryLock(5, TimeUnit.SECONDS));
            rb.writeLock().unlock();
        }
    }

    @Test
    void closingTheSessionLosesItsGrants() throws Exception {
        String name = fresh("close");
        Session s = client.session().ttl(Duration.ofSeconds(5)).open();
        FencedLock l = s.lock(name);
        l.lock();
        CompletableFuture<Void> lost = l.lost();
        s.close();
        lost.get(1, TimeUnit.SECONDS);
        assertTrue(s.lost().isDone());
    }

    /** Eight platform threads, two sessions: no overlap, tokens strictly increasing. */
    @Test
    void platformThreadsNeverOverlapAndTokensIncrease() throws Exception {
        assertEquals(8 * 25, contend(Executors.newFixedThreadPool(8), 8, 25));
    }

    /**
     * 1,000 virtual threads contend on one lock name (two sessions, 500
     * each), run with -Djdk.virtualThreadScheduler.parallelism=2
     * -Djdk.virtualThreadScheduler.maxPoolSize=2 (as CI does), under a JFR
     * recording of jdk.VirtualThreadPinned with threshold 0: every thread
     * gets the lock, and no pinned event has a frame of the client's classes
     * in its stack (a thread blocked in lock() does not pin its carrier).
     * The pinned events seen elsewhere, if any, are printed.
     */
    @Test
    void thousandVirtualThreadsAllGetTheLockAndNoneIsPinnedInTheClient() throws Exception {
        ExecutorService vt;
        try {
            vt = (ExecutorService) Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        } catch (NoSuchMethodException e) {
            assumeTrue(false, "virtual threads need JDK 21+; this is " + System.getProperty("java.version"));
            return;
        }
        Set<String> clientClasses = PinnedEvents.clientClasses();
        long t0 = System.nanoTime();
        PinnedEvents.Recorded<Integer> r = PinnedEvents.during(() -> contend(vt, 1000, 1));
        double secs = (System.nanoTime() - t0) / 1e9;
        List<String> inClient = new ArrayList<>();
        for (RecordedEvent e : r.events()) {
            if (!PinnedEvents.clientFrames(e, clientClasses).isEmpty()) {
                inClient.add(PinnedEvents.describe(e));
            }
        }
        System.out.printf("1000 virtual threads, 2 sessions, parallelism %s: %d lock/unlock in %.2f s; "
                + "%d %s events, %d in the client (java %s)%n",
                System.getProperty("jdk.virtualThreadScheduler.parallelism", "default"), r.result(), secs,
                r.events().size(), PinnedEvents.EVENT, inClient.size(), System.getProperty("java.version"));
        r.events().stream().limit(3).forEach(e -> System.out.println(PinnedEvents.describe(e)));
        assertEquals(1000, r.result(), "threads that got the lock");
        assertEquals(List.of(), inClient, "virtual threads pinned in the client's code");
    }

    /** Set before {@link LocksInInitializer} is first used. */
    static volatile FencedLock initializerLock;

    /** Its initializer takes and releases {@link #initializerLock}: a park there pins, even on JDK 24+. */
    static final class LocksInInitializer {
        static {
            initializerLock.lock();
            initializerLock.unlock();
        }

        static void touch() {
        }
    }

    /**
     * The check catches pinning in the client: a virtual thread blocked in
     * FencedLock.lock() inside a class initializer (which pins its carrier
     * on every JDK so far) is recorded with the client's frames.
     */
    @Test
    void aLockBlockedInAClassInitializerIsSeenPinnedInTheClient() throws Exception {
        try (Session s = client.session().ttl(Duration.ofSeconds(10)).open()) {
            FencedLock l = s.lock(fresh("pinned"));
            initializerLock = l;
            PinnedEvents.Recorded<Void> r = PinnedEvents.during(() -> {
                Thread t;
                l.lock();
                try {
                    t = PinnedEvents.startVirtual(LocksInInitializer::touch);
                    PinnedEvents.awaitParkedIn(t, FencedLock.class);
                } finally {
                    l.unlock();
                }
                t.join();
                return null;
            });
            Set<String> clientClasses = PinnedEvents.clientClasses();
            List<RecordedEvent> inClient = new ArrayList<>();
            for (RecordedEvent e : r.events()) {
                if (!PinnedEvents.clientFrames(e, clientClasses).isEmpty()) {
                    inClient.add(e);
                }
            }
            assertFalse(inClient.isEmpty(), "no pinned event in the client's code; recorded: " + r.events());
            System.out.println("pinned on purpose, as the check sees it: " + PinnedEvents.describe(inClient.get(0)));
        }
    }

    /** Runs the contention; the number of lock/unlock cycles done. */
    private static int contend(ExecutorService pool, int threads, int cycles) throws Exception {
        String name = fresh("contend");
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger regressions = new AtomicInteger();
        AtomicInteger done = new AtomicInteger();
        AtomicLong lastToken = new AtomicLong();
        ReentrantLock order = new ReentrantLock();
        try (Session a = client.session().ttl(Duration.ofSeconds(10)).open();
                Session b = client.session().ttl(Duration.ofSeconds(10)).open()) {
            FencedLock[] locks = {a.lock(name), b.lock(name)};
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < threads; i++) {
                FencedLock l = locks[i % 2];
                fs.add(pool.submit(() -> {
                    start.await();
                    for (int c = 0; c < cycles; c++) {
                        l.lock();
                        try {
                            if (inside.incrementAndGet() != 1) {
                                overlaps.incrementAndGet();
                            }
                            order.lock();
                            try {
                                if (l.token() <= lastToken.get()) {
                                    regressions.incrementAndGet();
                                }
                                lastToken.set(l.token());
                            } finally {
                                order.unlock();
                            }
                            inside.decrementAndGet();
                            done.incrementAndGet();
                        } finally {
                            l.unlock();
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> f : fs) {
                f.get(10, TimeUnit.MINUTES);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(0, overlaps.get(), "overlapping critical sections");
        assertEquals(0, regressions.get(), "tokens that did not increase");
        return done.get();
    }
}
