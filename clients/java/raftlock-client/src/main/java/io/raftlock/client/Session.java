package io.raftlock.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * A session: a lease kept alive by keepalives from a daemon thread of its own
 * (every ttl/3 while safe, every ttl/10 in jeopardy). It tracks safe → jeopardy
 * → safe or expired, counting the lease from the <em>send</em> time of the last
 * acknowledged keepalive; its grants are lost {@link #lostAfter} after that
 * send time, before the cluster could grant them to anyone else
 * (docs/DESIGN.md, "The client's promise"). Close it (try-with-resources) to
 * end it: its locks are released at once, without lock-delay. Safe for
 * concurrent use; no blocking call runs under a monitor (virtual threads do
 * not pin).
 */
public final class Session implements AutoCloseable {
    /** How long jeopardy may last before the client declares the session expired, by default. */
    public static final Duration DEFAULT_GRACE = Duration.ofSeconds(15);
    /** The longest one waiting acquire request runs before it is re-issued (keeping its place). */
    public static final Duration LOCK_POLL_SLICE = Duration.ofSeconds(10);
    private static final long LOST_LATENCY = TimeUnit.MILLISECONDS.toNanos(100);
    static final long MIN_RETRY = TimeUnit.MILLISECONDS.toNanos(100);

    final Transport t;
    private final String id; // a secret: never logged, never in toString or an exception
    private final String name;
    private final long lockDelay;
    private final long grace;
    private volatile long ttl;

    private final ReentrantLock mu = new ReentrantLock();
    private final Condition cv = mu.newCondition();
    private SessionState state = SessionState.SAFE;
    private long ackedSent; // send time of the last acknowledged request (nanoTime)
    private long lastSend; // send time of the last keepalive
    private boolean lapsed; // past the lost deadline: the grants are lost
    private boolean stop;
    private final Set<Grant> grants = new LinkedHashSet<>();
    // The grants the last keepalive answer named as revoked: a grant whose
    // acquire returns after that answer is lost at once.
    private List<JsonNode> revoked = List.of();
    private final ArrayDeque<SessionState> events = new ArrayDeque<>();
    private final List<Consumer<SessionState>> listeners = new CopyOnWriteArrayList<>();
    private final CompletableFuture<Void> lost = new CompletableFuture<>();

    /**
     * How long before the earliest moment the cluster could grant a lock of
     * the session to someone else its grants are lost: 1% of ttl + lock-delay
     * (clock-rate drift) plus 100 ms (the client's own latency).
     */
    public static Duration lostMargin(Duration ttl, Duration lockDelay) {
        return Duration.ofNanos((ttl.toNanos() + lockDelay.toNanos()) / 100 + LOST_LATENCY);
    }

    /** How long after the send time of the last acknowledged keepalive a session's locks are lost: ttl + lock-delay − margin. */
    public static Duration lostAfter(Duration ttl, Duration lockDelay) {
        return ttl.plus(lockDelay).minus(lostMargin(ttl, lockDelay));
    }

    private Session(Transport t, String id, String name, Duration ttl, Duration lockDelay, Duration grace,
            Consumer<SessionState> listener, long sent) {
        this.t = t;
        this.id = id;
        this.name = name;
        this.ttl = ttl.toNanos();
        this.lockDelay = lockDelay.toNanos();
        this.grace = grace.toNanos();
        this.ackedSent = sent;
        this.lastSend = sent;
        if (listener != null) {
            listeners.add(listener);
        }
        daemon(this::keep, "keepalive");
        daemon(this::watchLease, "lease");
        daemon(this::notifyListeners, "events");
    }

    private static void daemon(Runnable r, String what) {
        Thread th = new Thread(r, "raftlock-" + what);
        th.setDaemon(true);
        th.start();
    }

    static Session open(Transport t, String name, Duration ttl, Duration lockDelay, Duration grace,
            Consumer<SessionState> listener, Duration timeout) throws InterruptedException {
        ObjectNode body = Transport.JSON.createObjectNode();
        body.put("name", name == null ? "" : name);
        if (ttl != null) {
            body.put("ttl", Durations.toWire(ttl));
        }
        if (lockDelay != null) {
            body.put("lock_delay", Durations.toWire(lockDelay));
        }
        long sent = System.nanoTime();
        JsonNode ans = t.call("POST", "/v1/sessions", body, new Transport.Call().deadline(sent + timeout.toNanos()));
        Duration gotTtl = Durations.fromWire(ans.path("ttl").asText("15s"));
        Duration gotDelay = Durations.fromWire(ans.path("lock_delay").asText("0s"));
        return new Session(t, ans.path("id").asText(), name == null ? "" : name, gotTtl, gotDelay,
                grace == null ? DEFAULT_GRACE : grace, listener, sent);
    }

    @Override
    public String toString() {
        return "Session(name=\"" + name + "\", ttl=" + ttl() + ", state=" + state().wire() + ")";
    }

    /** The session id: a secret capability (whoever knows it can release the session's locks or close it). Never log it. */
    public String id() {
        return id;
    }

    /** The session's name (public). */
    public String name() {
        return name;
    }

    /** The lease, as the cluster granted it. */
    public Duration ttl() {
        return Duration.ofNanos(ttl);
    }

    /** How long an expired session's locks stay unavailable. */
    public Duration lockDelay() {
        return Duration.ofNanos(lockDelay);
    }

    /** The current state. */
    public SessionState state() {
        mu.lock();
        try {
            return state;
        } finally {
            mu.unlock();
        }
    }

    /** Whether the session's locks can be trusted now. */
    public boolean isSafe() {
        return state() == SessionState.SAFE;
    }

    /**
     * Calls {@code listener} with each new state (jeopardy, safe again, expired,
     * closed), in order, from the session's event thread (never from the
     * thread that fires a lost signal); it must return quickly.
     */
    public void onState(Consumer<SessionState> listener) {
        listeners.add(listener);
    }

    /**
     * Completes the first time the session's grants can no longer be trusted
     * (its lease lapsed, or it ended), always before the cluster could grant
     * them to anyone else.
     */
    public CompletableFuture<Void> lost() {
        return lost.copy(); // a caller completing it cannot fake a loss
    }

    /** Runs {@code r} when {@link #lost()} completes (at once if it has), on the thread that completes it. */
    public void onLost(Runnable r) {
        lost.thenRun(r);
    }

    /** The System.nanoTime() moment every grant is lost unless a keepalive is acknowledged before. */
    public long lostDeadline() {
        mu.lock();
        try {
            return ackedSent + lostAfter(Duration.ofNanos(ttl), Duration.ofNanos(lockDelay)).toNanos();
        } finally {
            mu.unlock();
        }
    }

    // ---- the lease ----

    private void setState(SessionState st) {
        // mu held
        if (state != st) {
            state = st;
            events.add(st);
            cv.signalAll();
        }
    }

    private void notifyListeners() {
        while (true) {
            SessionState st;
            mu.lock();
            try {
                while (events.isEmpty() && !(stop && (state == SessionState.EXPIRED || state == SessionState.CLOSED))) {
                    cv.awaitUninterruptibly();
                }
                if (events.isEmpty()) {
                    return;
                }
                st = events.poll();
            } finally {
                mu.unlock();
            }
            for (Consumer<SessionState> l : listeners) {
                try {
                    l.accept(st);
                } catch (RuntimeException e) {
                    // the caller's bug must not stop the session
                }
            }
            if (st == SessionState.EXPIRED || st == SessionState.CLOSED) {
                return;
            }
        }
    }

    private void keep() {
        while (true) {
            long now;
            mu.lock();
            try {
                if (stop) {
                    return;
                }
                long interval = state == SessionState.JEOPARDY ? Math.max(ttl / 10, MIN_RETRY) : ttl / 3;
                long wake = lastSend + interval;
                now = System.nanoTime();
                if (now - wake < 0) {
                    cv.awaitNanos(wake - now);
                    continue;
                }
                lastSend = now;
            } catch (InterruptedException e) {
                return;
            } finally {
                mu.unlock();
            }
            long sent = now;
            JsonNode ans;
            try {
                ans = t.call("POST", Transport.sessionPath(id, "/keepalive"), null,
                        new Transport.Call().deadline(sent + Math.max(ttl / 3, MIN_RETRY)).idempotent());
            } catch (RaftlockException e) {
                if (e.code().equals(RaftlockException.SESSION_NOT_FOUND)) {
                    end(SessionState.EXPIRED);
                    return;
                }
                continue;
            } catch (InterruptedException e) {
                return;
            }
            List<Grant> stale = new ArrayList<>();
            List<JsonNode> rs = grantsOf(ans.path("revoked"));
            List<JsonNode> asks = grantsOf(ans.path("release_requested"));
            List<Grant> hit = new ArrayList<>();
            List<JsonNode> hitWhy = new ArrayList<>();
            List<Grant> asked = new ArrayList<>();
            List<JsonNode> askedBy = new ArrayList<>();
            mu.lock();
            try {
                if (stop) {
                    return;
                }
                // A revoked grant is lost, and gone from the cluster (no
                // release): before anything else of the answer.
                revoked = rs;
                for (Grant g : grants) {
                    for (JsonNode r : rs) {
                        if (g.is(r)) {
                            hit.add(g);
                            hitWhy.add(r);
                            break;
                        }
                    }
                }
                grants.removeAll(hit);
                for (Grant g : grants) {
                    for (JsonNode r : asks) {
                        if (g.is(r)) {
                            asked.add(g);
                            askedBy.add(r);
                            break;
                        }
                    }
                }
                if (sent - ackedSent > 0) {
                    ackedSent = sent;
                    try {
                        String w = ans.path("ttl").asText("");
                        if (!w.isEmpty()) {
                            ttl = Durations.fromWire(w).toNanos();
                        }
                    } catch (IllegalArgumentException e) {
                        // keep the ttl we had
                    }
                }
                if (state == SessionState.JEOPARDY && System.nanoTime() - (ackedSent + ttl) < 0) {
                    lapsed = false;
                    setState(SessionState.SAFE);
                    for (Grant g : grants) {
                        if (g.isLost()) {
                            stale.add(g);
                        }
                    }
                }
                cv.signalAll();
            } finally {
                mu.unlock();
            }
            for (int i = 0; i < hit.size(); i++) {
                hit.get(i).revoke(hitWhy.get(i));
            }
            for (int i = 0; i < asked.size(); i++) {
                asked.get(i).ask(askedBy.get(i));
            }
            for (Grant g : stale) { // lost while in jeopardy: give it back
                daemon(g::releaseQuietly, "release");
            }
        }
    }

    /** The objects of a keepalive answer's list field ({@code revoked}, {@code release_requested}). */
    private static List<JsonNode> grantsOf(JsonNode v) {
        if (!v.isArray()) {
            return List.of();
        }
        List<JsonNode> out = new ArrayList<>();
        for (JsonNode g : v) {
            if (g.isObject()) {
                out.add(g);
            }
        }
        return out;
    }

    private void watchLease() {
        while (true) {
            List<Grant> toLose = new ArrayList<>();
            boolean expired;
            boolean lapsedNow = false;
            mu.lock();
            try {
                if (stop) {
                    return;
                }
                long now = System.nanoTime();
                long s = ackedSent;
                long lostAt = s + lostAfter(Duration.ofNanos(ttl), Duration.ofNanos(lockDelay)).toNanos();
                long jeopardyAt = Math.min(s + ttl, lostAt);
                long expireAt = s + ttl + grace;
                expired = now - expireAt >= 0;
                if (!expired) {
                    if (now - jeopardyAt >= 0 && state == SessionState.SAFE) {
                        setState(SessionState.JEOPARDY);
                    }
                    if (now - lostAt >= 0 && !lapsed) {
                        lapsed = true;
                        lapsedNow = true;
                        toLose.addAll(grants);
                    }
                    if (!lapsedNow) {
                        long next = expireAt;
                        if (jeopardyAt - now > 0) {
                            next = Math.min(next, jeopardyAt);
                        }
                        if (lostAt - now > 0) {
                            next = Math.min(next, lostAt);
                        }
                        cv.awaitNanos(Math.max(next - now, 1));
                        continue;
                    }
                }
            } catch (InterruptedException e) {
                return;
            } finally {
                mu.unlock();
            }
            lost.complete(null);
            for (Grant g : toLose) {
                g.lose();
            }
            if (expired) {
                end(SessionState.EXPIRED);
                return;
            }
        }
    }

    void end(SessionState st) {
        List<Grant> gs;
        mu.lock();
        try {
            if (state == SessionState.EXPIRED || state == SessionState.CLOSED) {
                return;
            }
            stop = true;
            setState(st);
            gs = new ArrayList<>(grants);
            grants.clear();
            cv.signalAll();
        } finally {
            mu.unlock();
        }
        lost.complete(null);
        for (Grant g : gs) {
            g.lose();
        }
    }

    /** Whether the session is over (expired or closed). */
    public boolean isOver() {
        SessionState s = state();
        return s == SessionState.EXPIRED || s == SessionState.CLOSED;
    }

    /**
     * Ends the session: every grant is lost at once and released by the
     * cluster without lock-delay. Repeated calls do nothing. The DELETE is
     * tried until the lease could lapse anyway (at least the request
     * timeout); if no node answers by then, or the caller is interrupted,
     * the cluster expires the session at its ttl (and its locks after their
     * lock-delay), and close returns all the same. It throws only for an
     * answer that refuses the call (unauthenticated, permission_denied).
     */
    @Override
    public void close() {
        if (isOver()) {
            return;
        }
        long budget = Math.max(leaseBudget(), t.requestTimeout.toNanos());
        end(SessionState.CLOSED);
        try {
            t.call("DELETE", Transport.sessionPath(id, ""), null,
                    new Transport.Call().deadline(System.nanoTime() + budget).idempotent());
        } catch (RaftlockException e) {
            switch (e.code()) {
                case RaftlockException.SESSION_NOT_FOUND:
                case RaftlockException.UNKNOWN_OUTCOME:
                case RaftlockException.UNREACHABLE:
                case RaftlockException.NO_LEADER:
                    break;
                default:
                    throw e;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- grants ----

    /**
     * Acquires {@code name} in {@code mode} as one new grant (one holder id):
     * {@code wait} null waits as long as it takes, zero tries once, else waits
     * up to it. Throws RaftlockException {@code lock_busy} (a try),
     * {@code wait_timeout}, {@code session_not_found} or
     * {@code invalid_argument}.
     */
    public Grant acquire(String name, Mode mode, Duration wait, String value) throws InterruptedException {
        return acquire(name, mode, wait, value, 0);
    }

    /**
     * As {@link #acquire(String, Mode, Duration, String)}, with {@code permits}
     * N (1 to {@link Sequencer#MAX_SLOTS}, {@link Mode#EXCLUSIVE} only): one
     * slot of the semaphore {@code name} of N slots ({@link Grant#slot()};
     * every holder and waiter asks for the same N; docs/API.md
     * "Semaphores"). 0: a plain lock. Other permits, or permits with
     * {@link Mode#SHARED}, are {@code invalid_argument}, refused before
     * sending.
     */
    public Grant acquire(String name, Mode mode, Duration wait, String value, int permits) throws InterruptedException {
        Grant g = new Grant(this, name, mode, value, permits);
        g.acquire(wait, true);
        return g;
    }

    /** A re-entrant exclusive {@link FencedLock} on {@code name}. */
    public FencedLock lock(String name) {
        return new FencedLock(this, name, Mode.EXCLUSIVE, true, "");
    }

    /** An exclusive {@link FencedLock} on {@code name}, re-entrant per thread or not. */
    public FencedLock lock(String name, boolean reentrant) {
        return new FencedLock(this, name, Mode.EXCLUSIVE, reentrant, "");
    }

    /** A {@link java.util.concurrent.locks.ReadWriteLock} on {@code name}: shared readers, one exclusive writer. */
    public FencedReadWriteLock readWriteLock(String name) {
        return new FencedReadWriteLock(this, name);
    }

    /** The election {@code name}: campaign, resign, observe. */
    public Election election(String name) {
        return new Election(this, name);
    }

    /**
     * Asks the holders of lock {@code name} to release it, on behalf of this
     * session (POST /v1/locks/request-release; write on the lock): each sees
     * it at its next keepalive ({@link Grant#releaseRequested()}) and
     * chooses. Throws RaftlockException {@code not_found} for a lock not
     * held, {@code session_not_found} once the session is over.
     */
    public void requestRelease(String name) throws InterruptedException {
        try {
            Sequencer.checkName(name);
        } catch (MalformedSequencerException e) {
            throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, e.getMessage());
        }
        checkOpen();
        byte[] b = new byte[8];
        new java.security.SecureRandom().nextBytes(b);
        ObjectNode body = Transport.JSON.createObjectNode();
        body.put("name", name);
        body.put("session", id);
        body.put("holder", "request-" + java.util.HexFormat.of().formatHex(b));
        t.call("POST", "/v1/locks/request-release", body,
                new Transport.Call().deadline(System.nanoTime() + Math.max(ttl, t.requestTimeout.toNanos())).idempotent());
    }

    void checkOpen() {
        mu.lock();
        try {
            if (state == SessionState.EXPIRED || state == SessionState.CLOSED) {
                throw new RaftlockException(RaftlockException.SESSION_NOT_FOUND,
                        "session \"" + name + "\" is " + state.wire());
            }
        } finally {
            mu.unlock();
        }
    }

    void register(Grant g) {
        boolean l;
        JsonNode why = null;
        mu.lock();
        try {
            if (state == SessionState.EXPIRED || state == SessionState.CLOSED) {
                throw new RaftlockException(RaftlockException.SESSION_NOT_FOUND,
                        "session \"" + name + "\" is " + state.wire());
            }
            grants.add(g);
            l = lapsed;
            for (JsonNode r : revoked) {
                if (g.is(r)) {
                    why = r;
                    grants.remove(g);
                    break;
                }
            }
        } finally {
            mu.unlock();
        }
        if (why != null) {
            g.revoke(why);
        }
        if (l) {
            g.lose();
        }
    }

    void forget(Grant g) {
        mu.lock();
        try {
            grants.remove(g);
        } finally {
            mu.unlock();
        }
    }

    /** How long a request may take before the lease could lapse. */
    long leaseBudget() {
        return Math.max(lostDeadline() - System.nanoTime(), MIN_RETRY);
    }
}
