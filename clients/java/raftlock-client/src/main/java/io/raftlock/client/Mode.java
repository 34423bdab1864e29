package io.raftlock.client;

/** A lock's mode: one exclusive holder, or any number of shared holders. */
public enum Mode {
    /** One holder (a writer, a leader). */
    EXCLUSIVE("exclusive", "x"),
    /** Any number of holders at once (readers). */
    SHARED("shared", "s");

    private final String wire;
    private final String letter;

    Mode(String wire, String letter) {
        this.wire = wire;
        this.letter = letter;
    }

    /** The mode's name on the wire ("exclusive", "shared"). */
    public String wire() {
        return wire;
    }

    /** The mode's letter in a sequencer ("x", "s"). */
    public String letter() {
        return letter;
    }

    /** The mode of a wire name; throws IllegalArgumentException on another. */
    public static Mode ofWire(String s) {
        if (s == null || s.isEmpty() || s.equals("exclusive")) {
            return EXCLUSIVE;
        }
        if (s.equals("shared")) {
            return SHARED;
        }
        throw new IllegalArgumentException("unknown mode \"" + s + "\"");
    }
}
