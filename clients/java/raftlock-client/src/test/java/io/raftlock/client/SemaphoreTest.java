package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An acquire with permits takes one slot of a semaphore (docs/API.md,
 * "Semaphores"), against a scripted HTTP server on 127.0.0.1 (no cluster).
 */
class SemaphoreTest {
    private HttpServer server;
    /** The bodies of the acquires the server saw. */
    private final List<JsonNode> acquires = new CopyOnWriteArrayList<>();
    /** The next acquire's answer. */
    private final AtomicReference<String> grant = new AtomicReference<>(
            "{\"name\":\"pool\",\"mode\":\"exclusive\",\"token\":7,\"sequencer\":\"rl1:p1/2:7:pool\",\"permits\":2,\"slot\":1}");
    /** What every keepalive answer adds to {@code "ttl":"1s"}. */
    private final AtomicReference<String> keepaliveExtra = new AtomicReference<>("");

    private String serve() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", ex -> {
            byte[] body = ex.getRequestBody().readAllBytes();
            String p = ex.getRequestURI().getPath();
            if (p.equals("/v1/sessions")) {
                reply(ex, "{\"id\":\"sid-secret\",\"ttl\":\"1s\",\"lock_delay\":\"0s\"}");
            } else if (p.equals("/v1/acquire")) {
                acquires.add(Transport.JSON.readTree(new String(body, StandardCharsets.UTF_8)));
                reply(ex, grant.get());
            } else if (p.endsWith("/keepalive")) {
                reply(ex, "{\"ttl\":\"1s\"" + keepaliveExtra.get() + "}");
            } else {
                reply(ex, "{}");
            }
            ex.close();
        });
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
        return "127.0.0.1:" + server.getAddress().getPort();
    }

    private static void reply(HttpExchange ex, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(200, b.length);
        ex.getResponseBody().write(b);
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
    void aSemaphoreAcquireSendsItsPermitsAndKeepsTheSlot() throws Exception {
        try (Session s = open()) {
            Grant g = s.acquire("pool", Mode.EXCLUSIVE, Duration.ZERO, "", 2);
            assertEquals(1, acquires.size());
            assertEquals(2, acquires.get(0).path("permits").asInt());
            assertEquals(2, g.permits());
            assertEquals(1, g.slot());
            assertEquals(new Sequencer("pool", Mode.EXCLUSIVE, 7, 1, 2), g.sequencer());
            assertEquals("rl1:p1/2:7:pool", g.sequencer().toString());
        }
    }

    @Test
    void aPlainAcquireSendsNoPermitsAndHasNoSlot() throws Exception {
        grant.set("{\"name\":\"a\",\"mode\":\"exclusive\",\"token\":3,\"sequencer\":\"rl1:x:3:a\"}");
        try (Session s = open()) {
            Grant g = s.acquire("a", Mode.EXCLUSIVE, Duration.ZERO, "");
            assertTrue(acquires.get(0).path("permits").isMissingNode());
            assertEquals(0, g.permits());
            assertEquals(Sequencer.NO_SLOT, g.slot());
        }
    }

    @Test
    void aRevokedSlotGrantIsLostWithTheOperatorsReason() throws Exception {
        grant.set("{\"name\":\"pool\",\"mode\":\"exclusive\",\"token\":9,\"sequencer\":\"rl1:p0/2:9:pool\",\"permits\":2,\"slot\":0}");
        try (Session s = open()) {
            Grant g = s.acquire("pool", Mode.EXCLUSIVE, Duration.ofSeconds(5), "", 2);
            keepaliveExtra.set(",\"revoked\":[{\"name\":\"pool\",\"holder\":\"" + g.holder()
                    + "\",\"token\":9,\"kind\":\"admin\",\"reason\":\"slot stuck\"}]");
            g.lost().get(3, TimeUnit.SECONDS);
            LockRevokedException r = g.revoked().orElseThrow();
            assertEquals("admin", r.kind());
            assertEquals("slot stuck", r.reason());
        }
    }

    @Test
    void badPermitsAreRefusedBeforeSending() throws Exception {
        try (Session s = open()) {
            for (int p : new int[] {-1, 257}) {
                RaftlockException e = assertThrows(RaftlockException.class,
                        () -> s.acquire("pool", Mode.EXCLUSIVE, Duration.ZERO, "", p));
                assertEquals(RaftlockException.INVALID_ARGUMENT, e.code());
            }
            RaftlockException e = assertThrows(RaftlockException.class,
                    () -> s.acquire("pool", Mode.SHARED, Duration.ZERO, "", 2));
            assertEquals(RaftlockException.INVALID_ARGUMENT, e.code());
            assertFalse(acquires.size() > 0, "nothing sent");
        }
    }
}
