package io.raftlock.client;

import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Durations on the wire: Go duration strings ("15s", "1500ms", "1m30s"). */
public final class Durations {
    private static final Pattern PART = Pattern.compile("([0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)");

    private Durations() {
    }

    /** Formats {@code d} as a Go duration string, to the microsecond. */
    public static String toWire(Duration d) {
        long us = Math.round(d.toNanos() / 1000.0);
        if (us % 1_000_000 == 0) {
            return (us / 1_000_000) + "s";
        }
        if (us % 1000 == 0) {
            return (us / 1000) + "ms";
        }
        return us + "us";
    }

    /** Parses a Go duration string; throws IllegalArgumentException on anything else. */
    public static Duration fromWire(String text) {
        String t = text.strip();
        double sign = 1;
        if (!t.isEmpty() && (t.charAt(0) == '+' || t.charAt(0) == '-')) {
            sign = t.charAt(0) == '-' ? -1 : 1;
            t = t.substring(1);
        }
        if (t.equals("0")) {
            return Duration.ZERO;
        }
        double nanos = 0;
        int pos = 0;
        Matcher m = PART.matcher(t);
        while (m.find() && m.start() == pos) {
            double n = Double.parseDouble(m.group(1));
            switch (m.group(2)) {
                case "ns": nanos += n; break;
                case "us": case "µs": case "μs": nanos += n * 1e3; break;
                case "ms": nanos += n * 1e6; break;
                case "s": nanos += n * 1e9; break;
                case "m": nanos += n * 60e9; break;
                default: nanos += n * 3600e9; break;
            }
            pos = m.end();
        }
        if (t.isEmpty() || pos != t.length()) {
            throw new IllegalArgumentException("not a duration: \"" + text + "\"");
        }
        return Duration.ofNanos(Math.round(sign * nanos));
    }

    /** Seconds (a JSON number of the conformance protocol) as a Duration. */
    public static Duration ofSeconds(double seconds) {
        return Duration.ofNanos(Math.round(seconds * 1e9));
    }
}
