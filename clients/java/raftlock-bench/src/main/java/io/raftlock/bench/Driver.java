package io.raftlock.bench;

import io.raftlock.client.FencedLock;
import io.raftlock.client.RaftlockClient;
import io.raftlock.client.RaftlockException;
import io.raftlock.client.Session;
import io.raftlock.client.SessionState;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * raftlock-bench's driver for the Java client (cmd/raftlock-bench/README.md,
 * "Other clients"): runs a scenario's clients through the client's public API
 * (RaftlockClient, Session, FencedLock), one platform thread per client, and
 * speaks the driver protocol: work as flags, one JSON object per line on
 * stdout, one command per line on stdin.
 *
 * <ul>
 * <li>{@code --mode pairs}: {@code --clients N} sessions, each looping
 * {@code lock(); unlock()} on its own lock (NAME/i; {@code --shared}: all on
 * NAME); prints {"event":"ready"}, counts from "measure" until "stop", then
 * prints {"event":"result","pairs","errors","lat_us"}.</li>
 * <li>{@code --mode sessions}: {@code --sessions S} sessions opened
 * ({@code --workers} at a time, at most {@code --open-rate} a second, spread
 * evenly), each kept alive by its own Session; "hold N":
 * the first N take a lock each; "stats": the sessions seen expired and the
 * times one entered jeopardy.</li>
 * </ul>
 * End of stdin: every session is closed and the driver exits.
 */
public final class Driver {
    private Driver() {
    }

    private static final Object OUT = new Object();

    private static void say(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    /** A Go duration as time.Duration.String() prints it (1m30s, 15s, 500ms). */
    static Duration goDuration(String s) {
        Matcher m = Pattern.compile("([0-9.]+)(h|ms|us|µs|ns|m|s)").matcher(s);
        double nanos = 0;
        int end = 0;
        while (m.find()) {
            if (m.start() != end) {
                throw new IllegalArgumentException("duration " + s);
            }
            end = m.end();
            double v = Double.parseDouble(m.group(1));
            nanos += v * switch (m.group(2)) {
                case "h" -> 3600e9;
                case "m" -> 60e9;
                case "s" -> 1e9;
                case "ms" -> 1e6;
                case "us", "µs" -> 1e3;
                default -> 1;
            };
        }
        if (end != s.length() || s.isEmpty()) {
            throw new IllegalArgumentException("duration " + s);
        }
        return Duration.ofNanos((long) nanos);
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i].replaceFirst("^--", "");
            if (k.equals("shared")) {
                a.put(k, "true");
            } else {
                a.put(k, argv[++i]);
            }
        }
        RaftlockClient client = RaftlockClient.builder().endpoints(a.get("addr").split(",")).build();
        Duration ttl = goDuration(a.getOrDefault("ttl", "15s"));
        String lock = a.getOrDefault("lock", "bench");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (a.getOrDefault("mode", "pairs").equals("pairs")) {
            pairs(client, ttl, lock, Integer.parseInt(a.getOrDefault("clients", "1")), a.containsKey("shared"), in);
        } else {
            sessions(client, ttl, lock, Integer.parseInt(a.getOrDefault("sessions", "1000")),
                    Integer.parseInt(a.getOrDefault("workers", "64")),
                    Double.parseDouble(a.getOrDefault("open-rate", "0")), in);
        }
        System.exit(0);
    }

    private static Session open(RaftlockClient client, Duration ttl, String name, java.util.function.Consumer<SessionState> l)
            throws InterruptedException {
        var b = client.session().ttl(ttl).lockDelay(Duration.ZERO).name(name);
        if (l != null) {
            b.onState(l);
        }
        return b.open();
    }

    private static void pairs(RaftlockClient client, Duration ttl, String lock, int n, boolean shared, BufferedReader in)
            throws Exception {
        Session[] sessions = new Session[n];
        ExecutorService ex = Executors.newFixedThreadPool(16);
        List<Future<Session>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int id = i;
            fs.add(ex.submit(() -> open(client, ttl, "bench-java-" + id, null)));
        }
        for (int i = 0; i < n; i++) {
            sessions[i] = fs.get(i).get();
        }
        ex.shutdown();
        var measuring = new java.util.concurrent.atomic.AtomicBoolean();
        var stop = new java.util.concurrent.atomic.AtomicBoolean();
        long[] pairs = new long[n];
        long[] errors = new long[n];
        long[][] lat = new long[n][];
        int[] nlat = new int[n];
        String[] lastError = {""};
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            int id = i;
            lat[i] = new long[1024];
            String name = shared ? lock : lock + "/" + i;
            ts[i] = new Thread(() -> {
                while (!stop.get()) {
                    long t0 = System.nanoTime();
                    try {
                        FencedLock l = sessions[id].lock(name);
                        l.lock();
                        l.unlock();
                    } catch (RaftlockException e) {
                        if (stop.get()) {
                            return;
                        }
                        lastError[0] = e.code() + ": " + e.getMessage();
                        if (measuring.get()) {
                            errors[id]++;
                        }
                        if (sessions[id].state() == SessionState.EXPIRED) {
                            try {
                                sessions[id] = open(client, ttl, "bench-java-" + id, null);
                            } catch (RuntimeException | InterruptedException e2) {
                                // retried by the next pair
                            }
                        }
                        try {
                            Thread.sleep(20);
                        } catch (InterruptedException e2) {
                            return;
                        }
                        continue;
                    }
                    if (measuring.get()) {
                        if (nlat[id] == lat[id].length) {
                            lat[id] = java.util.Arrays.copyOf(lat[id], 2 * nlat[id]);
                        }
                        lat[id][nlat[id]++] = (System.nanoTime() - t0) / 1000;
                        pairs[id]++;
                    }
                }
            }, "bench-" + i);
            ts[i].setDaemon(true);
            ts[i].start();
        }
        say("{\"event\":\"ready\"}");
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "measure" -> measuring.set(true);
                case "stop" -> {
                    stop.set(true);
                    for (Thread t : ts) {
                        t.join();
                    }
                    long p = 0, e = 0;
                    StringBuilder sb = new StringBuilder("[");
                    for (int i = 0; i < n; i++) {
                        p += pairs[i];
                        e += errors[i];
                        for (int j = 0; j < nlat[i]; j++) {
                            if (sb.length() > 1) {
                                sb.append(',');
                            }
                            sb.append(lat[i][j]);
                        }
                    }
                    sb.append(']');
                    say("{\"event\":\"result\",\"pairs\":" + p + ",\"errors\":" + e + ",\"lat_us\":" + sb
                            + ",\"last_error\":" + quote(lastError[0]) + "}");
                }
                default -> {
                }
            }
        }
        stop.set(true);
        closeAll(sessions, 16);
    }

    private static void sessions(RaftlockClient client, Duration ttl, String lock, int n, int workers, double openRate,
            BufferedReader in) throws Exception {
        AtomicLong expired = new AtomicLong();
        AtomicLong jeopardy = new AtomicLong();
        AtomicLong openErrors = new AtomicLong();
        java.util.function.Consumer<SessionState> l = st -> {
            if (st == SessionState.EXPIRED) {
                expired.incrementAndGet();
            } else if (st == SessionState.JEOPARDY) {
                jeopardy.incrementAndGet();
            }
        };
        Session[] sessions = new Session[n];
        long[] lat = new long[n];
        ExecutorService ex = Executors.newFixedThreadPool(workers);
        List<Future<?>> fs = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            int id = i;
            fs.add(ex.submit(() -> {
                if (openRate > 0) { // session id opens no earlier than id/rate s in
                    long wait = start + (long) (id * 1e9 / openRate) - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                }
                while (true) {
                    long t0 = System.nanoTime();
                    try {
                        sessions[id] = open(client, ttl, "keep-java-" + id, l);
                        lat[id] = (System.nanoTime() - t0) / 1000;
                        return null;
                    } catch (RaftlockException e) {
                        openErrors.incrementAndGet();
                        Thread.sleep(50);
                    }
                }
            }));
        }
        for (Future<?> f : fs) {
            f.get();
        }
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < n; i++) {
            sb.append(i > 0 ? "," : "").append(lat[i]);
        }
        say("{\"event\":\"ready\",\"lat_us\":" + sb + "],\"errors\":" + openErrors.get() + "}");
        List<FencedLock> held = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("hold")) {
                int h = Integer.parseInt(cmd[1]);
                fs.clear();
                for (int i = 0; i < h; i++) {
                    int id = i;
                    fs.add(ex.submit(() -> {
                        FencedLock fl = sessions[id].lock(lock + "/" + id);
                        if (!fl.tryLock()) {
                            throw new IllegalStateException("lock " + lock + "/" + id + " busy");
                        }
                        synchronized (held) {
                            held.add(fl);
                        }
                        return null;
                    }));
                }
                for (Future<?> f : fs) {
                    f.get();
                }
                say("{\"event\":\"held\"}");
            } else if (cmd[0].equals("stats")) {
                say("{\"event\":\"stats\",\"expired\":" + expired.get() + ",\"jeopardy\":" + jeopardy.get() + "}");
            }
        }
        ex.shutdown();
        closeAll(sessions, workers);
    }

    private static void closeAll(Session[] sessions, int workers) throws InterruptedException {
        ExecutorService ex = Executors.newFixedThreadPool(workers);
        for (Session s : sessions) {
            ex.submit(() -> {
                s.close();
                return null;
            });
        }
        ex.shutdown();
        ex.awaitTermination(5, java.util.concurrent.TimeUnit.MINUTES);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
