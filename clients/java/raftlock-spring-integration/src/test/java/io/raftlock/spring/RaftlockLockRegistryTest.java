package io.raftlock.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.raftlock.client.FencedLock;
import io.raftlock.client.RaftlockClient;
import io.raftlock.client.Session;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.integration.leader.Candidate;
import org.springframework.integration.leader.Context;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;

/**
 * The registry against a real cluster (RAFTLOCK_ENDPOINTS, as
 * raftlock-conformance -exec sets it; skipped without), tested as Spring's
 * own registries are: threads of two registries (two sessions) contending.
 */
class RaftlockLockRegistryTest {
    private static String[] endpoints;
    private static RaftlockClient client;

    @BeforeAll
    static void connect() {
        String eps = System.getenv("RAFTLOCK_ENDPOINTS");
        assumeTrue(eps != null && !eps.isBlank(), "RAFTLOCK_ENDPOINTS is not set: no cluster");
        endpoints = eps.split(",");
        client = RaftlockClient.builder().endpoints(endpoints).build();
    }

    private static Session open() throws InterruptedException {
        return client.session().ttl(Duration.ofSeconds(10)).open();
    }

    @Test
    void obtainGivesOneLockPerKeyUntilExpiredUnused() throws Exception {
        try (Session s = open()) {
            RaftlockLockRegistry r = new RaftlockLockRegistry(s);
            String key = UUID.randomUUID().toString();
            FencedLock a = r.obtain(key);
            assertSame(a, r.obtain(key));
            a.lock();
            r.expireUnusedOlderThan(-1);
            assertSame(a, r.obtain(key), "a held lock is not expired");
            a.unlock();
            r.expireUnusedOlderThan(-1);
            assertNotSame(a, r.obtain(key));
            assertThrows(IllegalArgumentException.class, () -> r.obtain(42));
        }
    }

    /** 8 JVM threads (two registries of 4) × 1,000 lock/unlock cycles: no overlap, tokens strictly increasing. */
    @Test
    void eightThreadsThousandCyclesNeverOverlapAndTokensIncrease() throws Exception {
        String key = UUID.randomUUID().toString();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger regressions = new AtomicInteger();
        AtomicLong last = new AtomicLong();
        ReentrantLock order = new ReentrantLock();
        ExecutorService pool = Executors.newFixedThreadPool(8);
        long t0 = System.nanoTime();
        try (Session a = open(); Session b = open()) {
            RaftlockLockRegistry[] regs = {new RaftlockLockRegistry(a), new RaftlockLockRegistry(b)};
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                RaftlockLockRegistry reg = regs[t % 2];
                fs.add(pool.submit(() -> {
                    start.await();
                    for (int i = 0; i < 1000; i++) {
                        FencedLock l = reg.obtain(key);
                        l.lock();
                        try {
                            if (inside.incrementAndGet() != 1) {
                                overlaps.incrementAndGet();
                            }
                            order.lock();
                            try {
                                if (l.token() <= last.get()) {
                                    regressions.incrementAndGet();
                                }
                                last.set(l.token());
                            } finally {
                                order.unlock();
                            }
                            inside.decrementAndGet();
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
        System.out.printf("registry: 8 threads x 1000 lock/unlock cycles in %.1f s%n", (System.nanoTime() - t0) / 1e9);
        assertEquals(0, overlaps.get(), "overlapping critical sections");
        assertEquals(0, regressions.get(), "tokens that did not increase");
    }

    /** A holder whose session is black-holed loses the lock before the other registry is granted it. */
    @Test
    void blackHoledHolderLosesTheLockBeforeAnotherIsGrantedIt() throws Exception {
        String key = UUID.randomUUID().toString();
        List<BlackHoleProxy> proxies = new ArrayList<>();
        try {
            List<String> via = new ArrayList<>();
            for (String e : endpoints) {
                BlackHoleProxy p = new BlackHoleProxy(e);
                proxies.add(p);
                via.add(p.address());
            }
            RaftlockClient cut = RaftlockClient.builder().endpoints(via).requestTimeout(Duration.ofSeconds(1)).build();
            try (Session holder = cut.session().ttl(Duration.ofSeconds(2)).lockDelay(Duration.ZERO).open();
                    Session other = open()) {
                FencedLock held = new RaftlockLockRegistry(holder).obtain(key);
                held.lock();
                AtomicLong lostAt = new AtomicLong();
                CompletableFuture<Void> lost = held.lost().thenRun(() -> lostAt.set(System.nanoTime()));
                for (BlackHoleProxy p : proxies) {
                    p.cut();
                }
                FencedLock next = new RaftlockLockRegistry(other).obtain(key);
                next.lock();
                long grantedAt = System.nanoTime();
                try {
                    assertTrue(lost.isDone(), "the holder's lock was not lost when the other was granted");
                    assertTrue(lostAt.get() < grantedAt);
                    assertTrue(next.token() > held.token());
                    System.out.printf("registry: lost %.0f ms before the other grant%n", (grantedAt - lostAt.get()) / 1e6);
                } finally {
                    next.unlock();
                }
            }
        } finally {
            for (BlackHoleProxy p : proxies) {
                p.close();
            }
        }
    }

    private static final class Leader implements Candidate {
        final String id;
        final CompletableFuture<Void> granted = new CompletableFuture<>();
        final CompletableFuture<Void> revoked = new CompletableFuture<>();

        Leader(String id) {
            this.id = id;
        }

        @Override
        public String getRole() {
            return "leader-test-" + ROLE;
        }

        @Override
        public String getId() {
            return id;
        }

        @Override
        public void onGranted(Context ctx) {
            granted.complete(null);
        }

        @Override
        public void onRevoked(Context ctx) {
            revoked.complete(null);
        }
    }

    private static final String ROLE = UUID.randomUUID().toString();

    @Test
    void leaderInitiatorHandsLeadershipOverOnStop() throws Exception {
        try (Session a = open(); Session b = open()) {
            Leader la = new Leader("a");
            Leader lb = new Leader("b");
            LockRegistryLeaderInitiator ia = new LockRegistryLeaderInitiator(new RaftlockLockRegistry(a), la);
            LockRegistryLeaderInitiator ib = new LockRegistryLeaderInitiator(new RaftlockLockRegistry(b), lb);
            ia.setBusyWaitMillis(200);
            ib.setBusyWaitMillis(200);
            ia.setHeartBeatMillis(200);
            ib.setHeartBeatMillis(200);
            ia.start();
            la.granted.get(30, TimeUnit.SECONDS);
            ib.start();
            assertTrue(ia.getContext().isLeader());
            ia.stop();
            la.revoked.get(30, TimeUnit.SECONDS);
            lb.granted.get(30, TimeUnit.SECONDS);
            assertTrue(ib.getContext().isLeader());
            ib.stop();
        }
    }
}
