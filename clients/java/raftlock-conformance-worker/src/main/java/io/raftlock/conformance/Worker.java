package io.raftlock.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.raftlock.client.Durations;
import io.raftlock.client.Election;
import io.raftlock.client.Fence;
import io.raftlock.client.Grant;
import io.raftlock.client.MalformedSequencerException;
import io.raftlock.client.Mode;
import io.raftlock.client.RaftlockClient;
import io.raftlock.client.RaftlockException;
import io.raftlock.client.Session;
import io.raftlock.client.StaleSequencerException;
import io.raftlock.client.Watch;
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The Java client's worker for raftlock-conformance (docs/CONFORMANCE.md):
 * reads JSON-line requests, answers each on a thread of its own (a waiting
 * lock holds up nothing else), and writes the client's events (state
 * changes, lost locks, watch states, leaders) as they happen. Nothing it
 * writes holds a session id or a secret.
 */
public final class Worker {
    static final ObjectMapper JSON = new ObjectMapper();

    private final PrintStream out;
    private final ReentrantLock outMu = new ReentrantLock();
    private volatile RaftlockClient client;
    private final Map<String, Session> sessions = new ConcurrentHashMap<>();
    private final Map<String, Grant> locks = new ConcurrentHashMap<>();
    private final Map<String, Fence> fences = new ConcurrentHashMap<>();
    private final Map<String, Watch> streams = new ConcurrentHashMap<>();

    /** A worker writing to {@code out}. */
    public Worker(OutputStream out) {
        this.out = new PrintStream(out, false, StandardCharsets.UTF_8);
    }

    /** Runs the worker on stdin and stdout. */
    public static void main(String[] args) throws IOException {
        System.exit(new Worker(System.out).serve(System.in));
    }

    /** Serves requests from {@code in} until quit or end of input; the exit status. */
    public int serve(InputStream in) throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        String line;
        while ((line = r.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode m;
            try {
                m = JSON.readTree(line);
                if (m == null || !m.isObject()) {
                    throw new IOException("not a JSON object");
                }
            } catch (IOException e) {
                ObjectNode bad = JSON.createObjectNode();
                bad.put("ok", false).put("code", "invalid_argument").put("message", "bad request line: " + e.getMessage());
                send(bad);
                continue;
            }
            if (m.path("op").asText().equals("quit")) {
                closeAll();
                ObjectNode ok = JSON.createObjectNode();
                ok.set("id", m.get("id"));
                ok.put("ok", true);
                send(ok);
                return 0;
            }
            JsonNode req = m;
            Thread th = new Thread(() -> send(reply(req)), "worker-request");
            th.setDaemon(true);
            th.start();
        }
        closeAll();
        return 0;
    }

    void send(ObjectNode msg) {
        String s;
        try {
            s = JSON.writeValueAsString(msg);
        } catch (IOException e) {
            s = "{\"ok\":false,\"code\":\"internal\",\"message\":\"cannot encode a reply\"}";
        }
        outMu.lock();
        try {
            out.print(s + "\n");
            out.flush();
        } finally {
            outMu.unlock();
        }
    }

    private static double now() {
        Instant i = Instant.now();
        return i.getEpochSecond() + i.getNano() / 1e9;
    }

    private ObjectNode event(String kind) {
        ObjectNode e = JSON.createObjectNode();
        e.put("event", kind);
        return e;
    }

    /** The reply to one request (never throws). */
    ObjectNode reply(JsonNode m) {
        ObjectNode r = JSON.createObjectNode();
        r.set("id", m.get("id"));
        try {
            ObjectNode fields = handle(m);
            r.put("ok", true);
            if (fields != null) {
                r.setAll(fields);
            }
        } catch (RaftlockException e) {
            r.put("ok", false).put("code", e.code()).put("message", e.detail());
        } catch (IllegalArgumentException | NullPointerException e) {
            r.put("ok", false).put("code", "invalid_argument").put("message", "bad request: " + e.getMessage());
        } catch (InterruptedException e) {
            r.put("ok", false).put("code", "internal").put("message", "interrupted");
        } catch (Exception e) {
            r.put("ok", false).put("code", "internal").put("message", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        return r;
    }

    private static String str(JsonNode m, String field) {
        JsonNode v = m.get(field);
        if (v == null || !v.isTextual()) {
            throw new IllegalArgumentException("missing or non-string field \"" + field + "\"");
        }
        return v.asText();
    }

    private static Duration dur(JsonNode m, String field) {
        JsonNode v = m.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (!v.isNumber()) {
            throw new IllegalArgumentException("field \"" + field + "\" must be seconds (a number)");
        }
        return Durations.ofSeconds(v.asDouble());
    }

    private ObjectNode handle(JsonNode m) throws Exception {
        String op = m.path("op").asText("");
        switch (op) {
            case "hello": {
                ObjectNode o = JSON.createObjectNode();
                o.put("client", "java " + System.getProperty("java.version") + ": raftlock-client");
                return o;
            }
            case "connect":
                return connect(m);
            case "open":
                return open(m);
            case "lock":
                return lock(m);
            case "campaign":
                return campaign(m);
            case "unlock": {
                Grant g = locks.get(str(m, "lock"));
                if (g == null) {
                    throw new RaftlockException("invalid_argument", "no lock \"" + str(m, "lock") + "\"");
                }
                g.release();
                return null;
            }
            case "watch":
                return watch(m);
            case "observe":
                return observe(m);
            case "stop": {
                Watch w = streams.remove(str(m, "watch"));
                if (w != null) {
                    w.close();
                }
                return null;
            }
            case "close":
                session(str(m, "session")).close();
                return null;
            case "state": {
                ObjectNode o = JSON.createObjectNode();
                o.put("state", session(str(m, "session")).state().wire());
                return o;
            }
            case "fence_check":
                return fenceCheck(m);
            default:
                throw new RaftlockException("invalid_argument", "unknown op \"" + op + "\"");
        }
    }

    private RaftlockClient client() {
        RaftlockClient c = client;
        if (c == null) {
            throw new RaftlockException("invalid_argument", "connect first");
        }
        return c;
    }

    private ObjectNode connect(JsonNode m) throws Exception {
        List<String> eps = new ArrayList<>();
        for (JsonNode e : m.path("endpoints")) {
            eps.add(e.asText());
        }
        Duration timeout = dur(m, "request_timeout");
        RaftlockClient.Builder b = RaftlockClient.builder().endpoints(eps)
                .requestTimeout(timeout == null || timeout.isZero() ? RaftlockClient.DEFAULT_REQUEST_TIMEOUT : timeout);
        if (m.hasNonNull("ca")) {
            b.tls(tls(m.path("ca").asText(), m.path("cert").asText(""), m.path("key").asText("")));
        }
        if (m.hasNonNull("acl_token")) {
            b.token(m.path("acl_token").asText());
        }
        client = b.build();
        return null;
    }

    /** An SSLContext trusting the PEM CA, with the PEM client certificate and PKCS#8 key if given. */
    static SSLContext tls(String caFile, String certFile, String keyFile) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        try (InputStream in = new FileInputStream(caFile)) {
            int i = 0;
            for (Certificate c : cf.generateCertificates(in)) {
                trust.setCertificateEntry("ca" + i++, c);
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        KeyManagerFactory kmf = null;
        if (!certFile.isEmpty() && !keyFile.isEmpty()) {
            Collection<? extends Certificate> chain;
            try (InputStream in = new FileInputStream(certFile)) {
                chain = cf.generateCertificates(in);
            }
            PrivateKey key = pemKey(new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of(keyFile)), StandardCharsets.US_ASCII));
            KeyStore ks = KeyStore.getInstance("PKCS12");
            ks.load(null, null);
            ks.setKeyEntry("client", key, new char[0], chain.toArray(new Certificate[0]));
            kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, new char[0]);
        }
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return ctx;
    }

    private static PrivateKey pemKey(String pem) throws Exception {
        String begin = "-----BEGIN PRIVATE KEY-----";
        String end = "-----END PRIVATE KEY-----";
        if (!pem.contains(begin) || !pem.contains(end)) {
            throw new IllegalArgumentException("key: want a PKCS#8 PEM private key (BEGIN PRIVATE KEY)");
        }
        String b64 = pem.substring(pem.indexOf(begin) + begin.length(), pem.indexOf(end)).replaceAll("\\s", "");
        byte[] der = Base64.getDecoder().decode(b64);
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        for (String alg : new String[] {"EC", "RSA", "Ed25519"}) {
            try {
                return KeyFactory.getInstance(alg).generatePrivate(spec);
            } catch (Exception e) {
                // try the next algorithm
            }
        }
        throw new IllegalArgumentException("key: unsupported private key");
    }

    private ObjectNode open(JsonNode m) throws Exception {
        String ref = str(m, "session");
        RaftlockClient.SessionBuilder b = client().session()
                .ttl(dur(m, "ttl"))
                .lockDelay(dur(m, "lock_delay"))
                .name(m.path("name").asText(""))
                .onState(st -> {
                    ObjectNode e = event("state");
                    e.put("session", ref).put("state", st.wire()).put("at", now());
                    send(e);
                });
        Duration grace = dur(m, "grace");
        if (grace != null && !grace.isZero()) {
            b.grace(grace);
        }
        sessions.put(ref, b.open());
        return null;
    }

    private Session session(String ref) {
        Session s = sessions.get(ref);
        if (s == null) {
            throw new RaftlockException("invalid_argument", "no session \"" + ref + "\"");
        }
        return s;
    }

    private ObjectNode granted(String ref, Grant g) {
        g.onLost(() -> {
            ObjectNode e = event("lost");
            e.put("lock", ref).put("at", now());
            g.revoked().ifPresent(r -> e.put("kind", r.kind()).put("reason", r.reason()));
            send(e);
        });
        g.onReleaseRequested(r -> {
            ObjectNode e = event("release_requested");
            e.put("lock", ref).put("by_holder", r.byHolder()).put("at", now());
            send(e);
        });
        locks.put(ref, g);
        ObjectNode o = JSON.createObjectNode();
        o.put("sequencer", g.sequencer().toString()).put("token", g.token()).put("holder", g.holder());
        if (g.permits() > 0) {
            o.put("permits", g.permits()).put("slot", g.slot());
        }
        return o;
    }

    private ObjectNode lock(JsonNode m) throws Exception {
        Session s = session(str(m, "session"));
        Mode mode = Mode.ofWire(m.path("mode").asText(""));
        Duration wait = dur(m, "wait");
        Grant g = s.acquire(str(m, "name"), mode, wait == null ? Duration.ZERO : wait, m.path("value").asText(""),
                m.path("permits").asInt(0));
        return granted(str(m, "lock"), g);
    }

    private ObjectNode campaign(JsonNode m) throws Exception {
        Session s = session(str(m, "session"));
        Election e = s.election(str(m, "name"));
        Duration wait = dur(m, "wait");
        Grant g = e.campaign(m.path("value").asText(""), wait == null || wait.isZero() ? null : wait);
        return granted(str(m, "lock"), g);
    }

    private ObjectNode watch(JsonNode m) {
        String ref = str(m, "watch");
        Watch w = client().watch(str(m, "name"), Duration.ofSeconds(2), st -> {
            ObjectNode e = event("lock_state");
            e.put("watch", ref);
            var hs = e.putArray("holders");
            for (JsonNode h : st.path("holders")) {
                hs.add(h.path("token").asLong());
            }
            e.put("at", now());
            send(e);
        });
        streams.put(ref, w);
        return null;
    }

    private ObjectNode observe(JsonNode m) {
        String ref = str(m, "watch");
        Watch w = client().observe(str(m, "name"), ld -> {
            ObjectNode e = event("leader");
            e.put("watch", ref).put("value", ld.value()).put("token", ld.token())
                    .put("sequencer", ld.sequencer().toString()).put("at", now());
            send(e);
        });
        streams.put(ref, w);
        return null;
    }

    private ObjectNode fenceCheck(JsonNode m) {
        Fence f = fences.computeIfAbsent(str(m, "fence"), k -> new Fence());
        ObjectNode o = JSON.createObjectNode();
        try {
            f.check(m.path("sequencer").asText(""));
            o.put("verdict", "admit");
        } catch (StaleSequencerException e) {
            o.put("verdict", "stale");
        } catch (MalformedSequencerException e) {
            o.put("verdict", "malformed");
        }
        return o;
    }

    private void closeAll() {
        for (Watch w : streams.values()) {
            w.close();
        }
        streams.clear();
        for (Session s : sessions.values()) {
            try {
                s.close();
            } catch (RaftlockException e) {
                // closing is best effort at exit
            }
        }
        sessions.clear();
    }
}
