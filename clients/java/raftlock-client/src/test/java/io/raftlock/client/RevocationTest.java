package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A keepalive answer's {@code revoked} and {@code release_requested} reach the
 * holder (docs/API.md, "Revocation and operator sessions", "Release
 * requests"), against a scripted HTTP server on 127.0.0.1 (no cluster).
 */
class RevocationTest {
    private HttpServer server;
    /** What every keepalive answer adds to {@code "ttl":"1s"}, e.g. {@code ,"revoked":[...]}. */
    private final AtomicReference<String> keepaliveExtra = new AtomicReference<>("");
    private final AtomicInteger keepalives = new AtomicInteger();
    private final AtomicInteger releases = new AtomicInteger();
    private final AtomicInteger nextToken = new AtomicInteger(3);
    private final List<String> requests = new CopyOnWriteArrayList<>();
    private final AtomicInteger acquires = new AtomicInteger();
    /** Runs before the next acquire's answer (once): it holds the answer back. */
    private final AtomicReference<Runnable> beforeNextAcquire = new AtomicReference<>();
    /** Whether the acquires after a held-back one are answered lock_busy. */
    private volatile boolean busyAfterHeld;

    private String serve() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", ex -> {
            String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            String p = ex.getRequestURI().getPath();
            if (p.equals("/v1/sessions")) {
                reply(ex, "{\"id\":\"sid-secret\",\"ttl\":\"1s\",\"lock_delay\":\"0s\"}");
            } else if (p.equals("/v1/acquire")) {
                acquires.incrementAndGet();
                Runnable before = beforeNextAcquire.getAndSet(null);
                if (before != null) {
                    before.run();
                } else if (busyAfterHeld) {
                    reply(ex, 409, "{\"error\":{\"code\":\"lock_busy\",\"message\":\"lock a is held by session other\"}}");
                    ex.close();
                    return;
                }
                int t = nextToken.get();
                reply(ex, "{\"name\":\"a\",\"mode\":\"exclusive\",\"token\":" + t + ",\"sequencer\":\"rl1:x:" + t + ":a\"}");
            } else if (p.equals("/v1/locks/request-release")) {
                requests.add(body);
                reply(ex, "{\"requested\":true}");
            } else if (p.equals("/v1/release")) {
                releases.incrementAndGet();
                reply(ex, "{\"released\":true}");
            } else if (p.endsWith("/keepalive")) {
                reply(ex, "{\"ttl\":\"1s\"" + keepaliveExtra.get() + "}");
                keepalives.incrementAndGet();
            } else {
                reply(ex, "{}");
            }
            ex.close();
        });
        server.setExecutor(Executors.newCachedThreadPool()); // a held-back answer must not hold the keepalives
        server.start();
        return "127.0.0.1:" + server.getAddress().getPort();
    }

    private static void reply(HttpExchange ex, String json) throws IOException {
        reply(ex, 200, json);
    }

    private static void reply(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
    }

    /** Waits until n more keepalives were answered (with what the server answers now). */
    private void keepalivesAnswered(int n) throws InterruptedException {
        int want = keepalives.get() + n;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (keepalives.get() < want) {
            assertTrue(System.nanoTime() < deadline, "no keepalive answered");
            Thread.sleep(20);
        }
    }

    private static String revoked(String holder, long token, String kind, String reason) {
        return ",\"revoked\":[{\"name\":\"a\",\"holder\":\"" + holder + "\",\"token\":" + token + ",\"kind\":\"" + kind
                + "\",\"reason\":\"" + reason + "\"}]";
    }

    @AfterEach
    void stop() {
        if (server != null) {
            server.stop(0);
        }
    }

    private Session open() throws Exception {
        return open(Duration.ofMillis(300));
    }

    /** A session (ttl 1 s, no lock-delay: lostAfter 0.89 s) whose requests may take up to requestTimeout. */
    private Session open(Duration requestTimeout) throws Exception {
        return RaftlockClient.builder().endpoints(serve()).requestTimeout(requestTimeout).build().session().open();
    }

    /** A hook that holds an answer back until millis after the request came, first having run meanwhile. */
    private static Runnable heldBack(long millis, Interruptible first) {
        return () -> {
            long start = System.nanoTime();
            try {
                if (first != null) {
                    first.run();
                }
                long left = TimeUnit.MILLISECONDS.toNanos(millis) - (System.nanoTime() - start);
                if (left > 0) {
                    Thread.sleep(TimeUnit.NANOSECONDS.toMillis(left) + 1); // the fault itself: a stalled answer
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    private interface Interruptible {
        void run() throws InterruptedException;
    }

    @Test
    void aLateGrantAnswerAfterARevocationIsNotHeld() throws Exception {
        // The grant's answer comes 1.5 s after its request (lostAfter 0.89 s):
        // meanwhile keepalive answers named its revocation, then no longer (its
        // ttl + lock-delay over), and the lock went to another session. The
        // client asks again (same holder), and its try finds the lock busy.
        try (Session s = open(Duration.ofSeconds(5))) {
            Grant g = new Grant(s, "a", Mode.EXCLUSIVE, "");
            nextToken.set(6);
            busyAfterHeld = true;
            beforeNextAcquire.set(heldBack(1500, () -> {
                keepaliveExtra.set(revoked(g.holder(), 6, "admin", "r"));
                keepalivesAnswered(2);
                keepaliveExtra.set("");
                keepalivesAnswered(2);
            }));
            RaftlockException e = assertThrows(RaftlockException.class, () -> g.acquire(Duration.ZERO, true));
            assertEquals(RaftlockException.LOCK_BUSY, e.code());
            assertEquals(2, acquires.get(), "the late answer, then one asking again");
            assertEquals(0, releases.get(), "nothing of ours to give back");
        }
    }

    @Test
    void aLateGrantAnswerOfAHeldGrantIsConfirmed() throws Exception {
        // Too late to trust, but still held: asking again (same holder) gets
        // the same grant in time, and the lock is held.
        try (Session s = open(Duration.ofSeconds(5))) {
            nextToken.set(6);
            beforeNextAcquire.set(heldBack(1500, null));
            Grant g = s.acquire("a", Mode.EXCLUSIVE, Duration.ZERO, "");
            assertEquals(6, g.token());
            assertFalse(g.isLost());
            assertEquals(2, acquires.get(), "the late answer, then one asking again");
        }
    }

    @Test
    void aRevokedGrantIsLostAtTheNextKeepaliveWithTheOperatorsReason() throws Exception {
        try (Session s = open()) {
            FencedLock l = s.lock("a");
            l.lock();
            Grant g = l.grant();
            CompletableFuture<String> seenOnLost = new CompletableFuture<>();
            g.onLost(() -> seenOnLost.complete(g.revoked().map(LockRevokedException::reason).orElse("none")));
            keepaliveExtra.set(revoked(g.holder(), 3, "admin", "stuck job"));
            l.lost().get(5, TimeUnit.SECONDS);
            LockRevokedException e = l.revoked().orElseThrow();
            assertEquals("stuck job", seenOnLost.get(5, TimeUnit.SECONDS), "revoked is set before lost completes");
            assertEquals("admin", e.kind());
            assertEquals(3, e.token());
            assertEquals(LockRevokedException.LOCK_LOST, e.code());
            assertEquals("lock_lost: lock \"a\" (token 3) revoked by an operator: stuck job", e.getMessage());
            assertEquals(SessionState.SAFE, s.state(), "the session goes on");
            l.unlock(); // the grant is gone on the cluster: nothing to send
            assertEquals(0, releases.get());
            assertFalse(l.isLocked());
        }
    }

    @Test
    void aHoldLimitRevocationSaysSo() throws Exception {
        try (Session s = open()) {
            Grant g = s.acquire("a", Mode.EXCLUSIVE, Duration.ZERO, "");
            keepaliveExtra.set(revoked(g.holder(), 3, "max_hold", ""));
            g.lost().get(5, TimeUnit.SECONDS);
            assertEquals("max_hold", g.revoked().orElseThrow().kind());
            assertTrue(g.revoked().orElseThrow().getMessage().contains("hold limit (max_hold) ran out"));
        }
    }

    @Test
    void aRevocationOfAnotherGrantLosesNothing() throws Exception {
        try (Session s = open()) {
            nextToken.set(5);
            Grant g = s.acquire("a", Mode.EXCLUSIVE, Duration.ZERO, "");
            keepaliveExtra.set(",\"revoked\":[{\"name\":\"a\",\"holder\":\"" + g.holder() + "\",\"token\":4,\"reason\":\"old\"},"
                    + "{\"name\":\"a\",\"holder\":\"someone-else\",\"token\":5,\"reason\":\"other\"},"
                    + "{\"name\":\"b\",\"holder\":\"" + g.holder() + "\",\"token\":5,\"reason\":\"other lock\"},\"not an object\"]");
            keepalivesAnswered(3);
            assertFalse(g.isLost());
            assertTrue(g.revoked().isEmpty());
        }
    }

    @Test
    void aGrantAnsweredAfterAKeepaliveNamedItRevokedIsLostAtOnce() throws Exception {
        // The keepalive answer can overtake the acquire's answer: the session
        // remembers the last answer's revocations for grants still to come.
        try (Session s = open()) {
            Grant g = new Grant(s, "a", Mode.EXCLUSIVE, "");
            nextToken.set(6);
            keepaliveExtra.set(revoked(g.holder(), 6, "admin", "r"));
            keepalivesAnswered(1);
            g.acquire(Duration.ZERO, true);
            assertTrue(g.isLost());
            assertEquals("r", g.revoked().orElseThrow().reason());
        }
    }

    @Test
    void aReleaseRequestIsShownAndTheLockKept() throws Exception {
        try (Session s = open()) {
            FencedLock l = s.lock("a");
            l.lock();
            Grant g = l.grant();
            List<ReleaseRequest> called = new CopyOnWriteArrayList<>();
            g.onReleaseRequested(called::add);
            keepaliveExtra.set(",\"release_requested\":[{\"name\":\"a\",\"holder\":\"" + g.holder() + "\",\"token\":3,"
                    + "\"by_session_handle\":\"1f0c9a7be24d5e86\",\"by_session_name\":\"waiter\",\"by_holder\":\"w1\","
                    + "\"at\":\"2026-11-27T16:00:00Z\"}]");
            CompletableFuture<ReleaseRequest> asked = l.releaseRequested();
            ReleaseRequest r = asked.get(5, TimeUnit.SECONDS);
            assertEquals(new ReleaseRequest("1f0c9a7be24d5e86", "waiter", "w1", "2026-11-27T16:00:00Z"), r);
            keepalivesAnswered(2);
            assertEquals(List.of(r), called, "once, however many answers repeat it");
            assertFalse(g.isLost(), "the holder chooses");
            assertEquals(SessionState.SAFE, s.state());
            l.unlock();
            assertEquals(1, releases.get());
        }
    }

    @Test
    void requestReleaseAsksForTheLockOnBehalfOfTheSession() throws Exception {
        try (Session s = open()) {
            s.requestRelease("jobs/a");
            assertEquals(1, requests.size());
            com.fasterxml.jackson.databind.JsonNode b = new com.fasterxml.jackson.databind.ObjectMapper().readTree(requests.get(0));
            assertEquals("jobs/a", b.path("name").asText());
            assertEquals("sid-secret", b.path("session").asText());
            assertTrue(b.path("holder").asText().startsWith("request-"));
        }
    }
}
