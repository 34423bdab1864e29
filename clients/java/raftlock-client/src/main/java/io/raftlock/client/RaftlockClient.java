package io.raftlock.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import javax.net.ssl.SSLContext;

/**
 * A client of a raftlock cluster: opens sessions, reads and watches locks,
 * observes elections. Make one with {@link #builder()}:
 *
 * <pre>{@code
 * RaftlockClient client = RaftlockClient.builder().endpoints("127.0.0.1:7001").build();
 * try (Session s = client.session().ttl(Duration.ofSeconds(10)).open()) {
 *     FencedLock lock = s.lock("jobs/nightly");
 *     lock.lock();
 *     try { write(lock.sequencer()); } finally { lock.unlock(); }
 * }
 * }</pre>
 *
 * Safe for concurrent use; it holds no thread of its own.
 */
public final class RaftlockClient {
    /** How long one HTTP request may take, by default. */
    public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(10);

    private final Transport t;

    private RaftlockClient(Transport t) {
        this.t = t;
    }

    /** A new builder. */
    public static Builder builder() {
        return new Builder();
    }

    @Override
    public String toString() {
        return "RaftlockClient(" + t + ")";
    }

    /** Builds a {@link RaftlockClient}. */
    public static final class Builder {
        private final List<String> endpoints = new ArrayList<>();
        private SSLContext tls;
        private String token;
        private Duration requestTimeout = DEFAULT_REQUEST_TIMEOUT;

        private Builder() {
        }

        /** The nodes' HTTP addresses: "host:port", "http://host:port" or "https://host:port". */
        public Builder endpoints(String... eps) {
            endpoints.addAll(Arrays.asList(eps));
            return this;
        }

        /** The nodes' HTTP addresses. */
        public Builder endpoints(List<String> eps) {
            endpoints.addAll(eps);
            return this;
        }

        /** TLS for every endpoint (with a client certificate, for --client-cert-auth). */
        public Builder tls(SSLContext ctx) {
            tls = ctx;
            return this;
        }

        /** An ACL secret, sent as a bearer token; never logged nor put in an exception. */
        public Builder token(String secret) {
            token = secret;
            return this;
        }

        /** How long one HTTP request may take (the per-attempt deadline). */
        public Builder requestTimeout(Duration d) {
            requestTimeout = d;
            return this;
        }

        /** The client; IllegalArgumentException for no endpoints or a malformed one. */
        public RaftlockClient build() {
            return new RaftlockClient(new Transport(endpoints, tls, token, requestTimeout));
        }
    }

    /** Options of a session to open; {@link #open()} opens it. */
    public final class SessionBuilder {
        private Duration ttl;
        private Duration lockDelay;
        private Duration grace = Session.DEFAULT_GRACE;
        private String name = "";
        private Consumer<SessionState> listener;
        private Duration timeout = Duration.ofSeconds(30);

        private SessionBuilder() {
        }

        /** The lease (1 s – 5 min; unset: the cluster's default, 15 s). */
        public SessionBuilder ttl(Duration d) {
            ttl = d;
            return this;
        }

        /** How long an expired session's locks stay unavailable (unset: 10 s; zero: none). */
        public SessionBuilder lockDelay(Duration d) {
            lockDelay = d;
            return this;
        }

        /** How long jeopardy may last before the client declares the session expired. */
        public SessionBuilder grace(Duration d) {
            grace = d;
            return this;
        }

        /** The session's public name. */
        public SessionBuilder name(String n) {
            name = n;
            return this;
        }

        /** Called with each new state, from the session's event thread. */
        public SessionBuilder onState(Consumer<SessionState> l) {
            listener = l;
            return this;
        }

        /** How long opening may take. */
        public SessionBuilder timeout(Duration d) {
            timeout = d;
            return this;
        }

        /** Opens the session on the cluster. */
        public Session open() throws InterruptedException {
            return Session.open(t, name, ttl, lockDelay, grace, listener, timeout);
        }
    }

    /** Options of a new session. */
    public SessionBuilder session() {
        return new SessionBuilder();
    }

    /** The lock's state as the leader sees it (the JSON of GET /v1/lock). */
    public JsonNode lockState(String name) throws InterruptedException {
        return t.call("GET", "/v1/lock?name=" + Transport.query(name), null,
                new Transport.Call().idempotent().deadline(System.nanoTime() + Duration.ofSeconds(30).toNanos()));
    }

    /** Watches lock {@code name}: its state first, then each change (blocking queries of {@code wait} each). */
    public Watch watch(String name, Duration wait, Consumer<JsonNode> listener) {
        return Watch.lock(t, name, wait, listener);
    }

    /** Reports the leaders of election {@code name} in grant order, each once. */
    public Watch observe(String name, Consumer<Leader> listener) {
        return Watch.leaders(t, name, Duration.ofSeconds(10), listener);
    }
}
