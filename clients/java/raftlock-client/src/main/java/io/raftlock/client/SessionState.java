package io.raftlock.client;

/** A session's state, as its client tracks it. */
public enum SessionState {
    /** A keepalive was acknowledged within the lease: its locks can be trusted. */
    SAFE,
    /** No keepalive acknowledged for a ttl: the locks may be lost; keepalives speed up. */
    JEOPARDY,
    /** Jeopardy lasted the grace, or the cluster ended the session: it is over. */
    EXPIRED,
    /** Closed by its owner. */
    CLOSED;

    /** The state's wire name ("safe", "jeopardy", "expired", "closed"). */
    public String wire() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
