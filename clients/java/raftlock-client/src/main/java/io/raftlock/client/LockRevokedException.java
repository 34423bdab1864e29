package io.raftlock.client;

/**
 * Why a grant was revoked by the cluster: an operator's revocation
 * ({@link #kind()} {@code "admin"}, with the operator's {@link #reason()})
 * or the end of its hold limit ({@code "max_hold"}). The grant's lost signal
 * completed when a keepalive answer named it, before the cluster could grant
 * the lock again (docs/API.md, "Revocation and operator sessions"). Its code
 * is {@code lock_lost}, as {@code raftlock exec} reports it. Never thrown by
 * the client: read it from {@link Grant#revoked()} or
 * {@link FencedLock#revoked()}.
 */
public final class LockRevokedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    /** The code of a lost grant. */
    public static final String LOCK_LOST = "lock_lost";

    private final String name;
    private final long token;
    private final String kind;
    private final String reason;

    /** A revocation of the grant of {@code name} with {@code token}, of {@code kind}, for {@code reason}. */
    public LockRevokedException(String name, long token, String kind, String reason) {
        super(LOCK_LOST, "max_hold".equals(kind)
                ? "lock \"" + name + "\" (token " + token + ") revoked: its hold limit (max_hold) ran out"
                : "lock \"" + name + "\" (token " + token + ") revoked by an operator: " + reason);
        this.name = name;
        this.token = token;
        this.kind = kind;
        this.reason = reason;
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** The revoked grant's fencing token. */
    public long token() {
        return token;
    }

    /** {@code "admin"} (an operator's revocation) or {@code "max_hold"} (the grant's hold limit). */
    public String kind() {
        return kind;
    }

    /** The operator's reason (empty for a hold limit's). */
    public String reason() {
        return reason;
    }
}
