package io.raftlock.client;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What a protected resource uses to validate fencing tokens (docs/DESIGN.md,
 * "Sequencers"; the rules are pinned by testdata/fence-vectors.json).
 *
 * <p>Per lock name it keeps two marks, the highest exclusive token and the
 * highest token of any mode it admitted: a shared sequencer is current unless
 * a higher exclusive token was admitted; an exclusive sequencer is current
 * unless a higher token of either mode was admitted. A token equal to a mark
 * is admitted. Safe for concurrent use; marks live in memory only.
 */
public final class Fence {
    private final ReentrantLock mu = new ReentrantLock();
    private final Map<String, long[]> marks = new HashMap<>(); // name -> {any, exclusive}

    /** Checks the printable form: parses it, then {@link #check(Sequencer)}. */
    public void check(String sequencer) throws StaleSequencerException {
        check(Sequencer.parse(sequencer));
    }

    /**
     * Admits {@code s} and raises the marks, or throws StaleSequencerException
     * (superseded) or MalformedSequencerException (not a valid sequencer).
     */
    public void check(Sequencer s) throws StaleSequencerException {
        s.validate();
        mu.lock();
        try {
            long[] m = marks.getOrDefault(s.name(), new long[] {0, 0});
            if (s.mode() == Mode.SHARED) {
                if (Long.compareUnsigned(s.token(), m[1]) < 0) {
                    throw new StaleSequencerException("lock \"" + s.name() + "\": shared token "
                            + Long.toUnsignedString(s.token()) + " is lower than the highest exclusive token seen, "
                            + Long.toUnsignedString(m[1]));
                }
                long any = Long.compareUnsigned(s.token(), m[0]) > 0 ? s.token() : m[0];
                marks.put(s.name(), new long[] {any, m[1]});
                return;
            }
            if (Long.compareUnsigned(s.token(), m[0]) < 0) {
                throw new StaleSequencerException("lock \"" + s.name() + "\": token " + Long.toUnsignedString(s.token())
                        + " is lower than the highest seen, " + Long.toUnsignedString(m[0]));
            }
            marks.put(s.name(), new long[] {s.token(), s.token()});
        } finally {
            mu.unlock();
        }
    }

    /** The highest token of either mode admitted for {@code name} (0: none). */
    public long highest(String name) {
        mu.lock();
        try {
            return marks.getOrDefault(name, new long[] {0, 0})[0];
        } finally {
            mu.unlock();
        }
    }

    /** The highest exclusive token admitted for {@code name} (0: none). */
    public long highestExclusive(String name) {
        mu.lock();
        try {
            return marks.getOrDefault(name, new long[] {0, 0})[1];
        } finally {
            mu.unlock();
        }
    }
}
