package io.raftlock.client;

/**
 * A leader of an election: what it campaigned with ({@code value}), its
 * term's {@code token}, its session's name, and {@code gap}: leaders elected
 * between the previous one reported and this one may be missing.
 *
 * @param election the election's name
 * @param value what the leader campaigned with
 * @param token its term's fencing token
 * @param sessionName its session's name
 * @param gap whether leaders before it may be missing
 */
public record Leader(String election, String value, long token, String sessionName, boolean gap) {
    /** The term's sequencer (exclusive). */
    public Sequencer sequencer() {
        return new Sequencer(election, Mode.EXCLUSIVE, token);
    }
}
