package io.raftlock.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * One grant of a lock to a session, under one holder id for its lifetime
 * (the id that makes an acquire safe to retry after an unknown outcome, and
 * keeps a waiter's FIFO place across long waits). {@link #lost()} completes
 * when the grant can no longer be trusted, always before the cluster could
 * grant the lock to anyone else; {@link #revoked()} says when that was the
 * cluster's revocation, and why. {@link #releaseRequested()} completes when
 * another session asks the holder to release. A grant of one slot of a
 * semaphore ({@link Session#acquire(String, Mode, Duration, String, int)})
 * has its {@link #permits()} and {@link #slot()}, which its sequencer names.
 */
public final class Grant {
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Session session;
    private final String name;
    private final Mode mode;
    private final String value;
    private final String holder;
    private final int permits;
    private final CompletableFuture<Void> lost = new CompletableFuture<>();
    private final AtomicReference<LockRevokedException> revoked = new AtomicReference<>();
    private final CompletableFuture<ReleaseRequest> requested = new CompletableFuture<>();
    private volatile Sequencer sequencer;
    private volatile boolean held;

    Grant(Session session, String name, Mode mode, String value) {
        this(session, name, mode, value, 0);
    }

    Grant(Session session, String name, Mode mode, String value, int permits) {
        this.session = session;
        this.name = name;
        this.mode = mode;
        this.value = value == null ? "" : value;
        this.permits = permits;
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        this.holder = HexFormat.of().formatHex(b);
    }

    @Override
    public String toString() {
        return "Grant(\"" + name + "\", " + mode.wire() + ", sequencer=" + sequencer + ")";
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** The grant's mode. */
    public Mode mode() {
        return mode;
    }

    /** The holder id (not a secret: readers of the lock see it). */
    public String holder() {
        return holder;
    }

    /** The grant's sequencer (null before the grant): pass it to the resource you protect. */
    public Sequencer sequencer() {
        return sequencer;
    }

    /** The semaphore's permits the grant was asked with (0: a plain lock). */
    public int permits() {
        return permits;
    }

    /**
     * The semaphore slot granted (0 to permits-1), as its sequencer names it;
     * {@link Sequencer#NO_SLOT} before the grant and on a plain lock.
     */
    public int slot() {
        Sequencer s = sequencer;
        return s == null ? Sequencer.NO_SLOT : s.slot();
    }

    /** The grant's fencing token (0 before the grant). */
    public long token() {
        Sequencer s = sequencer;
        return s == null ? 0 : s.token();
    }

    /** Completes when the grant is lost (or released). */
    public CompletableFuture<Void> lost() {
        return lost.copy(); // a caller completing it cannot fake a loss
    }

    /** Whether the grant has been lost (or released). */
    public boolean isLost() {
        return lost.isDone();
    }

    /** Runs {@code r} when the grant is lost (at once if it is), on the thread that loses it; it must return quickly. */
    public void onLost(Runnable r) {
        lost.thenRun(r);
    }

    /**
     * Why the cluster revoked the grant (an operator's revocation or its hold
     * limit), set before {@link #lost()} completes; empty if it did not.
     */
    public Optional<LockRevokedException> revoked() {
        return Optional.ofNullable(revoked.get());
    }

    /**
     * Completes, with who asked, when another session asks the holder to
     * release the grant (at the holder's next keepalive). Nothing else
     * changes: the holder chooses whether and when to release.
     */
    public CompletableFuture<ReleaseRequest> releaseRequested() {
        return requested.copy(); // a caller completing it cannot fake a request
    }

    /** Runs {@code c} with the release request when one comes (at once if it has), on the session's thread; it must return quickly. */
    public void onReleaseRequested(Consumer<ReleaseRequest> c) {
        requested.thenAccept(c);
    }

    void lose() {
        lost.complete(null);
    }

    /** Whether a keepalive answer's grant {@code g} is this grant. */
    boolean is(JsonNode g) {
        long tok = token();
        return tok != 0 && g.path("name").asText("").equals(name) && g.path("holder").asText("").equals(holder)
                && g.path("token").asLong(0) == tok;
    }

    /** Loses the grant, revoked as {@code g} says: it is gone on the cluster, nothing to release. */
    void revoke(JsonNode g) {
        String kind = g.path("kind").asText("");
        revoked.compareAndSet(null, new LockRevokedException(name, token(), kind.isEmpty() ? "admin" : kind,
                g.path("reason").asText("")));
        held = false;
        lose();
    }

    /** Completes {@link #releaseRequested()} with who asked, once. */
    void ask(JsonNode g) {
        requested.complete(new ReleaseRequest(g.path("by_session_handle").asText(""),
                g.path("by_session_name").asText(""), g.path("by_holder").asText(""), g.path("at").asText("")));
    }

    /**
     * Acquires: once ({@code wait} zero), for up to {@code wait}, or as long
     * as it takes ({@code wait} null). Waits run as slices of at most
     * {@link Session#LOCK_POLL_SLICE}, re-issued with the same holder id, so
     * the FIFO place is kept; an attempt whose outcome is unknown is retried
     * with the same holder id. A grant answered {@link Session#lostAfter} or
     * more after its request was sent is not trusted (a revocation may have
     * come and gone meanwhile): the request is sent again, and only an answer
     * in time is taken; if the grant is gone by then, a try throws
     * {@code lock_busy} and a wait waits on.
     */
    void acquire(Duration wait, boolean interruptible) throws InterruptedException {
        Session s = session;
        try {
            Sequencer.checkName(name);
        } catch (MalformedSequencerException e) {
            throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, e.getMessage());
        }
        if (permits < 0 || permits > Sequencer.MAX_SLOTS) {
            throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, "lock \"" + name + "\": permits is " + permits
                    + "; it must be 0 (a plain lock) to " + Sequencer.MAX_SLOTS);
        }
        if (permits > 0 && mode != Mode.EXCLUSIVE) {
            throw new RaftlockException(RaftlockException.INVALID_ARGUMENT, "lock \"" + name
                    + "\": a semaphore's slots are exclusive: permits with shared");
        }
        s.checkOpen();
        ObjectNode body = Transport.JSON.createObjectNode();
        body.put("name", name);
        body.put("session", s.id());
        body.put("holder", holder);
        body.put("mode", mode.wire());
        if (!value.isEmpty()) {
            body.put("value", value);
        }
        if (permits > 0) {
            body.put("permits", permits);
        }
        boolean waiting = wait == null || !wait.isZero() && !wait.isNegative();
        long until = wait == null ? 0 : System.nanoTime() + wait.toNanos();
        long maxWait = TimeUnit.SECONDS.toNanos(600);
        boolean uncertain = false;
        while (true) {
            Transport.Call c = new Transport.Call().idempotent();
            if (!interruptible) {
                c.uninterruptible();
            }
            if (waiting) {
                long left = wait == null ? maxWait : until - System.nanoTime();
                if (left <= 0) {
                    abandon(uncertain);
                    throw new RaftlockException(RaftlockException.WAIT_TIMEOUT, "lock \"" + name + "\": the wait ran out");
                }
                body.put("wait", Durations.toWire(Duration.ofNanos(Math.min(left, maxWait))));
                // The server holds a waiting request up to the slice; its answer gets a second more.
                long attempt = Math.min(left, Session.LOCK_POLL_SLICE.toNanos()) + TimeUnit.SECONDS.toNanos(1);
                c.attempt(Duration.ofNanos(attempt)).deadline(System.nanoTime() + attempt);
            } else {
                c.deadline(System.nanoTime() + Math.max(s.leaseBudget(), s.t.requestTimeout.toNanos()));
            }
            JsonNode ans;
            long sent = System.nanoTime();
            try {
                ans = s.t.call("POST", "/v1/acquire", body, c);
            } catch (InterruptedException e) {
                abandon(true);
                throw e;
            } catch (RaftlockException e) {
                String code = e.code();
                if (code.equals(RaftlockException.WAIT_TIMEOUT)) {
                    uncertain = false;
                    if (wait == null || System.nanoTime() - until < 0) {
                        continue;
                    }
                    throw e;
                }
                if ((code.equals(RaftlockException.UNKNOWN_OUTCOME) || code.equals(RaftlockException.UNREACHABLE)) && waiting) {
                    uncertain = true; // the slice ended: ask again, same holder
                    continue;
                }
                if (code.equals(RaftlockException.LOCK_BUSY)) {
                    uncertain = false;
                }
                if (code.equals(RaftlockException.SESSION_NOT_FOUND)) {
                    s.end(SessionState.EXPIRED);
                }
                if (uncertain) {
                    abandon(true);
                }
                throw e;
            }
            if (System.nanoTime() - sent >= Session.lostAfter(s.ttl(), s.lockDelay()).toNanos()) {
                // Too late to trust: a revocation may have come and left the
                // keepalive answers meanwhile. Ask again (same holder: the same
                // grant if still held); only a timely answer counts.
                uncertain = true;
                continue;
            }
            Sequencer seq;
            String text = ans.path("sequencer").asText("");
            if (!text.isEmpty()) {
                seq = Sequencer.parse(text);
            } else if (permits > 0) {
                seq = new Sequencer(ans.path("name").asText(name), Mode.EXCLUSIVE, ans.path("token").asLong(),
                        ans.path("slot").asInt(), permits);
            } else {
                seq = new Sequencer(ans.path("name").asText(name), Mode.ofWire(ans.path("mode").asText(mode.wire())),
                        ans.path("token").asLong());
            }
            sequencer = seq;
            held = true;
            s.register(this);
            return;
        }
    }

    /** Gives back, in the background, a place or grant an abandoned acquire may hold. */
    private void abandon(boolean uncertain) {
        if (uncertain) {
            Thread th = new Thread(this::releaseQuietly, "raftlock-abandon");
            th.setDaemon(true);
            th.start();
        }
    }

    void releaseQuietly() {
        try {
            sendRelease(false);
        } catch (RaftlockException | InterruptedException e) {
            // best effort: the cluster frees it with the session
        }
    }

    private void sendRelease(boolean interruptible) throws InterruptedException {
        Session s = session;
        ObjectNode body = Transport.JSON.createObjectNode();
        body.put("name", name);
        body.put("session", s.id());
        body.put("holder", holder);
        Transport.Call c = new Transport.Call().idempotent()
                .deadline(System.nanoTime() + Math.max(s.ttl().toNanos(), s.t.requestTimeout.toNanos()));
        if (!interruptible) {
            c.uninterruptible();
        }
        try {
            s.t.call("POST", "/v1/release", body, c);
        } catch (RaftlockException e) {
            if (!e.code().equals(RaftlockException.NOT_HOLDER) && !e.code().equals(RaftlockException.SESSION_NOT_FOUND)) {
                throw e;
            }
        }
    }

    /**
     * Releases the grant (completing {@link #lost()} first). Once it has
     * succeeded, or once the session is over, it does nothing. The release is
     * retried (same holder) until it is known to be done or the deadline of
     * max(ttl, request timeout) passes; an interrupt does not cut it short.
     */
    public void release() {
        lose();
        if (!held) {
            return;
        }
        if (!session.isOver()) {
            try {
                sendRelease(false);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        held = false;
        session.forget(this);
    }

    /** Gives a leadership up (release): the next campaigner is elected at once. */
    public void resign() {
        release();
    }
}
