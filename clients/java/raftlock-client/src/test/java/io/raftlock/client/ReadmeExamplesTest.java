package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The README's examples (clients/java/README.md), as code that compiles and
 * runs against a real cluster (RAFTLOCK_ENDPOINTS; skipped without): the
 * session and lock with its sequencer through a fence, the ReadWriteLock, an
 * election observed in order, and a watch.
 */
class ReadmeExamplesTest {
    private static RaftlockClient client;

    @BeforeAll
    static void connect() {
        String eps = System.getenv("RAFTLOCK_ENDPOINTS");
        assumeTrue(eps != null && !eps.isBlank(), "RAFTLOCK_ENDPOINTS is not set: no cluster");
        client = RaftlockClient.builder().endpoints(eps.split(",")).build();
    }

    private static String fresh(String what) {
        return "java-readme/" + what + "/" + UUID.randomUUID();
    }

    @Test
    void sessionLockAndFence() throws Exception {
        String name = fresh("nightly");
        Fence fence = new Fence();
        long first;
        try (Session session = client.session().ttl(Duration.ofSeconds(10)).name("billing").open()) {
            FencedLock lock = session.lock(name);
            lock.lock();
            try {
                fence.check(lock.sequencer().toString());
                first = lock.token();
                assertTrue(!lock.lost().isDone());
            } finally {
                lock.unlock();
            }
            lock.lock();
            try {
                fence.check(lock.sequencer());
            } finally {
                lock.unlock();
            }
        }
        String stale = new Sequencer(name, Mode.EXCLUSIVE, first).toString();
        assertThrows(StaleSequencerException.class, () -> fence.check(stale));
    }

    @Test
    void readWriteLock() throws Exception {
        String name = fresh("users");
        try (Session session = client.session().ttl(Duration.ofSeconds(10)).open()) {
            FencedReadWriteLock rw = session.readWriteLock(name);
            rw.readLock().lock();
            try {
                assertEquals(Mode.SHARED, rw.readLock().sequencer().mode());
            } finally {
                rw.readLock().unlock();
            }
            rw.writeLock().lock();
            try {
                assertEquals(Mode.EXCLUSIVE, rw.writeLock().sequencer().mode());
            } finally {
                rw.writeLock().unlock();
            }
        }
    }

    @Test
    void electionObservedInOrder() throws Exception {
        String name = fresh("scheduler");
        LinkedBlockingQueue<Leader> seen = new LinkedBlockingQueue<>();
        try (Session a = client.session().ttl(Duration.ofSeconds(10)).open();
                Session b = client.session().ttl(Duration.ofSeconds(10)).open()) {
            Election ea = a.election(name);
            Grant la = ea.campaign("node-a:8080");
            try (Watch w = ea.observe(seen::add)) {
                Leader first = seen.poll(30, TimeUnit.SECONDS);
                assertEquals("node-a:8080", first.value());
                assertEquals(la.token(), first.token());
                Election eb = b.election(name);
                ea.resign();
                Grant lb = eb.campaign("node-b:8080", Duration.ofSeconds(30));
                Leader second = seen.poll(30, TimeUnit.SECONDS);
                assertEquals("node-b:8080", second.value());
                assertEquals(lb.token(), second.token());
                assertEquals(new Sequencer(name, Mode.EXCLUSIVE, lb.token()), second.sequencer());
                eb.resign();
            }
        }
    }

    @Test
    void watchReportsTheStateThenEachChange() throws Exception {
        String name = fresh("watched");
        LinkedBlockingQueue<JsonNode> states = new LinkedBlockingQueue<>();
        List<Long> tokens = new CopyOnWriteArrayList<>();
        try (Session s = client.session().ttl(Duration.ofSeconds(10)).open();
                Watch w = client.watch(name, Duration.ofSeconds(10), states::add)) {
            assertEquals(0, states.poll(30, TimeUnit.SECONDS).path("holders").size());
            FencedLock l = s.lock(name);
            l.lock();
            tokens.add(l.token());
            JsonNode held = states.poll(30, TimeUnit.SECONDS);
            assertEquals(tokens.get(0), held.path("holders").get(0).path("token").asLong());
            l.unlock();
            assertEquals(0, states.poll(30, TimeUnit.SECONDS).path("holders").size());
        }
    }
}
