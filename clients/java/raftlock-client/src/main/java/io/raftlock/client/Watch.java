package io.raftlock.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A watch of one lock from blocking queries (nothing polls): the listener
 * gets its current state (GET /v1/lock's JSON) first, then each change, on
 * the watch's own daemon thread; a slow listener skips intermediate states.
 * Failures are retried a second later. {@link #close()} stops it.
 */
public final class Watch implements AutoCloseable {
    private volatile boolean stopped;
    private final Thread thread;

    private Watch(Runnable body) {
        thread = new Thread(body, "raftlock-watch");
        thread.setDaemon(true);
    }

    static Watch lock(Transport t, String name, Duration wait, Consumer<JsonNode> listener) {
        check(name);
        Watch[] self = new Watch[1];
        self[0] = new Watch(() -> self[0].run(t, name, wait, listener));
        self[0].thread.start();
        return self[0];
    }

    static Watch leaders(Transport t, String name, Duration wait, Consumer<Leader> listener) {
        check(name);
        long[] known = {0};
        boolean[] started = {false};
        boolean[] gap = {false};
        return lock(t, name, wait, st -> {
            List<Leader> next = new ArrayList<>();
            if (!started[0]) {
                started[0] = true;
                Leader l = leaderOf(st, false);
                if (l != null) {
                    next.add(l);
                }
            } else {
                long since = st.path("grants_since").asLong(0);
                if (since == 0) {
                    Leader l = leaderOf(st, false);
                    if (l != null && l.token() > known[0]) {
                        next.add(l);
                    }
                } else {
                    for (JsonNode g : st.path("grants")) {
                        if (g.path("mode").asText().equals("exclusive") && g.path("token").asLong() > known[0]) {
                            next.add(new Leader(st.path("name").asText(name), g.path("value").asText(""),
                                    g.path("token").asLong(), g.path("session_name").asText(""), false));
                        }
                    }
                    next.sort(Comparator.comparingLong(Leader::token));
                    gap[0] = gap[0] || since > known[0] + 1;
                }
            }
            for (Leader l : next) {
                Leader out = new Leader(l.election(), l.value(), l.token(), l.sessionName(), gap[0]);
                gap[0] = false;
                known[0] = Math.max(known[0], l.token());
                listener.accept(out);
            }
            known[0] = Math.max(known[0], st.path("index").asLong(0));
        });
    }

    private static void check(String name) {
        try {
            Sequencer.checkName(name);
        } catch (MalformedSequencerException e) {
            throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, e.getMessage());
        }
    }

    private static Leader leaderOf(JsonNode st, boolean gap) {
        JsonNode holders = st.path("holders");
        if (!st.path("mode").asText().equals("exclusive") || holders.size() != 1) {
            return null;
        }
        JsonNode h = holders.get(0);
        return new Leader(st.path("name").asText(""), h.path("value").asText(""), h.path("token").asLong(),
                h.path("session_name").asText(""), gap);
    }

    private void run(Transport t, String name, Duration wait, Consumer<JsonNode> listener) {
        long index = 0;
        JsonNode last = null;
        while (!stopped) {
            String path = "/v1/lock?name=" + Transport.query(name);
            if (index > 0) {
                path += "&index=" + index + "&wait=" + Durations.toWire(wait);
            }
            JsonNode st;
            try {
                st = t.call("GET", path, null, new Transport.Call().idempotent()
                        .deadline(System.nanoTime() + wait.toNanos() + TimeUnit.SECONDS.toNanos(5))
                        .attempt(wait.plusSeconds(2)));
            } catch (RaftlockException e) {
                if (e.code().equals(RaftlockException.INVALID_ARGUMENT)) {
                    return;
                }
                try {
                    Transport.sleepNanos(TimeUnit.SECONDS.toNanos(1), true);
                } catch (InterruptedException ie) {
                    return;
                }
                continue;
            } catch (InterruptedException e) {
                return;
            }
            index = Math.max(index, st.path("index").asLong(0));
            JsonNode same = st.deepCopy();
            ((com.fasterxml.jackson.databind.node.ObjectNode) same).remove("index");
            if (!same.equals(last) && !stopped) {
                last = same;
                try {
                    listener.accept(st);
                } catch (RuntimeException e) {
                    // the listener's bug must not stop the watch
                }
            }
        }
    }

    /** Stops the watch (its thread ends at once; no listener call after this returns, but one under way). */
    @Override
    public void close() {
        stopped = true;
        thread.interrupt();
    }
}
