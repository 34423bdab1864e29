package io.raftlock.client;

/** A sequencer whose grant has been superseded (see {@link Fence}). */
public class StaleSequencerException extends Exception {
    private static final long serialVersionUID = 1L;

    /** With a message naming the lock and the marks. */
    public StaleSequencerException(String message) {
        super(message);
    }
}
