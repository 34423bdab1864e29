package io.raftlock.client;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * The pinning check of the virtual-thread tests: runs code under a JFR
 * recording of {@code jdk.VirtualThreadPinned} (threshold 0, with stack
 * traces: every park of a virtual thread that could not unmount) and tells
 * which of the recorded stacks run through the client's own classes (those
 * of the code source {@link FencedLock} was loaded from, so not the tests').
 */
final class PinnedEvents {
    /** The JFR event of a virtual thread that parked or blocked while pinned to its carrier (JDK 21+). */
    static final String EVENT = "jdk.VirtualThreadPinned";

    private PinnedEvents() {
    }

    /** The result of {@code body} and the pinned events recorded while it ran. */
    record Recorded<T>(T result, List<RecordedEvent> events) {
    }

    /** Runs {@code body} under a recording of {@link #EVENT} with threshold 0 and stack traces. */
    static <T> Recorded<T> during(Callable<T> body) throws Exception {
        Path file = Files.createTempFile("raftlock-pinned", ".jfr");
        try {
            T result;
            try (Recording r = new Recording()) {
                r.enable(EVENT).withThreshold(Duration.ZERO).withStackTrace();
                r.start();
                result = body.call();
                r.stop();
                r.dump(file);
            }
            return new Recorded<>(result, RecordingFile.readAllEvents(file));
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** The names of the client's classes (its main sources, compiled): a directory of classes or a jar. */
    static Set<String> clientClasses() throws IOException, URISyntaxException {
        Path where = Path.of(FencedLock.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        Set<String> names = new HashSet<>();
        if (Files.isDirectory(where)) {
            try (Stream<Path> files = Files.walk(where)) {
                files.filter(f -> f.toString().endsWith(".class")).forEach(f -> names.add(className(where.relativize(f).toString())));
            }
        } else {
            try (JarFile jar = new JarFile(where.toFile())) {
                jar.stream().filter(e -> e.getName().endsWith(".class")).forEach(e -> names.add(className(e.getName())));
            }
        }
        if (!names.contains(FencedLock.class.getName())) {
            throw new IllegalStateException("the client's classes were not found at " + where);
        }
        return Collections.unmodifiableSet(names);
    }

    private static String className(String file) {
        return file.substring(0, file.length() - ".class".length()).replace('/', '.').replace('\\', '.');
    }

    /** The frames of {@code e}'s stack whose class is one of {@code client} (a lambda's or hidden class's too), as "Class.method:line". */
    static List<String> clientFrames(RecordedEvent e, Set<String> client) {
        List<String> out = new ArrayList<>();
        RecordedStackTrace st = e.getStackTrace();
        if (st == null) {
            return out;
        }
        for (RecordedFrame f : st.getFrames()) {
            String type = f.getMethod().getType().getName();
            int hidden = type.indexOf("$$");
            if (client.contains(type) || (hidden > 0 && client.contains(type.substring(0, hidden)))) {
                out.add(type + "." + f.getMethod().getName() + ":" + f.getLineNumber());
            }
        }
        return out;
    }

    /** Starts {@code body} on a new virtual thread; the test is skipped below JDK 21. */
    static Thread startVirtual(Runnable body) throws Exception {
        java.lang.reflect.Method start;
        try {
            start = Thread.class.getMethod("startVirtualThread", Runnable.class);
        } catch (NoSuchMethodException e) {
            org.junit.jupiter.api.Assumptions.assumeTrue(false,
                    "virtual threads need JDK 21+; this is " + System.getProperty("java.version"));
            throw e;
        }
        return (Thread) start.invoke(null, body);
    }

    /** Waits (up to a minute) until {@code t} is parked (LockSupport.park) in a method of {@code in}. */
    static void awaitParkedIn(Thread t, Class<?> in) {
        long end = System.nanoTime() + Duration.ofMinutes(1).toNanos();
        while (!parkedIn(t, in)) {
            if (System.nanoTime() > end || !t.isAlive()) {
                throw new AssertionError(t + " did not park in " + in.getName() + " (state " + t.getState() + ")");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(Duration.ofMillis(1).toNanos());
        }
    }

    private static boolean parkedIn(Thread t, Class<?> in) {
        if (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
            return false;
        }
        boolean park = false;
        for (StackTraceElement f : t.getStackTrace()) {
            park |= f.getClassName().equals("java.util.concurrent.locks.LockSupport") && f.getMethodName().startsWith("park");
            if (park && f.getClassName().equals(in.getName())) {
                return true;
            }
        }
        return false;
    }

    /** A short account of an event for a failure message or the log: its duration and its top frames. */
    static String describe(RecordedEvent e) {
        StringBuilder b = new StringBuilder(EVENT).append(' ').append(e.getDuration().toNanos() / 1000).append(" us");
        RecordedStackTrace st = e.getStackTrace();
        if (st != null) {
            st.getFrames().stream().limit(12).forEach(f -> b.append("\n    at ").append(f.getMethod().getType().getName())
                    .append('.').append(f.getMethod().getName()).append(':').append(f.getLineNumber()));
        }
        return b.toString();
    }
}
