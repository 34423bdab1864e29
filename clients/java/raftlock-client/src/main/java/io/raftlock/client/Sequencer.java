package io.raftlock.client;

import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One grant of one lock: its name, mode and fencing token; for one slot of a
 * semaphore, the slot and the semaphore's permits too. {@link #toString()} is
 * the stable printable form {@code rl1:<x|s>:<token>:<name>}, or
 * {@code rl1:p<slot>/<permits>:<token>:<name>} for a slot (mode exclusive,
 * slot &lt; permits &lt;= 256); the token is an unsigned 64-bit integer
 * (compare with {@link Long#compareUnsigned}).
 *
 * @param name the lock's name
 * @param mode the grant's mode
 * @param token the fencing token (unsigned, positive)
 * @param slot the semaphore slot (0 to permits-1), or {@link #NO_SLOT} for a
 *     plain lock's grant
 * @param permits the semaphore's permits (1 to {@link #MAX_SLOTS}), or 0 for
 *     a plain lock's grant
 */
public record Sequencer(String name, Mode mode, long token, int slot, int permits) {
    /** The slot of a plain lock's sequencer: none. */
    public static final int NO_SLOT = -1;

    /** A semaphore has at most this many permits (the cluster's MaxPermits). */
    public static final int MAX_SLOTS = 256;

    private static final Pattern SLOT = Pattern.compile("p(0|[1-9][0-9]{0,2})/(0|[1-9][0-9]{0,2})");
    private static final Pattern OLD_SLOT = Pattern.compile("p(0|[1-9][0-9]*)");

    /**
     * A plain lock's sequencer (no slot).
     *
     * @param name the lock's name
     * @param mode the grant's mode
     * @param token the fencing token (unsigned, positive)
     */
    public Sequencer(String name, Mode mode, long token) {
        this(name, mode, token, NO_SLOT, 0);
    }

    /**
     * What a stored lock keeps until it is freed: 0 for a plain lock's
     * sequencer, the permits for a semaphore slot's. Two grants whose config
     * differs belong to different tenures of the name.
     */
    public int config() {
        return isSlot() ? permits : 0;
    }

    /** Whether this is the sequencer of one slot of a semaphore. */
    public boolean isSlot() {
        return slot != NO_SLOT;
    }

    /** The longest lock name, in bytes of UTF-8. */
    public static final int MAX_NAME_BYTES = 512;
    private static final Pattern TOKEN = Pattern.compile("[1-9][0-9]*");

    @Override
    public String toString() {
        String m = isSlot() ? "p" + slot + "/" + permits : mode.letter();
        return "rl1:" + m + ":" + Long.toUnsignedString(token) + ":" + name;
    }

    /** Parses the printable form; accepts exactly the canonical form. */
    public static Sequencer parse(String text) {
        String[] parts = text.split(":", 4);
        if (parts.length != 4 || !parts[0].equals("rl1")) {
            throw new MalformedSequencerException("\"" + text + "\": want rl1:<x|s>:<token>:<name>");
        }
        Mode mode;
        int slot = NO_SLOT;
        int permits = 0;
        Matcher sm = SLOT.matcher(parts[1]);
        if (parts[1].equals("x")) {
            mode = Mode.EXCLUSIVE;
        } else if (parts[1].equals("s")) {
            mode = Mode.SHARED;
        } else if (sm.matches()) {
            mode = Mode.EXCLUSIVE;
            slot = Integer.parseInt(sm.group(1));
            permits = Integer.parseInt(sm.group(2));
            if (permits == 0 || permits > MAX_SLOTS || slot >= permits) {
                throw new MalformedSequencerException("\"" + text
                        + "\": slot mode must be p<slot>/<permits>, decimal, with slot < permits <= " + MAX_SLOTS);
            }
        } else if (OLD_SLOT.matcher(parts[1]).matches()) {
            throw new MalformedSequencerException("\"" + text
                    + "\": a slot sequencer must name its semaphore's permits (p<slot>/<permits>); the p<slot> form"
                    + " of unreleased builds is no longer accepted: acquire the semaphore again");
        } else {
            throw new MalformedSequencerException("\"" + text + "\": mode must be x, s or p<slot>/<permits>");
        }
        long token;
        try {
            if (!TOKEN.matcher(parts[2]).matches()) {
                throw new NumberFormatException();
            }
            token = Long.parseUnsignedLong(parts[2]);
        } catch (NumberFormatException e) {
            throw new MalformedSequencerException("\"" + text + "\": token must be a positive decimal integer");
        }
        try {
            checkName(parts[3]);
        } catch (MalformedSequencerException e) {
            throw new MalformedSequencerException("\"" + text + "\": " + e.getMessage());
        }
        return new Sequencer(parts[3], mode, token, slot, permits);
    }

    /** Throws MalformedSequencerException unless this could have come from {@link #parse}. */
    public void validate() {
        checkName(name);
        if (mode == null) {
            throw new MalformedSequencerException("lock \"" + name + "\": no mode");
        }
        if (token == 0) {
            throw new MalformedSequencerException("lock \"" + name + "\": token must be positive");
        }
        if (isSlot() && (mode != Mode.EXCLUSIVE || slot < 0 || permits <= 0 || permits > MAX_SLOTS
                || slot >= permits)) {
            throw new MalformedSequencerException("lock \"" + name
                    + "\": a slot sequencer is exclusive, of a slot below its permits, at most " + MAX_SLOTS);
        }
        if (!isSlot() && permits != 0) {
            throw new MalformedSequencerException("lock \"" + name + "\": permits on a plain lock's sequencer");
        }
    }

    /**
     * Throws MalformedSequencerException unless {@code name} is a valid lock
     * name: 1 to 512 bytes of UTF-8 without control characters.
     */
    public static void checkName(String name) {
        if (name == null || name.isEmpty()) {
            throw new MalformedSequencerException("lock name must not be empty");
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < name.length() && Character.isLowSurrogate(name.charAt(i + 1))) {
                i++;
                continue;
            }
            if (Character.isSurrogate(c)) {
                throw new MalformedSequencerException("lock name is not valid UTF-8");
            }
            if (Character.getType(c) == Character.CONTROL) {
                throw new MalformedSequencerException(String.format("lock name contains control character U+%04X", (int) c));
            }
        }
        int n = name.getBytes(StandardCharsets.UTF_8).length;
        if (n > MAX_NAME_BYTES) {
            throw new MalformedSequencerException("lock name is " + n + " bytes; the limit is " + MAX_NAME_BYTES);
        }
    }
}
