package io.raftlock.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.raftlock.client.Grant;
import io.raftlock.client.Mode;
import io.raftlock.client.RaftlockClient;
import io.raftlock.client.RaftlockException;
import io.raftlock.client.Session;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ShedLock's provider contract, ported from its AbstractLockProviderIntegrationTest
 * and AbstractExtensibleLockProviderIntegrationTest (shedlock-test-support is not
 * published), with waits on the cluster in place of their sleeps. Against a real
 * cluster (RAFTLOCK_ENDPOINTS, as raftlock-conformance -exec sets it); skipped without.
 */
class RaftlockLockProviderTest {
    private static RaftlockClient client;
    private static RaftlockLockProvider provider;

    @BeforeAll
    static void connect() {
        String eps = System.getenv("RAFTLOCK_ENDPOINTS");
        assumeTrue(eps != null && !eps.isBlank(), "RAFTLOCK_ENDPOINTS is not set: no cluster");
        client = RaftlockClient.builder().endpoints(eps.split(",")).build();
        provider = new RaftlockLockProvider(client);
    }

    @AfterAll
    static void stop() {
        if (provider != null) {
            provider.close();
        }
    }

    private static String fresh() {
        return "test-" + UUID.randomUUID();
    }

    private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
        return new LockConfiguration(ClockProvider.now(), name, atMost, atLeast);
    }

    /** Waits (a queued acquire by another session) up to {@code wait} for the lock; the moment it was granted, or null. */
    private static Instant grantedWithin(String name, Duration wait) throws Exception {
        try (Session s = client.session().ttl(Duration.ofSeconds(5)).open()) {
            Grant g = s.acquire(provider.lockName(name), Mode.EXCLUSIVE, wait, "");
            Instant at = ClockProvider.now();
            g.release();
            return at;
        } catch (RaftlockException e) {
            if (e.code().equals(RaftlockException.WAIT_TIMEOUT)) {
                return null;
            }
            throw e;
        }
    }

    private static boolean held(String name) throws Exception {
        return client.lockState(provider.lockName(name)).path("holders").size() > 0;
    }

    @Test
    void shouldCreateLock() throws Exception {
        String name = fresh();
        Optional<SimpleLock> lock = provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO));
        assertTrue(lock.isPresent());
        assertTrue(held(name));
        lock.get().unlock();
        assertFalse(held(name));
    }

    @Test
    void shouldNotReturnSecondLock() throws Exception {
        String name = fresh();
        Optional<SimpleLock> lock = provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO));
        assertTrue(lock.isPresent());
        assertFalse(provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).isPresent());
        lock.get().unlock();
    }

    @Test
    void shouldCreateLockIfRecordAlreadyExists() {
        String name = fresh();
        provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).orElseThrow().unlock();
        provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).orElseThrow().unlock();
    }

    @Test
    void shouldHonourLockAtLeastFor() throws Exception {
        String name = fresh();
        LockConfiguration c = config(name, Duration.ofSeconds(10), Duration.ofMillis(1500));
        provider.lock(c).orElseThrow().unlock();
        assertFalse(provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).isPresent(),
                "unlocked before lockAtLeastFor: still locked");
        Instant at = grantedWithin(name, Duration.ofSeconds(10));
        assertTrue(at != null && !at.isBefore(c.getLockAtLeastUntil().minusMillis(100)),
                "granted at " + at + ", lockAtLeastUntil " + c.getLockAtLeastUntil());
    }

    @Test
    void shouldTimeoutAtLockAtMostFor() throws Exception {
        String name = fresh();
        LockConfiguration c = config(name, Duration.ofMillis(800), Duration.ZERO);
        RaftlockLockProvider.RaftlockSimpleLock lock =
                (RaftlockLockProvider.RaftlockSimpleLock) provider.lock(c).orElseThrow();
        Instant at = grantedWithin(name, Duration.ofSeconds(10));
        assertTrue(at != null && !at.isBefore(c.getLockAtMostUntil().minusMillis(100)),
                "granted at " + at + ", lockAtMostUntil " + c.getLockAtMostUntil());
        assertTrue(lock.lost().isDone(), "the holder's grant is lost once lockAtMostFor passed");
    }

    @Test
    void shouldBeAbleToExtendLock() throws Exception {
        String name = fresh();
        SimpleLock lock = provider.lock(config(name, Duration.ofMillis(800), Duration.ZERO)).orElseThrow();
        SimpleLock extended = lock.extend(Duration.ofSeconds(10), Duration.ZERO).orElseThrow();
        assertEquals(null, grantedWithin(name, Duration.ofMillis(1800)), "extended past its first lockAtMostFor");
        extended.unlock();
        assertTrue(grantedWithin(name, Duration.ofSeconds(5)) != null);
    }

    @Test
    void shouldNotBeAbleToExtendOrUnlockTwice() {
        String name = fresh();
        SimpleLock lock = provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).orElseThrow();
        lock.unlock();
        assertThrows(IllegalStateException.class, () -> lock.extend(Duration.ofSeconds(10), Duration.ZERO));
        assertThrows(IllegalStateException.class, lock::unlock);
    }

    @Test
    void theTaskReadsItsSequencer() {
        String name = fresh();
        RaftlockLockProvider.RaftlockSimpleLock lock = (RaftlockLockProvider.RaftlockSimpleLock)
                provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO)).orElseThrow();
        assertEquals(lock.sequencer(), RaftlockLockProvider.currentSequencer().orElseThrow());
        assertEquals(provider.lockName(name), lock.sequencer().name());
        lock.unlock();
        assertFalse(RaftlockLockProvider.currentSequencer().isPresent());
    }

    /** ShedLock's fuzz test: threads race for one lock; the counter under it is never raced. */
    @Test
    void fuzzTestShouldPass() throws Exception {
        String name = fresh();
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicInteger runs = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 15; i++) {
                        Optional<SimpleLock> l = provider.lock(config(name, Duration.ofSeconds(10), Duration.ZERO));
                        if (l.isPresent()) {
                            if (inside.incrementAndGet() != 1) {
                                overlaps.incrementAndGet();
                            }
                            runs.incrementAndGet();
                            inside.decrementAndGet();
                            l.get().unlock();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(5, TimeUnit.MINUTES);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(0, overlaps.get());
        assertTrue(runs.get() > 0);
    }
}
