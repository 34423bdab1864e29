package io.raftlock.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;

/**
 * Sends API requests to the cluster, retrying what fails transiently. Each
 * attempt is bounded by the request timeout and by the call's own deadline.
 * A request is retried on another node after a connection failure or
 * {@code no_leader}; after a failure that may have applied it (a timeout or
 * reset after sending, {@code unknown_outcome}) only when it is idempotent (an
 * acquire with a holder id, a release, a keepalive). Answers name the leader
 * ({@code X-Raftlock-Leader-Addr}); the next call goes there if it is one of
 * the endpoints given. Requests go over kept-alive HTTP/1.1 connections, a
 * pool per endpoint ({@link Http1}), not {@code java.net.http.HttpClient}: its
 * asynchronous pipeline cost ~500 µs of CPU per lock/unlock pair, against
 * ~70 µs here (docs/RUNS.md, issue 34).
 */
final class Transport {
    static final String LEADER_ADDR_HEADER = "X-Raftlock-Leader-Addr";
    static final ObjectMapper JSON = new ObjectMapper();
    private static final long MIN_BACKOFF = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long MAX_BACKOFF = TimeUnit.SECONDS.toNanos(1);

    private record Endpoint(String hostport, boolean tls) {
        String host() {
            String h = hostport.substring(0, hostport.lastIndexOf(':'));
            return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
        }

        int port() {
            return Integer.parseInt(hostport.substring(hostport.lastIndexOf(':') + 1));
        }

        @Override
        public String toString() {
            return (tls ? "https://" : "http://") + hostport;
        }
    }

    private final List<Endpoint> eps = new ArrayList<>();
    private final Http1 http1;
    // The fixed header lines of every request (the token a secret: never
    // logged, never in an exception or toString).
    private final String headers;
    final Duration requestTimeout;
    private final ReentrantLock mu = new ReentrantLock();
    private int cur;

    Transport(List<String> endpoints, SSLContext tls, String token, Duration requestTimeout) {
        if (endpoints == null || endpoints.isEmpty()) {
            throw new IllegalArgumentException("no endpoints");
        }
        for (String e : endpoints) {
            String scheme = "";
            String rest = e;
            int i = e.indexOf("://");
            if (i >= 0) {
                scheme = e.substring(0, i);
                rest = e.substring(i + 3);
            }
            if (!scheme.isEmpty() && !scheme.equals("http") && !scheme.equals("https")) {
                throw new IllegalArgumentException("endpoint \"" + e + "\": scheme must be http or https");
            }
            int colon = rest.lastIndexOf(':');
            if (colon <= 0 || !rest.substring(colon + 1).matches("[0-9]+")) {
                throw new IllegalArgumentException("endpoint \"" + e + "\": want host:port");
            }
            eps.add(new Endpoint(rest, scheme.equals("https") || tls != null));
        }
        this.requestTimeout = requestTimeout;
        this.http1 = new Http1(tls);
        this.headers = "Accept: application/json\r\n"
                + (token != null && !token.isEmpty() ? "Authorization: Bearer " + token + "\r\n" : "");
    }

    @Override
    public String toString() {
        return "Transport" + eps;
    }

    private Endpoint pick() {
        mu.lock();
        try {
            return eps.get(cur % eps.size());
        } finally {
            mu.unlock();
        }
    }

    private void follow(String leader) {
        if (leader == null || leader.isEmpty()) {
            return;
        }
        mu.lock();
        try {
            for (int i = 0; i < eps.size(); i++) {
                Endpoint e = eps.get(i);
                if (e.hostport.equals(leader) || e.toString().equals(leader)) {
                    cur = i;
                    return;
                }
            }
        } finally {
            mu.unlock();
        }
    }

    private void rotate(Endpoint failed) {
        mu.lock();
        try {
            if (eps.get(cur % eps.size()) == failed) {
                cur = (cur + 1) % eps.size();
            }
        } finally {
            mu.unlock();
        }
    }

    /** The options of one call. */
    static final class Call {
        long deadline; // System.nanoTime(); 0: none
        boolean idempotent;
        Duration attemptTimeout; // null: the request timeout
        boolean interruptible = true;

        Call deadline(long d) {
            deadline = d;
            return this;
        }

        Call idempotent() {
            idempotent = true;
            return this;
        }

        Call attempt(Duration d) {
            attemptTimeout = d;
            return this;
        }

        Call uninterruptible() {
            interruptible = false;
            return this;
        }
    }

    /**
     * Runs one API call until it has an answer or the deadline passes; returns
     * the JSON answer or throws the RaftlockException of its code.
     */
    JsonNode call(String method, String path, ObjectNode body, Call c) throws InterruptedException {
        boolean[] interrupted = {false};
        try {
            return call(method, path, body, c, interrupted);
        } finally {
            if (interrupted[0]) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private JsonNode call(String method, String path, ObjectNode body, Call c, boolean[] interruptedBox) throws InterruptedException {
        long backoff = MIN_BACKOFF;
        RaftlockException last = null;
        boolean uncertain = false;
        byte[] data = null;
        if (body != null) {
            try {
                data = JSON.writeValueAsBytes(body);
            } catch (IOException e) {
                throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, "cannot encode the request: " + e.getMessage());
            }
        }
        while (true) {
            long now = System.nanoTime();
            long per = (c.attemptTimeout != null ? c.attemptTimeout : requestTimeout).toNanos();
            if (c.deadline != 0) {
                if (now - c.deadline >= 0) {
                    if (uncertain) {
                        throw new RaftlockException(RaftlockException.UNKNOWN_OUTCOME,
                                method + " " + publicPath(path) + ": gave up; it may have been applied (" + last.getMessage() + ")");
                    }
                    throw last != null ? last
                            : new RaftlockException(RaftlockException.UNREACHABLE, method + " " + publicPath(path) + ": no node answered in time");
                }
                per = Math.min(per, c.deadline - now);
            }
            Endpoint ep = pick();
            Http1.Answer resp = null;
            boolean wasInterrupted = Thread.currentThread().isInterrupted();
            if (wasInterrupted && c.interruptible) {
                Thread.interrupted();
                throw new InterruptedException();
            }
            if (wasInterrupted) {
                Thread.interrupted(); // uninterruptible: set again when the call ends
                interruptedBox[0] = true;
            }
            try {
                resp = http1.exchange(ep.host(), ep.port(), ep.tls, method, path, headers, data, Math.max(per, 1_000_000));
            } catch (IOException e) {
                if (Thread.interrupted()) {
                    // The interrupt closed the channel (ClosedByInterruptException).
                    if (c.interruptible) {
                        throw new InterruptedException();
                    }
                    interruptedBox[0] = true;
                }
                rotate(ep);
                if (e instanceof Http1.NotSentException) {
                    last = new RaftlockException(RaftlockException.UNREACHABLE,
                            method + " " + publicPath(path) + ": no answer at " + ep + " (" + e.getMessage() + ")");
                } else {
                    last = new RaftlockException(RaftlockException.UNKNOWN_OUTCOME,
                            method + " " + publicPath(path) + " via " + ep + ": " + why(e));
                    if (!c.idempotent) {
                        throw last;
                    }
                    uncertain = true;
                }
            }
            if (resp != null) {
                follow(resp.headers().get(LEADER_ADDR_HEADER.toLowerCase(java.util.Locale.ROOT)));
                JsonNode answer;
                try {
                    byte[] raw = resp.body();
                    answer = raw == null || raw.length == 0 ? JSON.createObjectNode() : JSON.readTree(raw);
                } catch (IOException e) {
                    answer = null;
                }
                int status = resp.status();
                if (status >= 200 && status < 300 && answer != null) {
                    return answer;
                }
                RaftlockException err = errorOf(status, answer);
                if (err.code().equals(RaftlockException.UNKNOWN_OUTCOME) && c.idempotent) {
                    uncertain = true;
                    last = err;
                } else if (err.code().equals(RaftlockException.NO_LEADER)) {
                    rotate(ep);
                    last = err;
                } else {
                    throw err;
                }
            }
            long sleep = backoff;
            if (c.deadline != 0) {
                sleep = Math.max(0, Math.min(sleep, c.deadline - System.nanoTime()));
            }
            sleep = (long) (sleep * ThreadLocalRandom.current().nextDouble(0.5, 1.0));
            sleepNanos(sleep, c.interruptible);
            backoff = Math.min(2 * backoff, MAX_BACKOFF);
        }
    }

    static void sleepNanos(long nanos, boolean interruptible) throws InterruptedException {
        long end = System.nanoTime() + nanos;
        boolean interrupted = false;
        try {
            while (true) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                try {
                    TimeUnit.NANOSECONDS.sleep(left);
                } catch (InterruptedException e) {
                    if (interruptible) {
                        throw e;
                    }
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static String why(Throwable e) {
        if (e == null) {
            return "failed";
        }
        if (e instanceof TimeoutException || e instanceof java.net.SocketTimeoutException) {
            return "timed out";
        }
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : " (" + m + ")");
    }

    private static RaftlockException errorOf(int status, JsonNode answer) {
        JsonNode e = answer == null ? null : answer.get("error");
        if (e != null && e.isObject()) {
            return new RaftlockException(e.path("code").asText(RaftlockException.INTERNAL), e.path("message").asText(""));
        }
        if (status == 502 || status == 503 || status == 504) {
            return new RaftlockException(RaftlockException.NO_LEADER, "HTTP " + status);
        }
        return new RaftlockException(RaftlockException.INTERNAL, "HTTP " + status + (answer == null ? ": an answer that is not JSON" : ""));
    }

    /** The path with a session id (a secret) left out. */
    static String publicPath(String path) {
        String p = "/v1/sessions/";
        if (path.startsWith(p)) {
            String rest = path.substring(p.length());
            int i = rest.indexOf('/');
            return "/v1/sessions/*" + (i >= 0 ? rest.substring(i) : "");
        }
        return path;
    }

    /** The path of a session's route. */
    static String sessionPath(String sessionId, String suffix) {
        return "/v1/sessions/" + URLEncoder.encode(sessionId, StandardCharsets.UTF_8) + suffix;
    }

    static String query(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }
}
