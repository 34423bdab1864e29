package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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

    private String serve() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", ex -> {
            String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            String p = ex.getRequestURI().getPath();
            if (p.equals("/v1/sessions")) {
                reply(ex, "{\"id\":\"sid-secret\",\"ttl\":\"1s\",\"lock_delay\":\"0s\"}");
            } else if (p.equals("/v1/acquire")) {
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
        server.start();
        return "127.0.0.1:" + server.getAddress().getPort();
    }

    private static void reply(HttpExchange ex, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(200, b.length);
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
        return RaftlockClient.builder().endpoints(serve()).requestTimeout(Duration.ofMillis(300)).build().session().open();
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
