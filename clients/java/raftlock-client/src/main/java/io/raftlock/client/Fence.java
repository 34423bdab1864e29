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
 * admitted.
 *
 * <p>Before those rules comes the tenure rule. A name's config (plain, or a
 * semaphore of N permits: {@link Sequencer#config()}) changes only after it
 * was freed, and every later grant has a higher token. So the fence keeps the
 * config of the highest token and the highest token of another config: a
 * sequencer of another config below the highest token is stale, and so is one
 * of the same config below the highest token of another. Safe for concurrent
 * use; marks live in memory only.
 */
public final class Fence {
    private final ReentrantLock mu = new ReentrantLock();
    private final Map<String, long[]> marks = new HashMap<>(); // name -> {any, exclusive}
    private final Map<String, Map<Integer, Long>> slots = new HashMap<>(); // name -> slot -> highest
    private final Map<String, long[]> tenures = new HashMap<>(); // name -> {config of any, other}

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
            long[] t = tenures.getOrDefault(s.name(), new long[] {0, 0});
            int c = s.config();
            if (c != t[0] && Long.compareUnsigned(s.token(), m[0]) < 0) {
                throw staleTenure(s, m[0], configName(t[0]));
            }
            if (c == t[0] && Long.compareUnsigned(s.token(), t[1]) < 0) {
                throw staleTenure(s, t[1], "not a " + configName(c));
            }
            admitMode(s, m);
            if (c != t[0] && Long.compareUnsigned(s.token(), m[0]) > 0) {
                tenures.put(s.name(), new long[] {c, m[0]});
            }
        } finally {
            mu.unlock();
        }
    }

    private static StaleSequencerException staleTenure(Sequencer s, long high, String highKind) {
        return new StaleSequencerException("lock \"" + s.name() + "\": token " + Long.toUnsignedString(s.token()) + " ("
                + configName(s.config()) + ") is lower than token " + Long.toUnsignedString(high) + " (" + highKind
                + "): the name's kind or permits changed since the grant");
    }

    private static String configName(long c) {
        return c == 0 ? "plain lock" : "semaphore of " + c;
    }

    /** The mode and slot rules; the caller holds mu. */
    private void admitMode(Sequencer s, long[] m) throws StaleSequencerException {
        if (s.isSlot()) {
            if (Long.compareUnsigned(s.token(), m[1]) < 0) {
                throw new StaleSequencerException("lock \"" + s.name() + "\": slot " + s.slot() + " token "
                        + Long.toUnsignedString(s.token()) + " is lower than the highest exclusive token seen, "
                        + Long.toUnsignedString(m[1]));
            }
            long high = slots.getOrDefault(s.name(), Map.of()).getOrDefault(s.slot(), 0L);
            if (Long.compareUnsigned(s.token(), high) < 0) {
                throw new StaleSequencerException("lock \"" + s.name() + "\": slot " + s.slot() + " token "
                        + Long.toUnsignedString(s.token()) + " is lower than the highest token of that slot seen, "
                        + Long.toUnsignedString(high));
            }
            slots.computeIfAbsent(s.name(), k -> new HashMap<>()).put(s.slot(), s.token());
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
