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
 * unless a higher token of either mode (or of any slot) was admitted. Per
 * semaphore slot it keeps one more mark: a slot sequencer is current unless a
 * higher token of the same slot, or a higher exclusive token, was admitted
 * (slot grants do not count as exclusive). A token equal to a mark is
 * admitted. Safe for concurrent use; marks live in memory only.
 */
public final class Fence {
    private final ReentrantLock mu = new ReentrantLock();
    private final Map<String, long[]> marks = new HashMap<>(); // name -> {any, exclusive}
    private final Map<String, Map<Integer, Long>> slots = new HashMap<>(); // name -> slot -> highest

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
            if (s.isSlot()) {
                if (Long.compareUnsigned(s.token(), m[1]) < 0) {
                    throw new StaleSequencerException("lock \"" + s.name() + "\": slot " + s.slot() + " token "
                            + Long.toUnsignedString(s.token()) + " is lower than the highest exclusive token seen, "
                            + Long.toUnsignedString(m[1]));
                }
                Map<Integer, Long> ss = slots.computeIfAbsent(s.name(), k -> new HashMap<>());
                long high = ss.getOrDefault(s.slot(), 0L);
                if (Long.compareUnsigned(s.token(), high) < 0) {
                    throw new StaleSequencerException("lock \"" + s.name() + "\": slot " + s.slot() + " token "
                            + Long.toUnsignedString(s.token()) + " is lower than the highest token of that slot seen, "
                            + Long.toUnsignedString(high));
                }
                ss.put(s.slot(), s.token());
                long any = Long.compareUnsigned(s.token(), m[0]) > 0 ? s.token() : m[0];
                marks.put(s.name(), new long[] {any, m[1]});
                return;
            }
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

    /** The highest token admitted for {@code slot} of semaphore {@code name} (0: none). */
    public long highestSlot(String name, int slot) {
        mu.lock();
        try {
            return slots.getOrDefault(name, Map.of()).getOrDefault(slot, 0L);
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
