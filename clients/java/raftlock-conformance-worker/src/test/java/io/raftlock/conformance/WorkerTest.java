package io.raftlock.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The worker's line protocol, without a cluster. */
class WorkerTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Runs the worker on {@code lines} (then quit) and returns its replies by id, and the lines without one. */
    private static Map<Integer, JsonNode> run(List<String> noId, String... lines) throws Exception {
        StringBuilder in = new StringBuilder();
        for (String l : lines) {
            in.append(l).append('\n');
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Worker w = new Worker(out);
        // Each request is served on a thread of its own: send quit only once every reply is in.
        int want = lines.length;
        ByteArrayInputStream req = new ByteArrayInputStream(in.toString().getBytes(StandardCharsets.UTF_8));
        Thread serving = new Thread(() -> {
            try {
                w.serve(req);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        serving.start();
        serving.join();
        Map<Integer, JsonNode> byId = new HashMap<>();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            byId.clear();
            noId.clear();
            for (String l : out.toString(StandardCharsets.UTF_8).split("\n")) {
                if (l.isEmpty()) {
                    continue;
                }
                JsonNode m = JSON.readTree(l);
                if (m.has("id")) {
                    byId.put(m.get("id").asInt(), m);
                } else {
                    noId.add(l);
                }
            }
            if (byId.size() + noId.size() >= want || System.nanoTime() > deadline) {
                return byId;
            }
            Thread.onSpinWait();
        }
    }

    @Test
    void everyRequestIsAnsweredWithItsId() throws Exception {
        List<String> other = new ArrayList<>();
        Map<Integer, JsonNode> r = run(other,
                "{\"id\":1,\"op\":\"hello\"}",
                "{\"id\":2,\"op\":\"fence_check\",\"fence\":\"f\",\"sequencer\":\"rl1:x:5:a\"}",
                "{\"id\":3,\"op\":\"fence_check\",\"fence\":\"f\",\"sequencer\":\"rl1:x:4:a\"}",
                "{\"id\":4,\"op\":\"fence_check\",\"fence\":\"g\",\"sequencer\":\"rl1:q:4:a\"}");
        assertTrue(r.get(1).path("ok").asBoolean());
        assertTrue(r.get(1).path("client").asText().startsWith("java "));
        assertEquals("malformed", r.get(4).path("verdict").asText());
        // 2 and 3 may be served in either order; one fence sees both.
        String v2 = r.get(2).path("verdict").asText();
        String v3 = r.get(3).path("verdict").asText();
        assertTrue(v2.equals("admit") && (v3.equals("stale") || v3.equals("admit")), v2 + " " + v3);
    }

    @Test
    void unknownOpsAndBadRequestsAreInvalidArgument() throws Exception {
        List<String> other = new ArrayList<>();
        Map<Integer, JsonNode> r = run(other,
                "{\"id\":1,\"op\":\"frobnicate\"}",
                "{\"id\":2,\"op\":\"open\",\"session\":\"s\",\"ttl\":1}",
                "{\"id\":3,\"op\":\"lock\",\"session\":\"nope\",\"lock\":\"l\",\"name\":\"a\"}",
                "not json");
        for (int id = 1; id <= 3; id++) {
            assertFalse(r.get(id).path("ok").asBoolean());
            assertEquals("invalid_argument", r.get(id).path("code").asText(), r.get(id).toString());
        }
        assertEquals(1, other.size());
        assertTrue(other.get(0).contains("invalid_argument"));
    }

    @Test
    void quitIsAnsweredAndEndsTheWorker() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int rc = new Worker(out).serve(new ByteArrayInputStream(
                "{\"id\":9,\"op\":\"quit\"}\n{\"id\":10,\"op\":\"hello\"}\n".getBytes(StandardCharsets.UTF_8)));
        assertEquals(0, rc);
        assertEquals("{\"id\":9,\"ok\":true}\n", out.toString(StandardCharsets.UTF_8));
    }
}
