package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The transport and the session against scripted HTTP servers on 127.0.0.1 (no cluster). */
class TransportTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final List<HttpServer> servers = new CopyOnWriteArrayList<>();

    interface Script {
        void answer(HttpExchange ex, JsonNode body) throws IOException;
    }

    /** A server on a free loopback port; records (path, body, authorization) of each request. */
    private String serve(List<String[]> seen, Script script) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        s.createContext("/", ex -> {
            byte[] raw = ex.getRequestBody().readAllBytes();
            JsonNode body = raw.length == 0 ? JSON.createObjectNode() : JSON.readTree(raw);
            seen.add(new String[] {ex.getRequestURI().getPath(), body.toString(),
                String.valueOf(ex.getRequestHeaders().getFirst("Authorization"))});
            script.answer(ex, body);
            ex.close();
        });
        s.start();
        servers.add(s);
        return "127.0.0.1:" + s.getAddress().getPort();
    }

    private static void reply(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
    }

    private static String holderOf(String body) {
        try {
            return JSON.readTree(body).path("holder").asText();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    @AfterEach
    void stop() {
        for (HttpServer s : servers) {
            s.stop(0);
        }
    }

    private static final String OPENED = "{\"id\":\"sid-secret\",\"ttl\":\"10s\",\"lock_delay\":\"0s\"}";

    @Test
    void acquireWithUnknownOutcomeIsRetriedWithTheSameHolder() throws Exception {
        List<String[]> seen = new CopyOnWriteArrayList<>();
        AtomicInteger acquires = new AtomicInteger();
        String ep = serve(seen, (ex, body) -> {
            String p = ex.getRequestURI().getPath();
            if (p.equals("/v1/sessions")) {
                reply(ex, 200, OPENED);
            } else if (p.equals("/v1/acquire") && acquires.getAndIncrement() == 0) {
                reply(ex, 503, "{\"error\":{\"code\":\"unknown_outcome\",\"message\":\"leadership lost\"}}");
            } else if (p.equals("/v1/acquire")) {
                reply(ex, 200, "{\"name\":\"jobs/a\",\"mode\":\"exclusive\",\"token\":7,\"sequencer\":\"rl1:x:7:jobs/a\"}");
            } else {
                reply(ex, 200, "{\"ttl\":\"10s\"}");
            }
        });
        RaftlockClient c = RaftlockClient.builder().endpoints(ep).build();
        try (Session s = c.session().open()) {
            Grant g = s.acquire("jobs/a", Mode.EXCLUSIVE, Duration.ZERO, "");
            assertEquals(7, g.token());
            g.lost().complete(null);
            s.lost().complete(null);
            assertFalse(g.isLost(), "a caller cannot fake a loss");
            assertFalse(s.lost().isDone());
            List<String> holders = seen.stream().filter(r -> r[0].equals("/v1/acquire"))
                    .map(r -> holderOf(r[1])).toList();
            assertEquals(2, holders.size());
            assertEquals(holders.get(0), holders.get(1));
        }
    }

    @Test
    void callsFollowTheLeaderAddressAmongTheEndpoints() throws Exception {
        List<String[]> seenA = new CopyOnWriteArrayList<>();
        List<String[]> seenB = new CopyOnWriteArrayList<>();
        String b = serve(seenB, (ex, body) -> reply(ex, 200, "{\"name\":\"x\",\"mode\":\"exclusive\",\"holders\":[]}"));
        String a = serve(seenA, (ex, body) -> {
            ex.getResponseHeaders().set("X-Raftlock-Leader-Addr", b);
            reply(ex, 200, "{\"name\":\"x\",\"mode\":\"exclusive\",\"holders\":[]}");
        });
        RaftlockClient c = RaftlockClient.builder().endpoints(a, b).build();
        c.lockState("x");
        c.lockState("x");
        assertEquals(1, seenA.size());
        assertEquals(1, seenB.size());
    }

    @Test
    void errorsCarryTheirCodeAndNeitherTheSessionIdNorTheToken() throws Exception {
        List<String[]> seen = new CopyOnWriteArrayList<>();
        String ep = serve(seen, (ex, body) -> {
            if (ex.getRequestURI().getPath().equals("/v1/sessions")) {
                reply(ex, 200, OPENED);
            } else if (ex.getRequestURI().getPath().equals("/v1/acquire")) {
                reply(ex, 409, "{\"error\":{\"code\":\"lock_busy\",\"message\":\"lock \\\"jobs/a\\\" is held\"}}");
            } else {
                reply(ex, 200, "{\"ttl\":\"10s\"}");
            }
        });
        RaftlockClient c = RaftlockClient.builder().endpoints(ep).token("tok-secret").build();
        try (Session s = c.session().open()) {
            RaftlockException e = assertThrows(RaftlockException.class,
                    () -> s.acquire("jobs/a", Mode.EXCLUSIVE, Duration.ZERO, ""));
            assertEquals(RaftlockException.LOCK_BUSY, e.code());
            assertFalse(e.getMessage().contains("sid-secret") || e.getMessage().contains("tok-secret"));
            assertFalse(s.toString().contains("sid-secret"));
            assertFalse(c.toString().contains("tok-secret"));
            FencedLock l = s.lock("jobs/a");
            assertFalse(l.tryLock());
        }
        assertTrue(seen.stream().allMatch(r -> r[2].equals("Bearer tok-secret")));
    }

    @Test
    void badLockNamesAreRefusedBeforeSending() throws Exception {
        List<String[]> seen = new CopyOnWriteArrayList<>();
        String ep = serve(seen, (ex, body) -> reply(ex, 200,
                ex.getRequestURI().getPath().equals("/v1/sessions") ? OPENED : "{\"ttl\":\"10s\"}"));
        RaftlockClient c = RaftlockClient.builder().endpoints(ep).build();
        try (Session s = c.session().open()) {
            RaftlockException e = assertThrows(RaftlockException.class,
                    () -> s.acquire("a\u0007", Mode.EXCLUSIVE, Duration.ZERO, ""));
            assertEquals(RaftlockException.INVALID_ARGUMENT, e.code());
        }
        assertTrue(seen.stream().noneMatch(r -> r[0].equals("/v1/acquire")));
    }

    @Test
    void sessionWithoutKeepalivesGoesToJeopardyLosesItsGrantsThenExpires() throws Exception {
        List<String[]> seen = new CopyOnWriteArrayList<>();
        String ep = serve(seen, (ex, body) -> {
            String p = ex.getRequestURI().getPath();
            if (p.equals("/v1/sessions")) {
                reply(ex, 200, "{\"id\":\"sid\",\"ttl\":\"1s\",\"lock_delay\":\"0s\"}");
            } else if (p.equals("/v1/acquire")) {
                reply(ex, 200, "{\"name\":\"a\",\"mode\":\"exclusive\",\"token\":3,\"sequencer\":\"rl1:x:3:a\"}");
            } else {
                reply(ex, 503, "{\"error\":{\"code\":\"no_leader\",\"message\":\"no leader\"}}");
            }
        });
        RaftlockClient c = RaftlockClient.builder().endpoints(ep).requestTimeout(Duration.ofMillis(200)).build();
        List<SessionState> states = new CopyOnWriteArrayList<>();
        java.util.concurrent.CompletableFuture<Void> expired = new java.util.concurrent.CompletableFuture<>();
        try (Session s = c.session().grace(Duration.ofMillis(500)).onState(st -> {
            states.add(st);
            if (st == SessionState.EXPIRED) {
                expired.complete(null);
            }
        }).open()) {
            long opened = System.nanoTime();
            Grant g = s.acquire("a", Mode.EXCLUSIVE, Duration.ZERO, "");
            g.lost().get();
            long lostAfter = System.nanoTime() - opened;
            assertTrue(lostAfter <= Session.lostAfter(Duration.ofSeconds(1), Duration.ZERO).toNanos() + 50_000_000L,
                    "lost after " + lostAfter / 1e6 + " ms");
            assertTrue(s.lost().isDone());
            expired.get(10, java.util.concurrent.TimeUnit.SECONDS);
            assertEquals(SessionState.EXPIRED, s.state());
        }
        // Events arrive in order from the event thread.
        assertEquals(List.of(SessionState.JEOPARDY, SessionState.EXPIRED), states.subList(0, 2));
    }
}
