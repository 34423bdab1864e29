package io.raftlock.client;

/**
 * An error of the raftlock client, with the stable {@link #code()} of
 * docs/API.md's table ({@code invalid_argument}, {@code session_not_found},
 * {@code lock_busy}, {@code not_holder}, {@code wait_timeout},
 * {@code wait_cancelled}, {@code no_leader}, {@code unknown_outcome},
 * {@code unauthenticated}, {@code permission_denied}, ...) or the client-side
 * {@code unreachable}. A message never holds a session id or an ACL secret.
 */
public class RaftlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Malformed input: a bad name, a duration out of range. */
    public static final String INVALID_ARGUMENT = "invalid_argument";
    /** The session is unknown, closed or expired. */
    public static final String SESSION_NOT_FOUND = "session_not_found";
    /** A try-lock found the lock held, or in lock-delay. */
    public static final String LOCK_BUSY = "lock_busy";
    /** A release by a holder that does not hold the lock. */
    public static final String NOT_HOLDER = "not_holder";
    /** A waiting acquire's wait ran out; the caller is no longer queued. */
    public static final String WAIT_TIMEOUT = "wait_timeout";
    /** No leader reachable now and nothing was applied. */
    public static final String NO_LEADER = "no_leader";
    /** The client gave up on a request that may have been applied. */
    public static final String UNKNOWN_OUTCOME = "unknown_outcome";
    /** No node answered before the call's deadline (client-side only). */
    public static final String UNREACHABLE = "unreachable";
    /** A bug or an answer the client cannot read. */
    public static final String INTERNAL = "internal";

    private final String code;

    /** An error of {@code code} (a stable code of docs/API.md) with a message. */
    public RaftlockException(String code, String message) {
        super(code + ": " + message);
        this.code = code == null || code.isEmpty() ? INTERNAL : code;
    }

    /** The stable error code. */
    public String code() {
        return code;
    }

    /** The message without the code prefix. */
    public String detail() {
        String m = getMessage();
        int i = m.indexOf(": ");
        return i < 0 ? m : m.substring(i + 2);
    }
}
