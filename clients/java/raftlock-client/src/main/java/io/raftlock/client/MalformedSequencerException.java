package io.raftlock.client;

/** Text that is not a canonical sequencer, or an invalid lock name. */
public class MalformedSequencerException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** With a message saying what is wrong. */
    public MalformedSequencerException(String message) {
        super(message);
    }
}
